"""The pipelined index build (a batch's sentences encoded right after its passages, texts encoded shortest first,
batch N written while batch N+1 is encoded) stores each passage's and each sentence's own vector, on a new index
and on an update; an error while embedding leaves the batches written before it. The hashing embedder's vectors
do not depend on which texts share a call, so any difference is the pipeline's (int8 vectors do, slightly)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.indexing import index_rows
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.sentence_vectors import SENTENCES_TABLE

COLUMNS = ("passage_id", "paper_id", "kind", "text", "search_text", "title", "text_hash", "row_hash")


def _corpus(count: int, version: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    papers = pl.DataFrame(
        {"paper_id": [f"p{i % 9}" for i in range(9)], "title": [f"Paper {i}" for i in range(9)]}
    )
    texts = [  # one to five sentences, so sorting by length reorders passages and sentences
        f"Passage {i} is on topic {i % 13}. "
        + "".join(f"Sentence {i} number {n}. " for n in range(i % 5))
        + f"Version {version if i % 4 == 0 else 0}."
        for i in range(count)
    ]
    passages = pl.DataFrame(
        {
            "passage_id": [f"x:{i}" for i in range(count)],
            "paper_id": [f"p{i % 9}" for i in range(count)],
            "kind": ["text"] * count,
            "text": texts,
            **{c: [None] * count for c in ("section_number", "section_title", "prev_id", "next_id")},
        },
        schema_overrides={c: pl.String for c in ("section_number", "section_title", "prev_id", "next_id")},
    )
    return passages, papers


def _rows(uri: str) -> tuple[dict, np.ndarray, list]:
    db = connect_lancedb(uri)
    table = indexing.open_table(db, indexing.PASSAGES_TABLE).to_arrow()
    order = np.argsort(np.asarray(table["passage_id"].to_pylist()))
    columns = {name: [table[name].to_pylist()[i] for i in order] for name in COLUMNS}
    vectors = np.asarray(table["vector"].to_pylist(), dtype=np.float32)[order]
    sentences = indexing.open_table(db, SENTENCES_TABLE).to_arrow().to_pylist()
    return columns, vectors, sorted(sentences, key=lambda row: row["passage_id"])


def _build(uri: str, versions=(0,), count: int = 230) -> tuple[dict, np.ndarray, list]:
    config = indexing.IndexConfig(write_batch_rows=17)
    for version in versions:
        passages, papers = _corpus(count, version)
        stats = indexing.index_corpus(connect_lancedb(uri), passages, papers, HashingEmbedder(), config)
        assert stats.passages_total == count and stats.sentences_embedded > 0
    return _rows(uri)


@pytest.mark.parametrize("versions", [(0,), (0, 1)], ids=["new index", "update"])
def test_the_pipelined_build_stores_each_text_with_its_own_vector(tmp_path, versions):
    pipelined = _build(str(tmp_path / "pipelined"), versions)
    assert len(pipelined[0]["passage_id"]) == 230 == len(set(pipelined[0]["passage_id"]))
    assert [row["passage_id"] for row in pipelined[2]] == pipelined[0]["passage_id"]
    # each passage's vector is its own text's, and each sentence vector its own sentence's
    columns = pipelined[0]
    texts = [
        index_rows.passage_embed_text(title, text)
        for title, text in zip(columns["title"], columns["text"], strict=True)
    ]
    assert np.allclose(pipelined[1], HashingEmbedder().encode(texts), atol=1e-6)
    for row, text in zip(pipelined[2], pipelined[0]["text"], strict=True):
        found = [text[a:b] for a, b in zip(row["starts"], row["ends"], strict=True)]
        stored = np.frombuffer(row["vectors"], dtype=np.float16).reshape(len(found), -1)
        assert np.allclose(stored, HashingEmbedder().encode(found), atol=1e-3)
    if versions == (0, 1):  # the update re-embedded the changed passages: their texts are version 1's
        assert any("Version 1" in t for t in pipelined[0]["text"])


class FailingEmbedder(HashingEmbedder):
    """Fails on its fourth encode call (after three 17-row batches)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def encode(self, texts, **kwargs):
        self.calls += 1
        if self.calls == 4:
            raise RuntimeError("encoder died")
        return super().encode(texts, **kwargs)


def test_an_embedding_error_keeps_the_batches_written_before_it(tmp_path):
    uri = str(tmp_path / "index")
    passages, papers = _corpus(100)
    config = indexing.IndexConfig(sentence_vectors=False, write_batch_rows=17, embed_chunk_rows=17)
    with pytest.raises(RuntimeError, match="encoder died"):
        indexing.index_corpus(connect_lancedb(uri), passages, papers, FailingEmbedder(), config)
    table = indexing.open_table(connect_lancedb(uri), indexing.PASSAGES_TABLE)
    assert table.count_rows() == 3 * 17
