"""Canary secrets: every secret variable the code or the docs name (tests/support/secret_names.py reads them; a new
one fails the first test below until a scan exercises it) holds a unique canary while real materializations run
offline (the crawl: seed_papers, openalex_works, arxiv_works; a benchmark slice: questions with a question LLM,
Semantic Scholar / SerpAPI / Exa provider results and recursive levels, LLM judgments, scores and report). The
shipped resources are built from the environment as the code location builds them (dg.EnvVar keys, base URLs from
LUMINA_*_URL); only the network is replaced, by one recording transport per API origin (tests/support/recorded.py
for the HTTP APIs, an httpx2 MockTransport under each LLM SDK).

The canary must appear in no log line (caplog, captured stdout / stderr), no Dagster event (the instance's event
log), no materialization or check metadata, no file under the data dir or the Dagster home, and no request to
another API's origin; it must appear in the requests to its own API, which proves the scan could see it.

Response bodies: OpenAlex and arXiv replay recordings from ../shared/data/api_fixtures; Semantic Scholar snippet
search, Exa and the two LLM APIs have no recording and follow their documented response schemas (S2 Graph API
`/snippet/search`, Exa `/search`, Anthropic Messages, OpenAI chat completions), as in tests/unit/evals.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import dagster as dg
import httpx
import httpx2
import pytest
from benchmark_slice import write_scifact_slice
from canary_scan import (
    LLMApi,
    canaries_for_every_secret,
    file_texts,
    leaks,
    request_text,
    run_texts,
)
from recorded import RecordingTransport
from secret_names import secret_variables, where_named

import resources.http
import resources.llm
from lumina_assets.core import settings, tables
from lumina_assets.core.http import RateLimiter
from lumina_assets.defs import benchmark, corpus

PROJECT = settings.PROJECT_ROOT
SEED_DOI = "10.1016/j.xgen.2025.100814"  # the recorded OpenAlex work in api_fixtures/openalex_extracted

# the HTTP APIs on distinct local origins (nothing listens: the transport answers), by the variable naming them
HTTP_ORIGINS = {
    "openalex": ("LUMINA_OPENALEX_URL", 18101),
    "arxiv": ("LUMINA_ARXIV_URL", 18102),
    "semantic_scholar": ("LUMINA_SEMANTIC_SCHOLAR_URL", 18103),
    "google_scholar": ("LUMINA_SERPAPI_URL", 18104),
    "exa": ("LUMINA_EXA_URL", 18105),
}
# the origin each key belongs to (OPENAI_COMPATIBLE_API_KEY: the question LLM switched to an openai-compatible server)
OWN_ORIGIN = {
    "OPENALEX_API_KEY": "openalex",
    "SEMANTIC_SCHOLAR_API_KEY": "semantic_scholar",
    "SERPAPI_API_KEY": "google_scholar",
    "EXA_API_KEY": "exa",
    "ANTHROPIC_API_KEY": "anthropic",
    "OPENAI_API_KEY": "openai",
    "OPENAI_COMPATIBLE_API_KEY": "openai-compatible",
}


# secrets that are not an HTTP API's key, and the test that exercises each (uses it for real while scanning)
INFRASTRUCTURE_SECRETS = {
    "AWS_ACCESS_KEY_ID": "test_secret_canary_serve.py (LanceDB on S3)",
    "AWS_SECRET_ACCESS_KEY": "test_secret_canary_serve.py (LanceDB on S3)",
    "DAGSTER_PG_PASSWORD": "test_secret_canary_serve.py (the Dagster instance on PostgreSQL)",
}


def test_every_secret_the_code_or_docs_name_is_canaried_where_it_is_used():
    """The secret variables are read from the code and the docs (tests/support/secret_names.py), and every one
    gets a canary in the scans. A new one fails here until a scan uses it for real: an API key by its origin
    (OWN_ORIGIN), anything else in INFRASTRUCTURE_SECRETS, with the test that exercises it."""
    found = secret_variables()
    assert {"OPENALEX_API_KEY", "AWS_SECRET_ACCESS_KEY", "DAGSTER_PG_PASSWORD"} <= found  # the reading works
    unscanned = {
        name: where_named(name) for name in sorted(found - set(OWN_ORIGIN) - set(INFRASTRUCTURE_SECRETS))
    }
    assert not unscanned, f"secret variables no canary scan exercises: {unscanned}"
    stale = sorted((set(OWN_ORIGIN) | set(INFRASTRUCTURE_SECRETS)) - found)
    assert not stale, f"scanned names neither the code nor the docs mention any more: {stale}"


# ---------------------------------------------------------------- fake APIs (recorded or documented bodies)


def _openalex(shared_data: Path) -> RecordingTransport:
    folder = shared_data / "api_fixtures" / "openalex_extracted"
    seed = json.loads((folder / "test_doi_search_paper_attributes0__interaction2.json").read_text())
    empty = {"meta": {"count": 0, "next_cursor": None}, "results": []}
    return (
        RecordingTransport()
        .add_json(lambda r: r.url.path == f"/works/doi:{SEED_DOI}", seed)
        .add_json(lambda r: r.url.path == "/works", empty)
    )


def _arxiv(shared_data: Path) -> RecordingTransport:
    feed = (shared_data / "api_fixtures" / "arxiv" / "xiv__arxiv_response.xml").read_bytes()
    return RecordingTransport().add(
        lambda r: r.url.path == "/query",
        lambda r: httpx.Response(200, content=feed, headers={"content-type": "application/atom+xml"}),
    )


def _semantic_scholar() -> RecordingTransport:
    def snippets(request: httpx.Request) -> httpx.Response:
        query = request.url.params.get("query", "")
        data = [
            {
                "snippet": {"text": f"Evidence {i} on {query}.", "snippetKind": "body", "section": "Results"},
                "score": 0.9 - i / 10,
                "paper": {
                    "corpusId": 1000 + i,
                    "title": f"S2 paper {i}",
                    "authors": [],
                    "openAccessInfo": {},
                },
            }
            for i in range(3)
        ]
        return httpx.Response(200, json={"data": data, "retrievalVersion": "v1"})

    def batch(request: httpx.Request) -> httpx.Response:
        ids = json.loads(request.content)["ids"]
        return httpx.Response(200, json=[{"paperId": i, "externalIds": {"DOI": f"10.1/{i}"}} for i in ids])

    return (
        RecordingTransport()
        .add(lambda r: r.url.path == "/snippet/search", snippets)
        .add(lambda r: r.url.path == "/paper/batch", batch)
    )


def _serpapi(shared_data: Path) -> RecordingTransport:
    body = json.loads(
        (
            shared_data / "api_fixtures" / "serpapi_google_scholar" / "google_scholar_q-bananas_num-2.json"
        ).read_text()
    )
    return RecordingTransport().add_json(lambda r: r.url.path == "/search.json", body)


def _exa() -> RecordingTransport:
    def search(request: httpx.Request) -> httpx.Response:
        query = json.loads(request.content)["query"]
        results = [
            {
                "id": f"u{i}",
                "url": f"https://doi.org/10.2/{i}",
                "title": f"{query} {i}",
                "highlights": [f"Evidence {i} about {query}. Second sentence."],
            }
            for i in range(3)
        ]
        return httpx.Response(200, json={"requestId": "r", "results": results})

    return RecordingTransport().add(lambda r: r.url.path == "/search", search)


# ---------------------------------------------------------------- the run


@pytest.fixture
def benchmark_slice(shared_data, data_dir):
    """papers + passages for the relevant documents of four SciFact queries plus 24 others."""
    return write_scifact_slice(shared_data, claims=4, distractors=24)


def _environment(monkeypatch, tmp_path) -> dict[str, str]:
    canaries = canaries_for_every_secret()
    for name, canary in canaries.items():
        monkeypatch.setenv(name, canary)
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_COMPATIBLE_BASE_URL",
        "LUMINA_JUDGE_MODEL",
        "LUMINA_QUESTION_MODEL",
        "LUMINA_CORPUS",
        "LUMINA_RECURSION_LLM",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LUMINA_QUESTION_BACKEND", "anthropic")
    monkeypatch.setenv("LUMINA_JUDGE_BACKEND", "openai")
    for variable, port in HTTP_ORIGINS.values():
        monkeypatch.setenv(variable, f"http://127.0.0.1:{port}")
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(
        f'dois: ["{SEED_DOI}"]\narxiv_queries:\n  - query: "cat:cs.RO AND neural"\n    max_results: 2\n'
        "crawl:\n  depth: 1\n  max_papers: 10\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("LUMINA_SEEDS", str(seeds))
    return canaries


def _fake_network(monkeypatch, shared_data) -> tuple[dict[str, RecordingTransport], dict[str, LLMApi]]:
    """The shipped HTTP and LLM clients, each handed its origin's transport (and no per-host wait)."""
    http = {
        "openalex": _openalex(shared_data),
        "arxiv": _arxiv(shared_data),
        "semantic_scholar": _semantic_scholar(),
        "google_scholar": _serpapi(shared_data),
        "exa": _exa(),
    }
    by_port = {port: http[name] for name, (_, port) in HTTP_ORIGINS.items()}
    real_http_client = resources.http.HttpClient

    def http_client(*args, **kwargs):
        port = httpx.URL(kwargs["base_url"]).port
        kwargs["transport"] = kwargs.get("transport") or by_port[port]
        kwargs["min_interval"] = 0.0
        return real_http_client(*args, **kwargs)

    monkeypatch.setattr(resources.http, "HttpClient", http_client)
    llms = {"anthropic": LLMApi(), "openai": LLMApi(), "openai-compatible": LLMApi()}
    real_llm_client = resources.llm.LLMClient

    def llm_client(*args, **kwargs):
        api = llms.get(kwargs["backend"])
        if api is not None and kwargs.get("http_client") is None:
            kwargs["http_client"] = httpx2.Client(transport=httpx2.MockTransport(api))
        return real_llm_client(*args, **kwargs)

    monkeypatch.setattr(resources.llm, "LLMClient", llm_client)
    RateLimiter.reset()
    return http, llms


