"""Polling sensor against a replayed OpenAlex / arXiv: recorded work records and Atom feeds served through an httpx
MockTransport, with OpenAlex's `cites:` / `from_created_date:` filters and cursor paging simulated over them."""

from __future__ import annotations

import json
from datetime import date

import dagster as dg
import httpx
import pytest

from lumina_assets.corpus.crawl import ArxivQuery, Seeds
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from resources.arxiv import ArxivResource
from resources.openalex import OpenAlexResource
from sensors.polling import DISCOVERED_FIELD, PollCursor, build_polling_sensor, evaluate_poll, poll

SEED_DOI = "10.1016/j.xgen.2025.100814"
SEED_W = "W4408732759"
CITING_FILES = (
    "test_doi_search_paper_attributes1__interaction2.json",
    "test_doi_search_paper_attributes3__interaction2.json",
    "test_doi_search_paper_attributes4__interaction2.json",
    "test_title_search_paper_attributes0__interaction3.json",
    "test_title_search_paper_attributes1__interaction2.json",
    "test_title_search_paper_attributes2__interaction3.json",
)


class FakeOpenAlex:
    """Recorded work records; each citing work gets a simulated `created_date` so time can pass in a test."""

    def __init__(self, shared_data):
        folder = shared_data / "api_fixtures" / "openalex_extracted"
        self.seed = json.loads((folder / "test_doi_search_paper_attributes0__interaction2.json").read_text())
        works = []
        for name in CITING_FILES:
            body = json.loads((folder / name).read_text())
            works += body["results"] if "results" in body else [body]
        self.citing = works  # 7 real records
        self.created: dict[str, str] = {}
        self.requests: list[httpx.Request] = []
        self.fail = False

    def publish(self, count: int, created: str) -> list[str]:
        """Make the next `count` citing works visible, created on `created`."""
        fresh = [w for w in self.citing if w["id"] not in self.created][:count]
        for work in fresh:
            self.created[work["id"]] = created
        return [w["id"].rsplit("/", 1)[1] for w in fresh]

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fail:
            return httpx.Response(400, json={"error": "simulated outage"})
        path = request.url.path
        if path == f"/works/doi:{SEED_DOI}":
            return httpx.Response(200, json=self.seed)
        if path.startswith("/works/"):
            by_id = {w["id"].rsplit("/", 1)[1]: w for w in self.citing if w["id"] in self.created}
            work = by_id.get(path.rsplit("/", 1)[1])
            return httpx.Response(200, json=work) if work else httpx.Response(404, text="not found")
        filters = dict(part.split(":", 1) for part in request.url.params["filter"].split(","))
        if filters.get("cites") != SEED_W:  # reference crawls etc.: nothing recorded for them
            return httpx.Response(200, json={"meta": {"count": 0, "next_cursor": None}, "results": []})
        since = filters.get("from_created_date", "0000")
        matching = [w for w in self.citing if w["id"] in self.created and self.created[w["id"]] >= since]
        per_page = int(request.url.params.get("per-page", 25))
        start = 0 if request.url.params["cursor"] == "*" else int(request.url.params["cursor"])
        page = matching[start : start + per_page]
        nxt = str(start + per_page) if start + per_page < len(matching) else None
        return httpx.Response(
            200, json={"meta": {"count": len(matching), "next_cursor": nxt}, "results": page}
        )


@pytest.fixture
def openalex_api(shared_data):
    return FakeOpenAlex(shared_data)


def _clients(api, shared_data, arxiv_feed="xiv__arxiv_response.xml"):
    openalex = OpenAlexResource(api_key="test-key", min_interval_s=0, cache_responses=False).client(
        httpx.MockTransport(api.handler)
    )
    feed = (shared_data / "api_fixtures" / "arxiv" / arxiv_feed).read_text()
    arxiv_requests = []

    def arxiv_handler(request):
        arxiv_requests.append(request)
        return httpx.Response(200, text=feed)

    arxiv = ArxivResource(min_interval_s=0, cache_responses=False).client(httpx.MockTransport(arxiv_handler))
    return openalex, arxiv, arxiv_requests


SEEDS = Seeds(dois=[SEED_DOI], arxiv_queries=[ArxivQuery("cat:cs.RO AND neural", 2)])


