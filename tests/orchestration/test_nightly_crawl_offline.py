"""The nightly crawl schedule switched on without network (issue 13), through the daemon's code path: the schedule is
evaluated at its tick with the Definitions' resources (`build_schedule_context` + `evaluate_tick`), and each run it
requests is executed as requested on an ephemeral instance. The sources are pointed at a closed 127.0.0.1 port by
LUMINA_OPENALEX_URL / LUMINA_ARXIV_URL; a local corpus ingested before must stay whole.

- no source reachable: the tick is skipped with a reason naming each source and URL, and no run starts; the same
  job launched by hand from the UI succeeds, each crawl asset saying which source it could not reach (after the
  first request's retries the HTTP layer asks an unreachable host nothing more);
- one source reachable (a local server that answers 404 to every API path): the tick requests a run, the run
  succeeds, the unreachable source is skipped with its URL in the metadata, the catalogue keeps every paper."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime

import dagster as dg
import polars as pl
import pytest
from orchestration_servers import free_port, static_http_server

from lumina_assets.core import tables
from sensors.schedules import nightly_crawl_schedule

pytestmark = pytest.mark.slow
TICK = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
def answering_server(tmp_path):
    """A local static server (404 for every API path), in its own session, stopped by PID."""
    root = tmp_path / "www"
    root.mkdir()
    with static_http_server(root) as url:
        yield url


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance):
    """What the daemon does at 02:00: evaluate the schedule with the code location's resources."""
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=TICK, resources=defs.resources
    ) as context:
        return nightly_crawl_schedule.evaluate_tick(context)


def _run(defs: dg.Definitions, instance: dg.DagsterInstance, tags: dict, run_config: dict | None = None):
    job = defs.resolve_job_def(nightly_crawl_schedule.job_name)
    result = job.execute_in_process(
        instance=instance, tags=tags, run_config=run_config or {}, raise_on_error=False
    )
    failures = [str(e.message) for e in result.all_events if e.is_step_failure]
    assert result.success, failures
    metadata = {
        name: {k: v.value for k, v in result.asset_materializations_for_node(name)[0].metadata.items()}
        for name in ("openalex_works", "arxiv_works", "papers")
    }
    return metadata


def test_nightly_crawl_without_network_skips_or_succeeds_and_keeps_the_catalogue(
    shared_data, data_dir, tmp_path, monkeypatch, answering_server
):
    import resources.http
    from lumina_assets.core.http import HttpClient
    from lumina_assets.definitions import build_definitions

    def without_backoff(*args, **kwargs) -> HttpClient:  # the same attempts, without the seconds between them
        return HttpClient(*args, **{**kwargs, "backoff_base": 0.0, "min_interval": 0.0})

    monkeypatch.setattr(resources.http, "HttpClient", without_backoff)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("LUMINA_OPENALEX_URL", closed + "/openalex")
    monkeypatch.setenv("LUMINA_ARXIV_URL", closed + "/arxiv/api")
    monkeypatch.setenv("OPENALEX_API_KEY", "test-openalex-key")
    folder = tmp_path / "corpus"
    folder.mkdir()
    shutil.copyfile(shared_data / "pdfs" / "N18-3011.pdf", folder / "N18-3011.pdf")
    instance = dg.DagsterInstance.ephemeral()

    # Earlier: a local corpus ingested (offline mode: the schedule asks no source and requests its run).
    monkeypatch.setenv("LUMINA_CORPUS", str(folder))
    offline = _tick(build_definitions(), instance)
    assert [r.run_key for r in offline.run_requests] == ["crawl-20261122"]
    _run(build_definitions(), instance, {"lumina/trigger": "setup"})
    before = tables.read(tables.PAPERS)["paper_id"].sort().to_list()
    records_before = pl.read_parquet(tables.CATALOGUE_RECORDS.path()).height
    assert len(before) == 1
    monkeypatch.delenv("LUMINA_CORPUS")

    # 02:00 with neither source reachable: a skipped tick that says which source at which URL, and no run.
    defs = build_definitions()
    data = _tick(defs, instance)
    assert not data.run_requests
    message = data.skip_message
    assert message.startswith("no crawl source is reachable")
    assert f"arXiv at {closed}/arxiv/api (ConnectError)" in message
    assert f"OpenAlex at {closed}/openalex (ConnectError)" in message
    assert "test-openalex-key" not in message

    # The same job launched by hand: a successful run; each source's first request fails after its retries and the
    # HTTP layer asks that host nothing more (5 attempts in all, not 5 per seed), nothing is deleted.
    metadata = _run(defs, instance, {"lumina/trigger": "manual"})
    for name, url in (("openalex_works", closed + "/openalex"), ("arxiv_works", closed + "/arxiv/api")):
        assert metadata[name]["unreachable"] == url
        assert metadata[name]["unreachable_reason"] == "ConnectError"
        assert metadata[name]["http_requests"] == 5 and metadata[name]["papers"] == 0
    assert (
        "was unreachable (ConnectError) earlier in this run" in metadata["openalex_works"]["failure_details"]
    )
    assert metadata["papers"]["papers"] == 1
    assert tables.read(tables.PAPERS)["paper_id"].sort().to_list() == before

    # OpenAlex answers (a mirror that has none of the works), arXiv is still down: the tick requests its run and the
    # run succeeds; OpenAlex's failures are listed, arXiv is skipped with its URL, the catalogue is whole.
    monkeypatch.setenv("LUMINA_OPENALEX_URL", answering_server)
    defs = build_definitions()
    data = _tick(defs, instance)
    assert [r.run_key for r in data.run_requests] == ["crawl-20261122"]
    request = data.run_requests[0]
    metadata = _run(defs, instance, request.tags, request.run_config)
    assert "unreachable" not in metadata["openalex_works"]
    assert metadata["openalex_works"]["papers"] == 0 and metadata["openalex_works"]["failures"] > 0
    assert metadata["arxiv_works"]["unreachable"] == closed + "/arxiv/api"
    assert tables.read(tables.PAPERS)["paper_id"].sort().to_list() == before
    assert pl.read_parquet(tables.CATALOGUE_RECORDS.path()).height == records_before
    runs = instance.get_runs()
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)