def _materialize(instance, assets, selection, resources_, run_config=None, partition=None):
    result = dg.materialize(
        assets,
        selection=selection,
        partition_key=partition,
        resources=resources_,
        instance=instance,
        run_config=run_config or {},
    )
    assert result.success
    return result


def test_no_secret_leaves_through_logs_events_metadata_files_or_other_origins(
    benchmark_slice, data_dir, shared_data, tmp_path, monkeypatch, caplog, capfd
):
    canaries = _environment(monkeypatch, tmp_path)
    assert set(OWN_ORIGIN) <= set(canaries)  # the scan of the code found the known keys
    http, llms = _fake_network(monkeypatch, shared_data)
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.local_temp(tempdir=str(home))
    results = []

    # the crawl, with the shipped corpus resources (OpenAlex key through dg.EnvVar)
    crawl = corpus.build_resources()
    crawl_assets = [corpus.seed_papers, corpus.openalex_works, corpus.arxiv_works]
    results.append(_materialize(instance, crawl_assets, crawl_assets, crawl))
    assert tables.read(tables.OPENALEX_WORKS).height >= 1 and tables.read(tables.ARXIV_WORKS).height >= 1

    # a benchmark slice, with the shipped LLM and provider resources
    bench = benchmark.build_resources()
    config = benchmark.default_run_config(
        synthetic=2, beir_queries=2, depths=[0, 1], page_sizes=[2], calibration_queries=3
    )
    ops = config["ops"]
    ops["user_queries"]["config"]["beir_dir"] = str(benchmark_slice)
    ops["benchmark_scores"]["config"].update(
        {
            "calibration_dir": str(benchmark_slice),
            "validation_queries_llm": 2,
            "bootstrap_resamples": 50,
            "permutation_resamples": 50,
        }
    )
    stages = [
        ([benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions], [None]),
        (
            [benchmark.provider_results, benchmark.recursive_results, benchmark.judgments],
            ["semantic_scholar|00000", "google_scholar|00000", "exa|00000"],  # 4 questions: one shard
        ),
        ([benchmark.benchmark_scores, benchmark.benchmark_report], [None]),
    ]
    everything = benchmark.ASSETS + benchmark.CHECKS
    for selection, partitions in stages:
        names = {a.key.to_user_string() for a in selection}
        stage_config = {"ops": {k: v for k, v in ops.items() if k in names}}
        for partition in partitions:
            results.append(_materialize(instance, everything, selection, bench, stage_config, partition))
    for provider in ("semantic_scholar", "google_scholar", "exa"):
        frame = tables.read(tables.PROVIDER_RESULTS, provider)
        assert frame.height == 4 and frame["error"].null_count() == frame.height, provider

    # the question LLM on an OpenAI-compatible server (vLLM, Ollama): OPENAI_COMPATIBLE_API_KEY is its key
    monkeypatch.setenv("LUMINA_QUESTION_BACKEND", "openai-compatible")
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:18106/v1")
    compatible = {"ops": {"synthetic_questions": {"config": {"count": 1, "seed": 8}}}}
    selection = [benchmark.synthetic_questions]
    results.append(_materialize(instance, everything, selection, benchmark.build_resources(), compatible))

    # every API and LLM was really called, so each key had its chance to leak
    requests = {name: [request_text(r) for r in transport.calls] for name, transport in http.items()}
    requests |= {name: [request_text(r) for r in api.requests] for name, api in llms.items()}
    assert all(requests.values()), {name: len(sent) for name, sent in requests.items()}

    # 1. each key reaches its own API (the scan can see it) and no other origin
    for name, canary in canaries.items():
        own = OWN_ORIGIN.get(name)
        if own is not None:
            assert any(canary in text for text in requests[own]), f"{name} never reached {own}"
        elsewhere = {
            origin for origin, sent in requests.items() if origin != own and any(canary in t for t in sent)
        }
        assert not elsewhere, f"{name} sent to {sorted(elsewhere)}"

    # 2. logs, 3. Dagster's event log and metadata, 4. files under the data dir and the Dagster home
    captured = capfd.readouterr()
    places = {"python logs": caplog.text, "stdout": captured.out, "stderr": captured.err}
    places |= run_texts(instance, results)
    files = file_texts(data_dir) | file_texts(home)
    places |= files
    # the scan covers what a key could leak into: logs that name the APIs, cached API answers, the run storage
    assert "openalex_works" in places["python logs"] + captured.err
    assert any("/cache/" in path for path in files) and any(path.endswith(".db") for path in files)
    assert sum(len(text) for text in places.values()) > 100_000
    assert leaks(canaries, places) == []
    instance.dispose()


