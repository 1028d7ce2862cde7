"""Calls to a rate-limited API from several threads: `map_in_threads` keeps the order of its inputs, and the
first error stops what has not started yet (a budget stop, say) instead of running every remaining call."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_in_threads(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """`[fn(x) for x in items]` with at most `workers` calls at a time, results in input order; the first
    exception is raised once the calls already running have ended, and the calls not yet started never start."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    pool = ThreadPoolExecutor(max_workers=min(workers, len(items)))
    futures = [pool.submit(fn, item) for item in items]
    try:
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