def test_first_tick_takes_the_look_back_window_as_one_batch(openalex_api, shared_data, data_dir):
    openalex_api.publish(3, "2026-11-18")
    openalex_api.publish(2, "2026-10-01")  # older than the 7-day look-back: not picked up
    openalex, arxiv, _ = _clients(openalex_api, shared_data)
    outcome = poll(openalex=openalex, arxiv=arxiv, seeds=SEEDS, raw_cursor=None, today=date(2026, 11, 22))
    assert len(outcome.openalex_ids) == 3
    assert outcome.arxiv_ids == []  # the recorded feed is from 2025, before the window
    assert outcome.cursor.openalex.since == "2026-11-22"
    assert outcome.cursor.seed_openalex_ids == {SEED_DOI: SEED_W}
    result = evaluate_poll(outcome)
    [request] = result.run_requests
    assert request.run_config["ops"]["openalex_works"]["config"][DISCOVERED_FIELD] == outcome.openalex_ids
    batch_key = request.tags[INGEST_BATCH_TAG]
    assert request.run_key == batch_key
    assert list(result.dynamic_partitions_requests[0].partition_keys) == [batch_key]
    assert result.dynamic_partitions_requests[0].partitions_def_name == INGEST_BATCHES.name


def test_next_ticks_see_only_new_works_and_seed_lookup_is_not_repeated(openalex_api, shared_data, data_dir):
    first_ids = openalex_api.publish(2, "2026-11-22")
    openalex, arxiv, _ = _clients(openalex_api, shared_data)
    first = poll(openalex=openalex, arxiv=arxiv, seeds=SEEDS, raw_cursor=None, today=date(2026, 11, 22))
    assert first.openalex_ids == first_ids
    cursor = first.cursor.dump()
    same_day = poll(openalex=openalex, arxiv=arxiv, seeds=SEEDS, raw_cursor=cursor, today=date(2026, 11, 22))
    assert same_day.openalex_ids == []  # same-day works come back from the API but are in the boundary
    assert not evaluate_poll(same_day).run_requests
    later_ids = openalex_api.publish(1, "2026-11-22")  # still the same created day, published later
    lookups_before = sum(1 for r in openalex_api.requests if r.url.path.startswith("/works/doi:"))
    next_day = poll(
        openalex=openalex,
        arxiv=arxiv,
        seeds=SEEDS,
        raw_cursor=same_day.cursor.dump(),
        today=date(2026, 11, 23),
    )
    assert next_day.openalex_ids == later_ids
    assert next_day.cursor.openalex.since == "2026-11-23"
    lookups_after = sum(1 for r in openalex_api.requests if r.url.path.startswith("/works/doi:"))
    assert lookups_after == lookups_before  # seed ids come from the cursor after the first tick


def test_backlog_drains_one_bounded_batch_per_tick(openalex_api, shared_data, data_dir):
    published = openalex_api.publish(7, "2026-11-20")
    openalex, arxiv, _ = _clients(openalex_api, shared_data)
    seen, cursor, ticks = [], None, 0
    while True:
        outcome = poll(
            openalex=openalex,
            arxiv=None,
            seeds=SEEDS,
            raw_cursor=cursor,
            today=date(2026, 11, 22),
            max_works_per_tick=3,
        )
        if not outcome.openalex_ids:
            break
        ticks += 1
        assert len(outcome.openalex_ids) <= 3
        assert len(evaluate_poll(outcome).run_requests) == 1
        seen += outcome.openalex_ids
        cursor = outcome.cursor.dump()
    assert ticks == 3
    assert sorted(seen) == sorted(published)  # nothing lost, nothing twice
    assert json.loads(cursor)["openalex"]["since"] == "2026-11-22"


def test_failed_request_keeps_the_cursor(openalex_api, shared_data, data_dir):
    openalex_api.publish(2, "2026-11-21")
    openalex, arxiv, _ = _clients(openalex_api, shared_data)
    first = poll(openalex=openalex, arxiv=None, seeds=SEEDS, raw_cursor=None, today=date(2026, 11, 21))
    openalex_api.publish(2, "2026-11-22")
    openalex_api.fail = True
    failed = poll(
        openalex=openalex, arxiv=None, seeds=SEEDS, raw_cursor=first.cursor.dump(), today=date(2026, 11, 22)
    )
    assert failed.openalex_ids == []
    assert failed.errors and "openalex" in failed.errors[0]
    assert "test-key" not in " ".join(failed.errors)  # the API key never reaches a message
    assert failed.cursor.openalex == first.cursor.openalex
    openalex_api.fail = False
    recovered = poll(
        openalex=openalex, arxiv=None, seeds=SEEDS, raw_cursor=failed.cursor.dump(), today=date(2026, 11, 22)
    )
    assert len(recovered.openalex_ids) == 2


