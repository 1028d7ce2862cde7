"""Run one piece of untrusted-input work (open a PDF, parse it) in a child process with hard limits: an
address-space limit (`RLIMIT_AS`) in the child and a wall-clock deadline in the parent, ending as an
`Outcome` with a reason (`time_limit`, `memory_limit`, `worker_crashed`). Children fork from a forkserver
with the heavy modules imported."""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_WALL_SECONDS = 120.0
DEFAULT_MEMORY_MB = 2048
# Modules every child needs, imported once in the forkserver instead of once per document; `__main__` too,
# or every child would re-run the main script (so a script calling this needs the `if __name__` guard).
PRELOAD = ["__main__", "pymupdf", "lumina_assets.parsing.pymupdf_parser", "lumina_assets.corpus.local"]
# How MuPDF and Python report an allocation refused under RLIMIT_AS.
ALLOCATION_FAILED = re.compile(
    r"\b(?:malloc|calloc|realloc)\b.*\bfailed\b|out of memory|cannot allocate|MemoryError", re.IGNORECASE
)


@dataclass(frozen=True)
class Limits:
    """Per-document limits. `memory_mb` is what one document may add to the worker's address space on top
    of the libraries it starts with; 0 switches a limit off."""

    wall_seconds: float = DEFAULT_WALL_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB


@dataclass
class Outcome:
    value: Any = None
    reason: str | None = None  # None when the function returned; else a stable failure code
    detail: str = ""
    error_type: str | None = None
    seconds: float = 0.0
    peak_rss_mb: float | None = None  # the child's peak resident memory, when it lived to report it

    @property
    def ok(self) -> bool:
        return self.reason is None


@functools.cache
def _forkserver():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _address_space_bytes() -> int:
    """Current virtual size of this process (Linux /proc); 0 where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _is_allocation_failure(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or bool(ALLOCATION_FAILED.search(f"{type(exc).__name__}: {exc}"))


def _failure_message(exc: BaseException, memory_limited: bool) -> tuple:
    reason = getattr(exc, "reason", None)
    detail = getattr(exc, "detail", None)
    if memory_limited and _is_allocation_failure(exc):
        reason, detail = "memory_limit", f"{type(exc).__name__}: {str(exc)[:300]}"
    return ("error", type(exc).__name__, reason, detail if detail is not None else str(exc)[:500])


def _child(connection, func: Callable, args: tuple, kwargs: dict, memory_mb: int) -> None:
    if memory_mb > 0:
        ceiling = _address_space_bytes() + memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    try:
        message: tuple = ("ok", func(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent as data
        message = _failure_message(exc, memory_mb > 0)
    try:
        connection.send((*message, _peak_rss_mb()))
    except MemoryError:
        connection.send(("error", "MemoryError", "memory_limit", "the result did not fit in memory", None))
    except Exception as exc:  # noqa: BLE001 - an unpicklable result
        connection.send(("error", type(exc).__name__, "worker_error", str(exc)[:300], _peak_rss_mb()))
    finally:
        connection.close()


def run_limited(func: Callable, *args: Any, limits: Limits | None = None, **kwargs: Any) -> Outcome:
    """`func(*args, **kwargs)` in a child process under `limits` (module-level function, picklable
    arguments). An exception in `func` comes back as an Outcome whose reason is the exception's `reason`
    attribute (ParseFailure, PdfFetchError) or None with `error_type` set; never raises for the child's sake."""
    limits = limits or Limits()
    context = _forkserver()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(sender, func, args, kwargs, int(limits.memory_mb)), daemon=True
    )
    started = time.perf_counter()
    process.start()
    sender.close()
    message = None
    timed_out = False
    try:
        wait = limits.wall_seconds if limits.wall_seconds > 0 else None
        if receiver.poll(wait):
            try:
                message = receiver.recv()
            except (EOFError, OSError):
                message = None
        else:
            timed_out = True
    finally:
        receiver.close()
        if timed_out or process.is_alive():
            process.join(0 if timed_out else 5)
        if process.is_alive():
            process.kill()
        process.join()
    seconds = time.perf_counter() - started
    if timed_out:
        return Outcome(
            reason="time_limit", detail=f"still running after {limits.wall_seconds:g} s", seconds=seconds
        )
    if message is None:
        code = process.exitcode
        cause = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return Outcome(reason="worker_crashed", detail=f"the worker died ({cause})", seconds=seconds)
    if message[0] == "ok":
        return Outcome(value=message[1], seconds=seconds, peak_rss_mb=message[2])
    _, error_type, reason, detail, peak = message
    if reason is None and error_type == "MemoryError" and limits.memory_mb > 0:
        reason = "memory_limit"
    return Outcome(
        reason=reason, detail=detail or "", error_type=error_type, seconds=seconds, peak_rss_mb=peak
    )