def test_http_client_asks_an_unreachable_host_nothing_more(data_dir):
    """After a request ends on a connection failure, later requests to that host fail at once (reason
    `unreachable`, no attempt); answers already in the cache are still served."""
    from lumina_assets.core.http import HttpClient, HttpError

    closed = f"http://127.0.0.1:{free_port()}"
    client = HttpClient(base_url=closed, max_retries=1, backoff_base=0.0, cache_dir=data_dir / "cache")
    key = client._cache_key("GET", closed + "/cached", {}, None)
    client.cache.put(key, {"status": 200, "headers": {}, "body": '{"ok": true}'})
    with pytest.raises(HttpError) as first:
        client.get_json("/works/1")
    assert first.value.reason == "transport" and client.stats.requests == 2
    with pytest.raises(HttpError) as second:
        client.get_json("/works/2")
    assert second.value.reason == "unreachable" and client.stats.requests == 2
    assert client.get_json("/cached") == {"ok": True}
    other = HttpClient(base_url=closed, max_retries=0, backoff_base=0.0)  # a new client (next run) asks again
    with pytest.raises(HttpError) as again:
        other.get_json("/works/2")
    assert again.value.reason == "transport" and other.stats.requests == 1


def test_polling_sensor_offline_asks_each_source_once_and_skips(data_dir, monkeypatch):
    """The polling sensor switched on without network: a skipped tick naming the errors, the cursor unchanged,
    and OpenAlex asked for one request's attempts in all (its seed-lookup and poll clients share what the HTTP
    layer learnt), so the tick stays well inside the sensor's evaluation timeout."""
    import httpx

    from resources.arxiv import ArxivResource
    from resources.openalex import OpenAlexResource
    from sensors.polling import build_polling_sensor

    attempts: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        attempts.append(request.url.host)
        raise httpx.ConnectError("connection refused", request=request)

    class Offline:
        def client(self, transport=None):
            return super().client(httpx.MockTransport(refuse))

    class OfflineOpenAlex(Offline, OpenAlexResource):
        pass

    class OfflineArxiv(Offline, ArxivResource):
        pass

    seeds = data_dir / "seeds.yaml"
    seeds.write_text(
        "dois: ['10.18653/v1/N18-3011', '10.18653/v1/2020.acl-main.207']\n"
        "openalex_ids: ['W2963341956']\n"  # polled for citing works without a lookup
        "arxiv_queries: [{query: 'abs:search', max_results: 5}]\n"
    )
    monkeypatch.setenv("LUMINA_SEEDS", str(seeds))
    fast = {"backoff_base_s": 0.0, "min_interval_s": 0.0, "cache_responses": False}
    resources = {
        "openalex": OfflineOpenAlex(api_key="test-key", base_url="http://openalex.test", **fast),
        "arxiv": OfflineArxiv(base_url="http://arxiv.test/api", **fast),
    }
    sensor = build_polling_sensor()
    result = sensor(dg.build_sensor_context(cursor="", resources=resources))
    assert not result.run_requests
    message = result.skip_reason.skip_message
    assert message.startswith("no new works; errors:")
    assert "ConnectError" in message and "test-key" not in message
    assert attempts.count("openalex.test") == 5  # 1 + 4 retries, then nothing more for either client
    assert attempts.count("arxiv.test") == 5