def test_arxiv_new_submissions_since_the_watermark(openalex_api, shared_data, data_dir):
    openalex, arxiv, arxiv_requests = _clients(openalex_api, shared_data)
    start = PollCursor.initial(date(2025, 10, 17), lookback_days=1).dump()  # since 2025-10-16: both entries
    first = poll(openalex=None, arxiv=arxiv, seeds=SEEDS, raw_cursor=start, today=date(2025, 10, 17))
    assert sorted(first.arxiv_ids) == ["2510.14827", "2510.14968"]
    assert arxiv_requests[0].url.params["sortBy"] == "submittedDate"
    again = poll(
        openalex=None, arxiv=arxiv, seeds=SEEDS, raw_cursor=first.cursor.dump(), today=date(2025, 10, 17)
    )
    assert again.arxiv_ids == []
    [request] = evaluate_poll(first).run_requests
    assert request.run_config["ops"]["arxiv_works"]["config"][DISCOVERED_FIELD] == first.arxiv_ids


def test_sensor_definition_runs_with_replayed_resources(openalex_api, shared_data, data_dir, monkeypatch):
    """The real sensor wiring: resources, seeds file, cursor round trip through build_sensor_context."""
    seeds_file = data_dir / "seeds.yaml"
    seeds_file.write_text(f"dois: ['{SEED_DOI}']\n")
    monkeypatch.setenv("LUMINA_SEEDS", str(seeds_file))
    openalex_api.publish(2, "2026-11-22")
    transport = httpx.MockTransport(openalex_api.handler)

    class ReplayedOpenAlex(OpenAlexResource):
        def client(self, transport_=None):
            return super().client(transport)

    sensor = build_polling_sensor(today=lambda: date(2026, 11, 22))
    resources = {
        "openalex": ReplayedOpenAlex(api_key="test-key", min_interval_s=0),
        "arxiv": ArxivResource(min_interval_s=0),
    }
    first = sensor(dg.build_sensor_context(cursor=None, resources=resources))
    assert len(first.run_requests) == 1
    second = sensor(dg.build_sensor_context(cursor=first.cursor, resources=resources))
    assert not second.run_requests


def test_discovered_works_reach_the_crawl_tables(openalex_api, shared_data, data_dir, monkeypatch):
    """The run the sensor asks for, executed: the works it discovered end up in `openalex_works`."""
    from lumina_assets.core import tables
    from lumina_assets.defs import corpus
    from resources.corpus import CorpusResource

    seeds_file = data_dir / "seeds.yaml"
    seeds_file.write_text(f"dois: ['{SEED_DOI}']\ncrawl: {{depth: 0}}\n")
    monkeypatch.setenv("LUMINA_SEEDS", str(seeds_file))
    discovered = openalex_api.publish(2, "2026-11-22")
    openalex, _, _ = _clients(openalex_api, shared_data)
    outcome = poll(openalex=openalex, arxiv=None, seeds=SEEDS, raw_cursor=None, today=date(2026, 11, 22))
    [request] = evaluate_poll(outcome).run_requests
    transport = httpx.MockTransport(openalex_api.handler)

    class ReplayedOpenAlex(OpenAlexResource):
        def client(self, transport_=None):
            return super().client(transport)

    crawl = [
        a for a in corpus.ASSETS if {dg.AssetKey("seed_papers"), dg.AssetKey("openalex_works")} & set(a.keys)
    ]
    result = dg.materialize(
        crawl,
        run_config={"ops": {"openalex_works": request.run_config["ops"]["openalex_works"]}},
        resources={
            "corpus": CorpusResource(seeds_path=str(seeds_file)),
            "openalex": ReplayedOpenAlex(api_key="test-key", min_interval_s=0, cache_responses=False),
        },
        raise_on_error=False,
    )
    assert result.success
    works = tables.read(tables.OPENALEX_WORKS)
    found = set(works["openalex_id"].to_list()) if works is not None else set()
    assert set(discovered) <= found, (
        "openalex_works must read `ops.openalex_works.config."
        f"{DISCOVERED_FIELD}` (OpenAlex ids found by the polling sensor) and fetch those works too"
    )
