"""Search over candidate sets. Importing the package caps glibc's malloc arenas before any thread starts (one 64 MB
arena per allocating thread would otherwise multiply; docs/search-at-scale.md)."""


def _cap_malloc_arenas(arenas: int = 2) -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc: nothing to cap
        pass


_cap_malloc_arenas()
