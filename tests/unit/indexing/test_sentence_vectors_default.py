"""Sentence vectors are stored by an index build unless LUMINA_SENTENCE_VECTORS opts out, and a search process
started afterwards highlights evidence with them: it encodes the query, never the passages' sentences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hashing_embedder import CountingEmbedder

from lumina_assets.core import settings
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.sentence_vectors import SENTENCES_TABLE

ROOT = Path(__file__).resolve().parents[3]
TEXTS = {
    "a": "Citation graphs train document encoders. Triplets come from cited papers. New papers need no citations.",
    "b": "Protein folding is predicted from residue contacts. Contacts come from coevolution. Citations are rare.",
    "c": "Aspirin lowers the risk of stroke. The effect holds in older adults. Bleeding risk rises slightly.",
}


@pytest.mark.parametrize(("value", "stored"), [(None, True), ("1", True), ("0", False), ("off", False)])
def test_sentence_vectors_are_on_by_default_with_an_opt_out(monkeypatch, value, stored):
    if value is None:
        monkeypatch.delenv("LUMINA_SENTENCE_VECTORS", raising=False)
    else:
        monkeypatch.setenv("LUMINA_SENTENCE_VECTORS", value)
    assert settings.get().embedding.sentence_vectors is stored


def _corpus() -> tuple[pl.DataFrame, pl.DataFrame]:
    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
    from lumina_assets.parsing.chunking import passages_for_paper

    papers = [
        {"paper_id": p, "title": f"Paper {p}", "abstract": t, "source": "test"} for p, t in TEXTS.items()
    ]
    rows = [
        r.to_row() for p, t in TEXTS.items() for r in passages_for_paper(p, title=f"Paper {p}", abstract=t)
    ]
    return pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)), pl.DataFrame(papers)


FRESH_SEARCH = """
import json, sys
from hashing_embedder import CountingEmbedder
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService

embedder = CountingEmbedder()
service = SearchService(lambda: SearchEngine(sys.argv[1], embedder, SearchConfig()), pool_size=1)
embedder.texts.clear()
answer = service.search(SearchRequest.from_mapping({"query": sys.argv[2], "k": 3, "overview": False}), use_llm=False)
marks = [h for result in answer["results"] for passage in result.get("passages", []) for h in passage.get("highlights", [])]
print(json.dumps({"encoded": embedder.texts, "highlights": len(marks), "results": len(answer["results"])}))
"""


def _fresh_search(uri: str, query: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "support"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", FRESH_SEARCH, uri, query], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_fresh_search_process_highlights_with_the_stored_sentence_vectors(tmp_path):
    passages, papers = _corpus()
    query = "how are citation graphs used to train encoders"
    stored_uri, plain_uri = str(tmp_path / "stored"), str(tmp_path / "plain")
    stats = indexing.index_corpus(connect_lancedb(stored_uri), passages, papers, CountingEmbedder())
    assert stats.sentences_embedded == 9
    assert indexing.open_table(connect_lancedb(stored_uri), SENTENCES_TABLE).count_rows() == passages.height
    off = indexing.IndexConfig(sentence_vectors=False)
    assert indexing.index_corpus(connect_lancedb(plain_uri), passages, papers, CountingEmbedder(), off)
    assert indexing.open_table(connect_lancedb(plain_uri), SENTENCES_TABLE) is None

    with_vectors, without = _fresh_search(stored_uri, query), _fresh_search(plain_uri, query)
    assert with_vectors["results"] and with_vectors["highlights"]
    sentences = {s.strip() for text in TEXTS.values() for s in text.split(". ")}
    encoded = {t.rstrip(".") for t in with_vectors["encoded"]}
    assert not encoded & sentences  # the stored vectors were used: only the query was encoded
    assert {t.rstrip(".") for t in without["encoded"]} & sentences  # without them, sentences are encoded
