"""Lumina.

Importing any part of Lumina defers two package `__init__`s it does not need (see core/lazy_imports): the
REST-namespace client inside `import lancedb`, and bm25s's, of which Lumina reads only the stop-word lists (its
`__init__` imports scipy.sparse and numba: ~0.5 s that a search process paid on its first query).
"""

from lumina_assets.core.lazy_imports import defer_package_init

defer_package_init()
defer_package_init("bm25s")
