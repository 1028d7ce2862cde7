"""Alerts on saved searches: after a passage_index materialization the alerts sensor requests one `alert_hits` run,
which records exactly the papers that newly entered each saved search's top k, with the ingest batch that brought
them; the Atom feed of those hits parses as Atom. Real SciFact abstracts, the hashing test embedder, an ephemeral
instance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
import feedparser
import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from starlette.testclient import TestClient

from lumina_assets.core import settings, tables
from lumina_assets.corpus.collections import load_beir
from lumina_assets.defs.alerts import INDEX_RUN_TAG, alert_hits
from lumina_assets.defs.indexing import passage_index
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search import saved_searches
from lumina_assets.search.api import create_app
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource
from sensors.alerts import alerts_sensor

FIRST, SECOND = 60, 60  # papers per batch


class HashingEmbedderResource(EmbedderResource):
    def get_embedder(self):
        return HashingEmbedder()

    def setup_for_execution(self, context) -> None:
        return None


RESOURCES = {"lancedb": LanceDBResource(), "embedder": HashingEmbedderResource()}


@pytest.fixture(scope="module")
def scifact(shared_data) -> list[tuple[str, dict]]:
    return list(load_beir(shared_data / "scifact", "train").corpus.items())[: FIRST + SECOND]


def write_batch(docs, batch: str, first_seen: str) -> None:
    """The `papers` table grows by `docs` (joined with `batch` at `first_seen`); their passages are that batch's."""
    rows, passages = [], []
    for doc_id, doc in docs:
        paper_id = f"beir-scifact:{doc_id}"
        rows.append(
            {
                "paper_id": paper_id,
                "title": doc["title"],
                "abstract": doc["text"],
                "first_seen": first_seen,
                "ingest_batch": batch,
            }
        )
        passages += [
            p.to_row() for p in passages_for_paper(paper_id, title=doc["title"], abstract=doc["text"])
        ]
    previous = tables.read(tables.PAPERS)
    frame = pl.DataFrame(rows)
    tables.write(tables.PAPERS, frame if previous is None else pl.concat([previous, frame]))
    tables.write(tables.PASSAGES, pl.DataFrame(passages), batch)


def index(instance) -> str:
    result = dg.materialize([passage_index], resources=RESOURCES, instance=instance)
    assert result.success
    return result.run_id


def tick(instance, cursor) -> tuple[list[dg.RunRequest], str | None]:
    """One sensor evaluation as the daemon runs it: its run requests and the cursor it leaves."""
    data = alerts_sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=cursor))
    return list(data.run_requests or []), data.cursor


def run_alerts(instance, request: dg.RunRequest):
    result = dg.materialize(
        [passage_index, alert_hits],
        selection=[alert_hits],
        resources=RESOURCES,
        instance=instance,
        tags=request.tags,
    )
    assert result.success
    return result.asset_materializations_for_node("alert_hits")[0].metadata


def top_papers(query: str, k: int) -> list[str]:
    engine = SearchEngine(settings.lancedb_uri(), HashingEmbedder(), SearchConfig(), refresh_seconds=0)
    return [c.paper_id for c in engine.search(query, k=k)]


def test_second_batch_records_exactly_the_new_matching_papers_and_the_feed_is_atom(data_dir, scifact):
    instance = dg.DagsterInstance.ephemeral()
    first, second = scifact[:FIRST], scifact[FIRST:]
    # a query about a paper of the second batch: it must enter the top k when that batch is indexed
    query = second[5][1]["title"]
    earlier = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    write_batch(first, "batch-1", earlier)
    index(instance)

    # no saved search: the sensor skips and starts nothing
    requests, cursor = tick(instance, None)
    assert not requests

    saved_searches.add(saved_searches.validate("sepsis-watch", query, {}, 10))
    # the same catalogue indexed again (nothing new): the first evaluation of the saved search
    first_index_run = index(instance)
    requests, cursor = tick(instance, cursor)
    [request] = requests
    assert request.tags[INDEX_RUN_TAG] == first_index_run
    metadata = run_alerts(instance, request)
    # what the search showed when it was saved is no alert
    assert metadata["new_hits"].value == 0
    before = top_papers(query, 10)

    later = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    write_batch(second, "batch-2", later)
    second_index_run = index(instance)
    requests, cursor = tick(instance, cursor)
    [request] = requests
    assert request.run_key == f"alerts-{second_index_run}"
    metadata = run_alerts(instance, request)

    after = top_papers(query, 10)
    expected = [paper for paper in after if paper not in before]
    second_ids = {f"beir-scifact:{doc_id}" for doc_id, _ in second}
    assert f"beir-scifact:{second[5][0]}" in expected
    assert set(expected) <= second_ids  # only the new batch can bring papers into the top k
    search = saved_searches.get("sepsis-watch")
    hits = saved_searches.hits_for(search)
    assert sorted(h["paper_id"] for h in hits) == sorted(expected)
    assert {h["ingest_batch"] for h in hits} == {"batch-2"}
    assert {h["index_run"] for h in hits} == {second_index_run}
    assert metadata["new_hits"].value == len(expected)
    assert metadata["hits_by_batch"].value == {"batch-2": len(expected)}

    # the sensor does not fire again for the same index run
    requests, cursor = tick(instance, cursor)
    assert not requests

    # the feed, as `lumina serve` serves it, is valid Atom with one entry per hit
    client = TestClient(create_app(service=None), base_url="http://127.0.0.1:8765")
    response = client.get("/feeds/sepsis-watch.xml")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/atom+xml")
    feed = feedparser.parse(response.content)
    assert not feed.bozo, feed.get("bozo_exception")
    assert feed.version == "atom10"
    assert feed.feed.title == "Lumina alert: sepsis-watch"
    assert feed.feed.id == f"urn:lumina:alert:{search.id}"
    assert feed.feed.updated_parsed is not None
    assert len(feed.entries) == len(expected)
    titles = {h["paper_id"]: h["title"] for h in hits}
    for entry in feed.entries:
        assert entry.id.startswith(f"urn:lumina:alert:{search.id}:")
        assert entry.title in titles.values()
        assert entry.updated_parsed is not None
        assert entry.link
        assert "batch-2" in entry.summary
    # the page's "new" badge: GET /api/alerts counts the hits, seen resets them
    [listed] = client.get("/api/alerts").json()
    assert listed["new_count"] == len(expected) and listed["feed_url"] == "/feeds/sepsis-watch.xml"
    assert client.post("/api/alerts/sepsis-watch/seen").status_code == 204
    assert client.get("/api/alerts").json()[0]["new_count"] == 0


def test_alert_hits_has_passage_index_upstream():
    from lumina_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("passage_index") in graph.get(dg.AssetKey("alert_hits")).parent_keys
    assert "alerts_sensor" in {s.name for s in defs.sensors}
