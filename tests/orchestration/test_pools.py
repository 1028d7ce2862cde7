"""Concurrency pools, read from the asset definitions themselves: every pool in sensors/pools.py is held by some
asset, every asset's pool has a limit, and every asset that calls an external API or an LLM holds a pool. Which
assets call out is found from the resources they require (an `HttpApiResource` or an `LLMResource`), not from a
list kept beside the code; the same analysis run on a deliberately wrong Definitions shows each rule firing."""

from __future__ import annotations

import dagster as dg

from resources.http import HttpApiResource
from resources.llm import LLMResource
from sensors.pools import POOL_LIMITS

# What makes a resource "an external API or an LLM": every API client resource derives from HttpApiResource
# (OpenAlex, arXiv, Semantic Scholar, SerpAPI, Exa) and every LLM is an LLMResource.
CALLS_OUT = (HttpApiResource, LLMResource)


def _calling_out_keys(defs: dg.Definitions) -> set[str]:
    return {key for key, resource in (defs.resources or {}).items() if isinstance(resource, CALLS_OUT)}


def asset_pools(defs: dg.Definitions) -> dict[dg.AssetKey, tuple[set[str], set[str]]]:
    """{asset key: (its pools, the API / LLM resource keys it requires)} for every materializable asset."""
    graph = defs.get_repository_def().asset_graph
    calling_out = _calling_out_keys(defs)
    found = {}
    for key in graph.materializable_asset_keys:
        node = graph.get(key)
        found[key] = (set(node.pools or ()), set(node.assets_def.required_resource_keys) & calling_out)
    return found


def pool_problems(defs: dg.Definitions, limits: dict[str, int]) -> list[str]:
    pools = asset_pools(defs)
    used = {pool for asset_pools_, _ in pools.values() for pool in asset_pools_}
    problems = [f"pool {p!r} has a limit but no asset uses it" for p in sorted(set(limits) - used)]
    problems += [f"pool {p!r} is used by an asset but has no limit" for p in sorted(used - set(limits))]
    problems += [
        f"{key.to_user_string()} calls {sorted(calls)} without a pool"
        for key, (asset_pools_, calls) in sorted(pools.items())
        if calls and not asset_pools_
    ]
    return problems


def test_shipped_pools_match_the_assets():
    from lumina_assets.definitions import defs

    assert pool_problems(defs, POOL_LIMITS) == []
    pools = asset_pools(defs)
    calling = {key.to_user_string() for key, (_, calls) in pools.items() if calls}
    # the analysis really finds the API and LLM steps (a resource-type test that matched nothing would pass above)
    assert {
        "openalex_works",
        "arxiv_works",
        "synthetic_questions",
        "judgments",
        "provider_results",
    } <= calling
    assert pools[dg.AssetKey("synthetic_questions")][0] == {"llm"}
    assert pools[dg.AssetKey("judgments")][0] == {"llm"}
    # assets that call nothing outside hold no pool (a pool there would throttle local work for nothing)
    for key, (asset_pools_, calls) in pools.items():
        if not calls and asset_pools_:
            assert asset_pools_ == {"pdf_download"}, key  # pdf_files downloads through ParsingConfig's client


def test_each_pool_rule_fires_on_a_wrong_definitions():
    """An LLM asset without a pool, a pool without a limit and a limit without an asset: all three reported."""

    @dg.asset
    def asks_an_llm(question_llm: LLMResource) -> None: ...

    @dg.asset(pool="made_up")
    def local_only() -> None: ...

    wrong = dg.Definitions(assets=[asks_an_llm, local_only], resources={"question_llm": LLMResource()})
    problems = pool_problems(wrong, {"llm": 4})
    assert "asks_an_llm calls ['question_llm'] without a pool" in problems
    assert "pool 'made_up' is used by an asset but has no limit" in problems
    assert "pool 'llm' has a limit but no asset uses it" in problems
    assert len(problems) == 3
