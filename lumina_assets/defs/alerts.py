"""Alerts stage: `alert_hits` runs every saved search against the latest index and records the papers that newly
entered each search's top k."""

import hashlib
import json
from collections import Counter

import dagster as dg

from lumina_assets.core import tables
from lumina_assets.search import saved_searches
from lumina_assets.search.alerts import evaluate
from lumina_assets.search.request import BadRequest
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

GROUP = "alerts"
INDEX_RUN_TAG = "lumina/index_run"  # the passage_index run whose materialization started this one


def _catalogue() -> dict[str, dict]:
    frame = tables.read(tables.PAPERS)
    if frame is None or "ingest_batch" not in frame.columns:
        return {}
    rows = frame.select("paper_id", "first_seen", "ingest_batch").iter_rows(named=True)
    return {row["paper_id"]: row for row in rows}


def _hits_markdown(hits: list[dict], limit: int = 30) -> str:
    if not hits:
        return "no new hits"
    lines = ["| search | rank | paper | ingest batch |", "|---|---|---|---|"]
    for hit in hits[:limit]:
        title = (hit.get("title") or hit["paper_id"]).replace("|", "/")[:70]
        lines.append(f"| {hit['search']} | {hit['rank']} | {title} | {hit.get('ingest_batch') or '?'} |")
    if len(hits) > limit:
        lines.append(f"| ... {len(hits) - limit} more | | | |")
    return "\n".join(lines)


@dg.asset(
    group_name=GROUP,
    deps=[dg.AssetDep("passage_index")],
    code_version="1",
    description="Every saved search (`lumina alerts`, the page, POST /api/alerts) run against the new index: the "
    "papers that newly entered its top k, each with the ingest batch that brought it in.",
)
def alert_hits(
    context: dg.AssetExecutionContext, lancedb: LanceDBResource, embedder: EmbedderResource
) -> dg.MaterializeResult:
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.relevance import matching_contexts
    from lumina_assets.search.stores import IndexNotBuilt

    searches = saved_searches.load()
    index_run = context.run.tags.get(INDEX_RUN_TAG) or context.run.run_id
    catalogue = _catalogue()
    found_at = saved_searches.now()
    new_hits: list[dict] = []
    skipped: list[str] = []
    with saved_searches.updating_hits() as state:
        engine = None
        for search in searches:
            if engine is None:
                engine = SearchEngine(
                    lancedb.resolved_uri(),
                    embedder.get_embedder(),
                    SearchConfig(),
                    storage_options=lancedb.resolved_storage_options() or None,
                    refresh_seconds=0,
                )
            try:
                request = search.request()
                contexts = matching_contexts(engine, request, search.k)  # above the relevance line
            except (BadRequest, IndexNotBuilt) as error:  # rules tightened since it was saved; no index yet
                skipped.append(f"{search.name}: {error}")
                continue
            new_hits += evaluate(search, contexts, state, catalogue, found_at=found_at, index_run=index_run)
        digest = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:24]
    for line in skipped:
        context.log.warning(f"saved search skipped: {line}")
    by_batch = Counter(h.get("ingest_batch") or "unknown" for h in new_hits)
    by_search = Counter(h["search"] for h in new_hits)
    return dg.MaterializeResult(
        metadata={
            "saved_searches": len(searches),
            "new_hits": len(new_hits),
            "index_run": index_run,
            "hits_by_batch": dg.MetadataValue.json(dict(by_batch)),
            "hits_by_search": dg.MetadataValue.json(dict(by_search)),
            "hits": dg.MetadataValue.md(_hits_markdown(new_hits)),
            "searches_skipped": dg.MetadataValue.md("\n".join(f"- {s}" for s in skipped) or "none"),
        },
        data_version=dg.DataVersion(digest),
    )


ASSETS = [alert_hits]
CHECKS: list = []


def build_resources() -> dict:
    return {}  # lancedb and embedder come from the index stage
