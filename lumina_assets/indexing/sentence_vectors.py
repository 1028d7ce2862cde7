"""Sentence vectors stored at index time, so highlighting evidence at request time encodes only the query.

The `passage_sentences` table holds one row per passage: its sentences' character offsets (`split_sentences`
located in the passage text, as `parsing.chunking.sentence_spans` does at request time) and their vectors (the
index's embedding model, L2-normalized, float16, row-major `n × dim` bytes). `text_hash` covers the model and the
passage text, so a passage whose text or model changed is encoded again and a stale row is never used.

Incremental like the other tables: `index_sentences` encodes only the passages whose hash is missing or differs
(new passages, or every passage once for an index built before this table existed) and deletes rows of passages
that no longer exist. An index without the table still works: the scorer encodes sentences per request.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from lumina_assets.core.progress import Progress

log = logging.getLogger(__name__)

SENTENCES_TABLE = "passage_sentences"
SENTENCES_FORMAT = (
    "1"  # how sentences are split and encoded: changing it re-encodes every passage's sentences
)


def sentence_hash(model: str, text: str) -> str:
    return hashlib.sha256(f"{SENTENCES_FORMAT}|{model}|{text}".encode()).hexdigest()[:24]


def _schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("passage_id", pa.string(), nullable=False),
            pa.field("text_hash", pa.string()),
            pa.field("starts", pa.list_(pa.int32())),
            pa.field("ends", pa.list_(pa.int32())),
            pa.field("dim", pa.int32()),
            pa.field("vectors", pa.binary()),
        ]
    )


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def index_sentences(
    db,
    passage_ids: Sequence[str],
    texts: Sequence[str],
    embedder,
    model: str,
    *,
    prune: bool = True,
    batch_passages: int = 2048,
    encode_chunk: int = 256,
    progress_every_s: float = 10.0,
    log_fn: Callable[[str], None] | None = None,
) -> dict:
    """Bring `passage_sentences` up to date with these passages; returns counts and seconds."""
    from lumina_assets.indexing.table_ops import ensure_scalar, open_table, read_columns, sql_in
    from lumina_assets.parsing.chunking import sentence_spans

    say = log_fn or log.info
    started = time.perf_counter()
    table = open_table(db, SENTENCES_TABLE)
    stored: dict[str, str] = {}
    if table is not None and table.count_rows():
        frame = read_columns(table, ["passage_id", "text_hash"])
        stored = dict(zip(frame["passage_id"].to_pylist(), frame["text_hash"].to_pylist(), strict=True))
    hashes = [sentence_hash(model, t or "") for t in texts]
    todo = [i for i, pid in enumerate(passage_ids) if stored.get(pid) != hashes[i]]
    stats = {"passages": len(passage_ids), "encoded_passages": len(todo), "sentences": 0, "deleted": 0}
    all_spans = {i: sentence_spans(texts[i] or "") for i in todo}
    if todo:
        say(f"sentence vectors: {len(todo)} of {len(passage_ids)} passages to encode")
    progress = Progress(
        "embedding sentences",
        sum(len(found) for found in all_spans.values()),
        say,
        unit="sentences",
        every_s=progress_every_s,
    )
    dim = int(embedder.dimension)
    for begin in range(0, len(todo), batch_passages):
        chosen = todo[begin : begin + batch_passages]
        spans = [all_spans[i] for i in chosen]
        sentences = [texts[i][a:b] for i, found in zip(chosen, spans, strict=True) for a, b in found]
        parts = [np.zeros((0, dim), dtype=np.float32)]
        for offset in range(0, len(sentences), encode_chunk):  # short calls, so progress lines come on time
            chunk = sentences[offset : offset + encode_chunk]
            parts.append(np.asarray(embedder.encode(chunk), dtype=np.float32).reshape(len(chunk), dim))
            progress.advance(len(chunk))
        vectors = _normalized(np.concatenate(parts))
        rows, offset = [], 0
        for i, found in zip(chosen, spans, strict=True):
            block = vectors[offset : offset + len(found)].astype(np.float16)
            offset += len(found)
            rows.append(
                {
                    "passage_id": passage_ids[i],
                    "text_hash": hashes[i],
                    "starts": [a for a, _ in found],
                    "ends": [b for _, b in found],
                    "dim": dim,
                    "vectors": block.tobytes(),
                }
            )
        data = pa.Table.from_pylist(rows, schema=_schema())
        if table is None:
            table = db.create_table(SENTENCES_TABLE, data=data, schema=data.schema)
        else:
            table.merge_insert("passage_id").when_matched_update_all().when_not_matched_insert_all().execute(
                data
            )
        stats["sentences"] += len(sentences)
    progress.finish()
    if prune and table is not None and stored:
        stale = sorted(set(stored) - set(passage_ids))
        for begin in range(0, len(stale), 500):
            table.delete(sql_in("passage_id", stale[begin : begin + 500]))
        stats["deleted"] = len(stale)
    if table is not None and (todo or stats["deleted"]):
        try:
            ensure_scalar(table, "passage_id", "BTREE")
            table.optimize()
        except Exception as error:  # an index is an optimization: lookups by id still work without it
            log.debug("sentence table index: %s", error)
    stats["seconds"] = round(time.perf_counter() - started, 2)
    return stats


def backfill_from_index(db, embedder, *, log_fn: Callable[[str], None] | None = None) -> dict:
    """Sentence vectors for the passages already in an index's `passages` table (an index built before this
    table existed, e.g. a reused eval index); incremental, so a complete table costs one hash comparison."""
    from lumina_assets.indexing.lancedb_tables import PASSAGES_TABLE, embedder_identity
    from lumina_assets.indexing.table_ops import open_table, read_columns

    passages = open_table(db, PASSAGES_TABLE)
    if passages is None:
        return {"passages": 0, "encoded_passages": 0, "sentences": 0, "deleted": 0}
    frame = read_columns(passages, ["passage_id", "text"])
    return index_sentences(
        db,
        frame["passage_id"].to_pylist(),
        [t or "" for t in frame["text"].to_pylist()],
        embedder,
        embedder_identity(embedder),
        log_fn=log_fn,
    )


class SentenceVectors:
    """Stored sentence vectors of passages, by sentence text, for the passages whose stored hash matches their
    current text and the scorer's model; `lookup` returns {} for an index without the table."""

    def __init__(self, db, model: str, *, refresh_seconds: float = 30.0):
        self.db, self.model = db, model
        self.refresh_seconds = refresh_seconds
        self._table = None
        self._opened_at = -1e9
        self._lock = threading.Lock()

    def _current(self):
        from lumina_assets.indexing.table_ops import open_table

        now = time.monotonic()
        with self._lock:
            if now - self._opened_at > self.refresh_seconds:
                try:
                    if self._table is None:
                        self._table = open_table(self.db, SENTENCES_TABLE)
                    else:
                        self._table.checkout_latest()
                except Exception as error:
                    log.debug("sentence vectors unavailable: %s", error)
                    self._table = None
                self._opened_at = now
            return self._table

    def lookup_table(self):
        """The `passage_sentences` table, or None where the index has none."""
        return self._current()

    def lookup(self, passages: dict[str, str]) -> dict[str, np.ndarray]:
        """{sentence text: unit vector (float32)} for the sentences of `passages` ({passage_id: text})."""
        from lumina_assets.indexing.table_ops import sql_in

        table = self._current()
        if table is None or not passages:
            return {}
        try:
            frame = (
                table.search()
                .where(sql_in("passage_id", list(passages)))
                .select(["passage_id", "text_hash", "starts", "ends", "dim", "vectors"])
                .limit(len(passages))
                .to_arrow()
                .to_pylist()
            )
        except Exception as error:  # a table being rewritten: encode this time
            log.debug("sentence vector lookup failed: %s", error)
            return {}
        out: dict[str, np.ndarray] = {}
        for row in frame:
            text = passages.get(row["passage_id"])
            if text is None or row["text_hash"] != sentence_hash(self.model, text):
                continue
            vectors = np.frombuffer(row["vectors"], dtype=np.float16).reshape(-1, row["dim"])
            for start, end, vector in zip(row["starts"], row["ends"], vectors, strict=True):
                out[text[start:end]] = vector.astype(np.float32)
        return out
