"""Embedding says its progress while it works: lines come on the progress interval even when one encode call of
the configured size would take longer, and every passage is embedded exactly once."""

from __future__ import annotations

import time

import lancedb
import polars as pl
from hashing_embedder import HashingEmbedder

from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.length_batches import CallSizer
from lumina_assets.indexing.sentence_vectors import SentencePlan


class SlowEmbedder(HashingEmbedder):
    """5 ms a text: 240 passages take ~1.2 s, four times the 0.3 s progress interval used below."""

    def __init__(self):
        super().__init__(dimension=16)
        self.calls: list[int] = []

    def encode(self, texts, **kwargs):
        self.calls.append(len(texts))
        time.sleep(0.005 * len(texts))
        return super().encode(texts, **kwargs)


def test_progress_lines_come_while_embedding(tmp_path):
    passages = pl.DataFrame(
        {
            "passage_id": [f"p:{i}" for i in range(240)],
            "paper_id": ["p"] * 240,
            "kind": ["text"] * 240,
            "text": [f"passage number {i} about retrieval" for i in range(240)],
            **{c: [None] * 240 for c in ("section_number", "section_title", "prev_id", "next_id")},
        },
        schema_overrides={c: pl.String for c in ("section_number", "section_title", "prev_id", "next_id")},
    )
    papers = pl.DataFrame({"paper_id": ["p"], "title": ["A paper"]})
    lines: list[tuple[float, str]] = []
    embedder = SlowEmbedder()
    config = indexing.IndexConfig(progress_every_s=0.3)
    indexing.index_corpus(
        lancedb.connect(tmp_path / "db"),
        passages,
        papers,
        embedder,
        config,
        log_fn=lambda line: lines.append((time.monotonic(), line)),
    )
    progress = [(t, line) for t, line in lines if line.startswith("embedding passages:")]
    assert len(progress) >= 3, lines  # during the ~1.2 s of embedding, then the last one
    assert progress[-1][1].startswith("embedding passages: 240/240 passages (100%)")
    assert "passages/s" in progress[0][1] and "ETA" in progress[0][1]
    # passages and their sentences (one each here, for evidence highlighting), each encoded once
    assert sum(embedder.calls) == 2 * 240
    assert max(embedder.calls) < 240  # split into calls, so lines could come on time


def test_sentence_vectors_report_progress_too(tmp_path):
    """The sentence vectors of a BEIR-like corpus (one passage a paper) say their progress, in a build and in a
    backfill."""
    count = 600
    passages = pl.DataFrame(
        {
            "passage_id": [f"p{i}:0" for i in range(count)],
            "paper_id": [f"p{i}" for i in range(count)],
            "kind": ["abstract"] * count,
            "text": [f"abstract number {i} about retrieval" for i in range(count)],
            **{c: [None] * count for c in ("section_number", "section_title", "prev_id", "next_id")},
        },
        schema_overrides={c: pl.String for c in ("section_number", "section_title", "prev_id", "next_id")},
    )
    papers = pl.DataFrame(
        {"paper_id": [f"p{i}" for i in range(count)], "title": [f"Title {i}" for i in range(count)]}
    )
    lines: list[str] = []
    indexing.index_corpus(
        lancedb.connect(tmp_path / "db"),
        passages,
        papers,
        SlowEmbedder(),
        indexing.IndexConfig(progress_every_s=0.3),
        log_fn=lines.append,
    )
    # on the passages' lines: they are encoded batch by batch with them
    passage_lines = [line for line in lines if line.startswith("embedding passages:")]
    shown = [line.rsplit("; sentences ", 1)[-1] for line in passage_lines]
    waiting = [
        line for line, part in zip(passage_lines, shown, strict=True) if 0 < int(part.split("/")[0]) < count
    ]
    assert waiting, lines
    # while the last batch's sentences are encoded every passage is done, but the ETA says what is left
    assert "ETA 0s" not in waiting[0] and "ETA ?" not in waiting[0], waiting  # ~3 s of sentences left
    assert shown[-1].startswith(f"{count}/{count}")
    costs = [line for line in lines if line.startswith("passages: ") and "sentence vectors:" in line]
    assert len(costs) == 1 and f"sentence vectors: {count} sentences in" in costs[0], lines

    # a backfill encodes every sentence at once, on progress lines of its own
    lines.clear()
    plan = SentencePlan(lancedb.connect(tmp_path / "backfill"), passages["passage_id"], passages["text"], "m")
    plan.finish(SlowEmbedder(), 16, CallSizer(0.1, 1024), progress_every_s=0.3, say=lines.append)
    sentences = [line for line in lines if line.startswith("embedding sentences:")]
    assert len(sentences) >= 2, lines
    assert sentences[-1].startswith(f"embedding sentences: {count}/{count} sentences (100%)")
