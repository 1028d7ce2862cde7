"""`user_queries` in every entry point: the asset's defaults read LUMINA_USER_QUERIES and pick the BEIR split
(a folder with only qrels/test.tsv works; the split is named in the questions)."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl

from lumina_assets.core import tables
from lumina_assets.defs import benchmark


def test_user_queries_defaults_read_the_environment_and_a_test_only_beir_folder(
    tmp_path, data_dir, monkeypatch
):
    folder = tmp_path / "scidocs-mini"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d0", "title": "T", "text": "x"}))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "what is x"}))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n")
    queries = tmp_path / "mine.jsonl"
    queries.write_text(json.dumps({"query": "graph neural networks for molecules"}) + "\n")
    monkeypatch.setenv("LUMINA_CORPUS", str(folder))
    monkeypatch.setenv("LUMINA_USER_QUERIES", str(queries))
    # no run config at all, as the UI, the schedule and `make demo` run it
    assert dg.materialize([benchmark.user_queries], instance=dg.DagsterInstance.ephemeral()).success
    frame = tables.read(tables.USER_QUERIES)
    assert frame.sort("kind").select("kind", "set_name").rows() == [
        ("beir", "scidocs-mini-test"),
        ("user", "mine"),
    ]
    assert frame.filter(pl.col("kind") == "beir")["relevant_paper_ids"].list.len().to_list() == [1]


def test_a_rerun_without_lumina_corpus_keeps_the_catalogues_beir_questions(tmp_path, data_dir, monkeypatch):
    folder = tmp_path / "scidocs-mini"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d0", "title": "T", "text": "x"}))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "what is x"}))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n")
    papers = pl.DataFrame(
        [{"paper_id": "beir-scidocs-mini:d0", "title": "T", "source": "beir", "source_id": "d0"}]
    )
    tables.write(tables.PAPERS, papers)
    monkeypatch.setenv("LUMINA_CORPUS", str(folder))
    assert dg.materialize([benchmark.user_queries], instance=dg.DagsterInstance.ephemeral()).success
    monkeypatch.delenv("LUMINA_CORPUS")
    assert dg.materialize([benchmark.user_queries], instance=dg.DagsterInstance.ephemeral()).success
    frame = tables.read(tables.USER_QUERIES)
    assert frame.select("kind", "set_name", "held_out").rows() == [("beir", "scidocs-mini-test", True)]
    # a catalogue without that collection does not borrow it
    tables.write(
        tables.PAPERS,
        papers.with_columns(pl.lit("doi:10.1/x").alias("paper_id"), pl.lit("openalex").alias("source")),
    )
    assert dg.materialize([benchmark.user_queries], instance=dg.DagsterInstance.ephemeral()).success
    assert tables.read(tables.USER_QUERIES).height == 0
