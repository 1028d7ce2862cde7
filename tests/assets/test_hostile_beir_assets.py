"""A BEIR corpus with one-line hostile records through the corpus assets: the papers table keeps every good
record (the first of a repeated `_id`), and rejected_papers has one row per refused line with its reason."""

from __future__ import annotations

import json

import dagster as dg
from dagster import DagsterInstance

from lumina_assets.core import tables
from lumina_assets.corpus.collections import MAX_RECORD_BYTES
from lumina_assets.defs import corpus
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from resources.parsing import ParsingConfig


def test_hostile_lines_are_rejected_rows_and_the_corpus_survives(data_dir, tmp_path):
    folder = tmp_path / "lines"
    folder.mkdir()
    records = [
        {
            "_id": "a",
            "title": "Citation graphs for retrieval",
            "text": "Citations train document embeddings.",
        },
        {"_id": "b", "title": "Protein folding with attention", "text": "Attention layers predict contacts."},
        {"_id": "a", "title": "A later record with the same id", "text": "It must not replace the first."},
    ]
    lines = [json.dumps(r).encode() for r in records]
    lines.insert(1, b'{"_id": "huge", "title": "t", "text": "' + b"x" * (MAX_RECORD_BYTES + 1) + b'"}')
    lines.insert(
        2, b'{"_id": "deep", "title": "t", "text": "x", "m": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    )
    (folder / "corpus.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    result = dg.materialize(
        corpus.ASSETS,
        resources={
            "corpus": CorpusResource(corpus_path=str(folder)),
            "parsing": ParsingConfig(),
            "openalex": OpenAlexResource(),
            "arxiv": ArxivResource(),
        },
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    papers = tables.read(tables.PAPERS)
    titles = dict(zip(papers["source_id"], papers["title"], strict=True))
    assert titles == {"a": "Citation graphs for retrieval", "b": "Protein folding with attention"}
    rejected = tables.read(tables.REJECTED_PAPERS)
    reasons = dict(zip(rejected["paper_id"], rejected["reason"], strict=True))
    assert reasons["beir-lines:line-2"] == "record_too_large"
    assert reasons["beir-lines:line-3"] == "too_deep"
    assert reasons["beir-lines:line-5"] == "duplicate_id"
