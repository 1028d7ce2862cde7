"""README's object-storage path as a user sets it: `LUMINA_LANCEDB_URI=s3://bucket/path` plus the standard `AWS_*`
variables, nothing in code. The whole flow runs through the shipped Definitions and the demo's runner (a corpus
folder of real PDFs → papers → parse → passages → Lumina's own `passage_index`), then Lumina's search engine
answers from the bucket. The bucket is moto's S3 server on 127.0.0.1 (tests/support/orchestration_servers.py), in
its own process group, stopped by PID. The embedder is the hashing one: this is about where the index lives.

Asserted: the index's tables are objects in the bucket under the prefix and nothing is written to a local LanceDB
folder; every paper is found by a search of its own text through a fresh engine; a second index run embeds nothing
and leaves the row counts unchanged (merge_insert upserts on S3)."""

from __future__ import annotations

import shutil

import dagster as dg
import polars as pl
import pytest
from hashing_embedder import CountingEmbedder, embedder_resource
from orchestration_servers import local_moto_s3

from lumina_assets.core import settings, tables
from lumina_assets.indexing import lancedb_tables as indexing

pytestmark = pytest.mark.slow

PDFS = ("N18-3011.pdf", "2304.02623v1.pdf")
BUCKET, PREFIX = "lumina-index", "prod/lancedb"


COUNTER = CountingEmbedder()


def _definitions() -> dg.Definitions:
    from lumina_assets.definitions import defs

    return dg.Definitions(
        assets=list(defs.assets),
        asset_checks=list(defs.asset_checks),
        resources={**defs.resources, "embedder": embedder_resource(COUNTER)},
        jobs=list(defs.jobs),
        loggers=dict(defs.loggers),
    )


def _bucket_keys(s3) -> list[str]:
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_ingest_index_and_search_on_s3_from_the_environment(shared_data, data_dir, tmp_path, monkeypatch):
    from lumina_assets.cli.runner import run_graph, run_job
    from lumina_assets.search.engine import SearchEngine

    folder = tmp_path / "pdfs"
    folder.mkdir()
    for name in PDFS:
        shutil.copyfile(shared_data / "pdfs" / name, folder / name)
    COUNTER.texts.clear()
    with local_moto_s3() as s3:
        s3.client().create_bucket(Bucket=BUCKET)
        for name, value in {
            "LUMINA_LANCEDB_URI": f"s3://{BUCKET}/{PREFIX}",
            "AWS_ACCESS_KEY_ID": s3.access_key,
            "AWS_SECRET_ACCESS_KEY": s3.secret_key,
            "AWS_REGION": s3.region,
            "AWS_ENDPOINT_URL": s3.endpoint,  # an S3-compatible store (MinIO, moto) instead of AWS itself
            "AWS_ALLOW_HTTP": "true",
            "LUMINA_CORPUS": str(folder),
        }.items():
            monkeypatch.setenv(name, value)
        defs = _definitions()
        instance = dg.DagsterInstance.ephemeral()
        reports = run_graph(defs, instance, groups=["corpus", "parsing", "index"])
        assert [(r.job, r.success) for r in reports if not r.success] == []
        assert "index_passages" in [r.job for r in reports]

        # the index lives in the bucket, not on the local disk
        keys = _bucket_keys(s3)
        assert any(k.startswith(f"{PREFIX}/{indexing.PASSAGES_TABLE}.lance/") for k in keys), keys[:5]
        assert all(k.startswith(f"{PREFIX}/") for k in keys)
        assert not (data_dir / "lancedb").exists()

        passages = tables.read_all(tables.PASSAGES)
        papers = set(tables.read(tables.PAPERS)["paper_id"].to_list())
        assert len(papers) == len(PDFS)
        db = defs.resources["lancedb"].connect()
        indexed = indexing.open_table(db, indexing.PASSAGES_TABLE)
        assert indexed.count_rows() == passages.height
        assert set(indexed.to_arrow().column("paper_id").to_pylist()) == papers

        # Lumina's search, from the bucket through a fresh engine, finds each paper by its own text
        engine = SearchEngine(settings.lancedb_uri(), COUNTER, refresh_seconds=0)
        for paper_id in papers:
            text = max(passages.filter(pl.col("paper_id") == paper_id)["text"].to_list(), key=len)
            hits = engine.search(" ".join(text.split()[:40]), k=5)
            assert hits and hits[0].paper_id == paper_id, (paper_id, [h.paper_id for h in hits])
            assert hits[0].chunks

        # a second index run on S3 embeds nothing and duplicates nothing
        COUNTER.texts.clear()
        again = run_job(defs, "index_passages", instance=instance)
        assert again.success, again.error
        assert COUNTER.texts == []
        reopened = indexing.open_table(defs.resources["lancedb"].connect(), indexing.PASSAGES_TABLE)
        assert reopened.count_rows() == passages.height
    assert not (data_dir / "lancedb").exists()
