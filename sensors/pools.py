"""Concurrency pools of the external APIs and their per-pool limits, which `lumina pools apply` writes into the
instance's storage (OSS `dagster.yaml` takes only a default)."""

from __future__ import annotations

import dagster as dg

from lumina_assets.defs.instance_storage import set_pool_limit

# Steps in the same pool run at most this many at a time across all runs (the HTTP layer's per-host rate limit
# still spaces requests inside each step). tests/orchestration/test_pools.py checks these against the assets' pools;
# why the search providers share one: docs/production.md.
POOL_LIMITS: dict[str, int] = {
    "openalex": 2,  # 10 req/s per key: two crawling steps keep well below it
    "arxiv": 1,  # one request per 3 s for everyone: never two clients at once
    "pdf_download": 4,  # many hosts; the HTTP layer limits per host
    "llm": 4,  # question generation, the judges and judge validation; provider rate limits apply per key
    "benchmark_search": 2,  # every search provider's partition of provider_results / recursive_results
}


def apply_pool_limits(instance: dg.DagsterInstance) -> dict[str, int]:
    """Set every pool's limit on the instance (idempotent); returns what was set."""
    for pool, limit in POOL_LIMITS.items():
        set_pool_limit(instance, pool, limit)
    return dict(POOL_LIMITS)
