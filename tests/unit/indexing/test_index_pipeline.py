"""Embedding and writing overlap (batch N is written while batch N+1 is embedded): the index holds the same passages
and vectors as when each batch is written before the next is embedded, on a new index and on an update; an error
while embedding leaves the batches written before it, as the sequential path does."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb

COLUMNS = ("passage_id", "paper_id", "kind", "text", "search_text", "title", "text_hash", "row_hash")


def _corpus(count: int, version: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    papers = pl.DataFrame(
        {"paper_id": [f"p{i % 9}" for i in range(9)], "title": [f"Paper {i}" for i in range(9)]}
    )
    texts = [f"passage {i} on topic {i % 13} version {version if i % 4 == 0 else 0}" for i in range(count)]
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


def _rows(uri: str) -> tuple[dict, np.ndarray]:
    table = indexing.open_table(connect_lancedb(uri), indexing.PASSAGES_TABLE).to_arrow()
    order = np.argsort(np.asarray(table["passage_id"].to_pylist()))
    columns = {name: [table[name].to_pylist()[i] for i in order] for name in COLUMNS}
    vectors = np.asarray(table["vector"].to_pylist(), dtype=np.float32)[order]
    return columns, vectors


def _build(uri: str, overlap: bool, versions=(0,), count: int = 230) -> tuple[dict, np.ndarray]:
    config = indexing.IndexConfig(sentence_vectors=False, write_batch_rows=17, overlap_writes=overlap)
    for version in versions:
        passages, papers = _corpus(count, version)
        stats = indexing.index_corpus(connect_lancedb(uri), passages, papers, HashingEmbedder(), config)
        assert stats.passages_total == count
    return _rows(uri)


@pytest.mark.parametrize("versions", [(0,), (0, 1)], ids=["new index", "update"])
def test_pipelined_writes_give_the_same_index_as_sequential_ones(tmp_path, versions):
    pipelined = _build(str(tmp_path / "pipelined"), True, versions)
    sequential = _build(str(tmp_path / "sequential"), False, versions)
    assert pipelined[0] == sequential[0]
    assert np.array_equal(pipelined[1], sequential[1])
    assert len(pipelined[0]["passage_id"]) == 230 == len(set(pipelined[0]["passage_id"]))
    if versions == (0, 1):  # the update re-embedded the changed passages: their texts are version 1's
        assert any("version 1" in t for t in pipelined[0]["text"])


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


@pytest.mark.parametrize("overlap", [True, False])
def test_an_embedding_error_keeps_the_batches_written_before_it(tmp_path, overlap):
    uri = str(tmp_path / "index")
    passages, papers = _corpus(100)
    config = indexing.IndexConfig(
        sentence_vectors=False, write_batch_rows=17, embed_chunk_rows=17, overlap_writes=overlap
    )
    with pytest.raises(RuntimeError, match="encoder died"):
        indexing.index_corpus(connect_lancedb(uri), passages, papers, FailingEmbedder(), config)
    table = indexing.open_table(connect_lancedb(uri), indexing.PASSAGES_TABLE)
    assert table.count_rows() == 3 * 17
