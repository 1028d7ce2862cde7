"""Concurrency pools of the external APIs and their per-pool limits.

OSS `dagster.yaml` only takes a default pool limit (`concurrency.pools.default_limit`); per-pool limits live in the
instance's storage, so `lumina pools apply` writes these (same as `dagster instance concurrency set POOL N`)."""

from __future__ import annotations

import dagster as dg

from lumina_assets.defs.instance_storage import pool_limits, set_pool_limit

# Steps in the same pool run at most this many at a time across all runs. The HTTP layer's per-host rate limit
# still spaces requests inside each step; the pool stops several runs from multiplying it.
#
# Which asset uses which pool (tests/orchestration/test_pools.py derives this from the asset definitions and fails
# on a pool no asset uses, an asset pool without a limit, or an API / LLM asset without a pool):
#   openalex_works -> openalex, arxiv_works -> arxiv, pdf_files -> pdf_download;
#   synthetic_questions (question_llm), judgments and benchmark_scores (judge_llm) -> llm;
#   provider_results and recursive_results -> benchmark_search.
# Why no `semantic_scholar`, `google_scholar` or `exa` pool: those APIs are reached only by provider_results and
# recursive_results, which are partitioned by provider, and a Dagster pool is fixed per asset, not per partition,
# so no asset could hold such a pool. Splitting both assets into one asset per provider would give each API its
# pool at the price of twelve assets and a provider list baked into the graph; instead the search providers share
# `benchmark_search` (at most two provider steps at once across runs) and each API's own limit is its client's
# per-host rate limit (resources/providers.py: Semantic Scholar 1 request/s), which holds inside every step.
# recursive_results also calls an LLM (query refinement) but can hold one pool only: it is counted in
# `benchmark_search`, so at most llm + benchmark_search steps call an LLM at once.
POOL_LIMITS: dict[str, int] = {
    "openalex": 2,  # 10 req/s per key: two crawling steps keep well below it
    "arxiv": 1,  # one request per 3 s for everyone: never two clients at once
    "pdf_download": 4,  # many hosts; the HTTP layer limits per host
    "llm": 4,  # question generation, the judges and judge validation; provider rate limits apply per key
    "benchmark_search": 2,  # every search provider's partition of provider_results / recursive_results
}


def apply_pool_limits(instance: dg.DagsterInstance, limits: dict[str, int] | None = None) -> dict[str, int]:
    """Set every pool's limit on the instance (idempotent); returns what was set."""
    limits = dict(POOL_LIMITS if limits is None else limits)
    for pool, limit in limits.items():
        set_pool_limit(instance, pool, limit)
    return limits


def current_pool_limits(instance: dg.DagsterInstance) -> dict[str, int]:
    return pool_limits(instance)