def test_the_scan_finds_a_planted_canary(data_dir, tmp_path, caplog, capfd):
    """The same scan on a run that does leak: a log line, an event, metadata and a file are each reported."""
    canary = f"canary-planted-{uuid.uuid4().hex}"

    @dg.asset
    def leaky(context):  # (a string annotation under `from __future__` is refused for a local asset)
        context.log.info(f"key={canary}")  # Dagster's console logger: stderr and the event log
        logging.getLogger("lumina_assets.planted").info("key=%s", canary)  # a library logger: python logs
        (data_dir / "leak.txt").write_text(canary, encoding="utf-8")
        return dg.MaterializeResult(metadata={"key": canary})

    caplog.set_level(logging.DEBUG)
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.local_temp(tempdir=str(home))
    result = _materialize(instance, [leaky], [leaky], {})
    captured = capfd.readouterr()
    places = {"python logs": caplog.text, "stderr": captured.err}
    places |= run_texts(instance, [result]) | file_texts(data_dir) | file_texts(home)
    found = leaks({"PLANTED": canary}, places)
    assert "PLANTED in python logs" in found and "PLANTED in stderr" in found
    assert f"PLANTED in event log {result.run_id}" in found
    assert "PLANTED in metadata leaky" in found
    assert f"PLANTED in {data_dir / 'leak.txt'}" in found
    assert any(entry.endswith(".db") for entry in found)  # the run storage on disk holds it too
    instance.dispose()


def test_httpx_request_lines_name_no_query_key(caplog):
    """httpx logs each request's URL at INFO; the HTTP layer's filter redacts secret query values in it (without
    it the canary run above finds the OpenAlex and SerpAPI keys in the python logs)."""
    import lumina_assets.core.http  # noqa: F401 - installs the filter

    caplog.set_level(logging.INFO, logger="httpx")
    with httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200))) as client:
        client.get(
            "http://127.0.0.1:9/works", params={"filter": "doi:10.1/x", "api_key": "canary-in-a-query"}
        )
    line = next(r.getMessage() for r in caplog.records if r.name == "httpx")
    assert "canary-in-a-query" not in line
    assert "filter=doi%3A10.1%2Fx" in line and "api_key=%2A%2A%2A" in line
