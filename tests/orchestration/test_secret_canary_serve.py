"""The canary scan over the paths tests/orchestration/test_secret_canary.py does not run: `lumina serve`'s requests
(its JSON API with an LLM-written overview), `lumina search`, and the infrastructure secrets used for real: the
index is built by Lumina's own `passage_index` on S3 (moto's server, AWS_* holding canaries), in a run recorded by a
Dagster instance on PostgreSQL (docs/production.md's dagster.yaml, the server requiring DAGSTER_PG_PASSWORD, a
canary).

Every secret variable the code or docs name holds a canary. None may appear in a log line, stdout / stderr, the
serve API's responses, Dagster's events and metadata, any file under the data dir or the Dagster home, any row of
the PostgreSQL database, any object in the bucket, or a request to the LLM's origin other than its own key; the
LLM key must appear in the LLM's requests (the scan could see it). Only the LLM's network is replaced (an httpx2
MockTransport under the SDK); the embedder is the hashing one (this is about where secrets go, not the model)."""

from __future__ import annotations

import logging

import dagster as dg
import httpx
import httpx2
import pytest
from benchmark_slice import write_scifact_slice
from canary_scan import (
    LLMApi,
    bucket_texts,
    canaries_for_every_secret,
    file_texts,
    leaks,
    postgres_texts,
    request_text,
    run_texts,
)
from docs_blocks import documented_postgres_dagster_yaml
from hashing_embedder import HashingEmbedder
from orchestration_servers import local_moto_s3, local_postgres

import lumina_assets.indexing.embedding
import resources.llm
from lumina_assets.core import settings
from resources.embedder import EmbedderResource

pytestmark = pytest.mark.slow

BUCKET = "lumina-canary"
QUERY = "vitamin D deficiency and outcomes"


class _Embedder(HashingEmbedder):
    """Stands in for the bundled model wherever Lumina builds one (`Embedder()`)."""

    model_name = HashingEmbedder.model_id

    def __init__(self, *args, **kwargs):
        super().__init__(dimension=64)


class _EmbedderResource(EmbedderResource):
    def setup_for_execution(self, context) -> None:
        pass

    def get_embedder(self):
        return _Embedder()


def _fake_llm(monkeypatch) -> LLMApi:
    api = LLMApi()
    real = resources.llm.LLMClient

    def client(*args, **kwargs):
        assert kwargs["backend"] == "anthropic", kwargs["backend"]
        if kwargs.get("http_client") is None:
            kwargs["http_client"] = httpx2.Client(transport=httpx2.MockTransport(api))
        return real(*args, **kwargs)

    monkeypatch.setattr(resources.llm, "LLMClient", client)
    return api


def test_no_secret_leaves_through_serve_search_llm_s3_or_postgres(
    shared_data, data_dir, tmp_path, monkeypatch, caplog, capfd
):
    from bench.serve_load import serve_in_thread
    from lumina_assets.cli.main import main
    from lumina_assets.cli.serve import build_service
    from lumina_assets.defs import indexing
    from lumina_assets.search.api import create_app
    from resources.lancedb import LanceDBResource

    canaries = canaries_for_every_secret()
    for name, canary in canaries.items():
        monkeypatch.setenv(name, canary)
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_COMPATIBLE_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "LUMINA_QUESTION_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LUMINA_QUESTION_BACKEND", "anthropic")
    monkeypatch.setattr(lumina_assets.indexing.embedding, "Embedder", _Embedder)
    llm = _fake_llm(monkeypatch)
    write_scifact_slice(shared_data, claims=3, distractors=20)
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(documented_postgres_dagster_yaml(), encoding="utf-8")

    with local_postgres(password=canaries["DAGSTER_PG_PASSWORD"]) as pg, local_moto_s3() as s3:
        monkeypatch.setenv("DAGSTER_PG_HOST", pg.host)
        monkeypatch.setenv("DAGSTER_PG_PORT", str(pg.port))
        monkeypatch.setenv("DAGSTER_PG_USER", pg.username)
        s3.client().create_bucket(Bucket=BUCKET)
        monkeypatch.setenv("LUMINA_LANCEDB_URI", f"s3://{BUCKET}/lancedb")
        monkeypatch.setenv("AWS_REGION", s3.region)
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
        monkeypatch.setenv("AWS_ALLOW_HTTP", "true")

        # Lumina's own passage_index writes the index to S3, in a run the PostgreSQL instance records
        instance = dg.DagsterInstance.from_config(str(home))
        result = dg.materialize(
            [*indexing.ASSETS, *indexing.CHECKS],
            selection=indexing.ASSETS,
            resources={"lancedb": LanceDBResource(), "embedder": _EmbedderResource()},
            instance=instance,
        )
        assert result.success
        assert any(k.startswith(f"s3://{BUCKET}/lancedb/") for k in bucket_texts(s3, BUCKET))

        assert main(["search", QUERY, "--json", "-k", "3"]) == 0

        # lumina serve: its service and app as the command builds them, on 127.0.0.1
        service = build_service(settings.lancedb_uri(), engines=1, use_llm=True)
        server, thread, port = serve_in_thread(create_app(service))
        try:
            base = f"http://127.0.0.1:{port}"
            posted = httpx.post(f"{base}/api/search", json={"query": QUERY, "k": 3}, timeout=120)
            fetched = httpx.get(f"{base}/api/search", params={"query": QUERY, "k": 3}, timeout=120)
            page = httpx.get(f"{base}/", timeout=60)
        finally:
            server.should_exit = True
            thread.join(timeout=30)
        assert posted.status_code == fetched.status_code == page.status_code == 200
        assert posted.json()["overview"]["method"] == "llm"
        assert any("short overview" in p for p in llm.prompts())

        captured = capfd.readouterr()
        places = {"python logs": caplog.text, "stdout": captured.out, "stderr": captured.err}
        places |= {
            "serve POST /api/search": posted.text,
            "serve GET /api/search": fetched.text,
            "serve /": page.text,
        }
        places |= run_texts(instance, [result])
        places |= file_texts(data_dir) | file_texts(home)
        places |= postgres_texts(pg, canaries["DAGSTER_PG_PASSWORD"])
        places |= bucket_texts(s3, BUCKET)
        instance.dispose()

    # the LLM's requests carry its own key and no other secret
    sent = [request_text(r) for r in llm.requests]
    assert any(canaries["ANTHROPIC_API_KEY"] in text for text in sent)
    others = {name: c for name, c in canaries.items() if name != "ANTHROPIC_API_KEY"}
    assert leaks(others, {"requests to the LLM": "\n".join(sent)}) == []
    # the scan reached what it claims to: runs in PostgreSQL, the index in the bucket, the served answers
    assert any(where.startswith("postgres table") and result.run_id in text for where, text in places.items())
    assert any(where.startswith(f"s3://{BUCKET}/lancedb/") for where in places)
    assert posted.json()["results"] and fetched.json()["results"]
    assert leaks(canaries, places) == []
