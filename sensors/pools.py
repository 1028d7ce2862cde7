"""Concurrency pools of the external APIs and their per-pool limits.

OSS `dagster.yaml` only takes a default pool limit (`concurrency.pools.default_limit`); per-pool limits live in the
instance's storage, so `lumina pools apply` writes these (same as `dagster instance concurrency set POOL N`)."""

from __future__ import annotations

import dagster as dg

# Steps in the same pool run at most this many at a time across all runs. The HTTP layer's per-host rate limit
# still spaces requests inside each step; the pool stops several runs from multiplying it.
POOL_LIMITS: dict[str, int] = {
    "openalex": 2,  # 10 req/s per key: two crawling steps keep well below it
    "arxiv": 1,  # one request per 3 s for everyone: never two clients at once
    "pdf_download": 4,  # many hosts; the HTTP layer limits per host
    "semantic_scholar": 1,  # 1 req/s with a key
    "google_scholar": 1,  # SerpAPI plan quota
    "exa": 2,
    "llm": 4,  # judges and question generation; provider rate limits apply per key
    # The benchmark assets are partitioned by provider, and a pool is fixed per asset, so they use one pool for
    # all search providers and one for the judges; per-provider limits live in each client's rate limit.
    "benchmark_search": 2,
    "benchmark_judge": 4,
}


def apply_pool_limits(instance: dg.DagsterInstance, limits: dict[str, int] | None = None) -> dict[str, int]:
    """Set every pool's limit on the instance (idempotent); returns what was set."""
    limits = dict(POOL_LIMITS if limits is None else limits)
    for pool, limit in limits.items():
        instance.event_log_storage.set_concurrency_slots(pool, limit)
    return limits


def current_pool_limits(instance: dg.DagsterInstance) -> dict[str, int]:
    return {
        pool: instance.event_log_storage.get_concurrency_info(pool).slot_count
        for pool in sorted(instance.event_log_storage.get_concurrency_keys())
    }
