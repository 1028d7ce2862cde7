"""Sentence vectors stored at index time, so highlighting evidence at request time encodes only the query.

`passage_sentences` holds a row per passage: its sentences' offsets and their unit float16 vectors as `n × dim`
bytes, under a hash of model and text, so a stale row is never used. An index without the table still works:
sentences are then encoded per request."""

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
# how sentences are split and encoded: changing it re-encodes every passage's sentences
SENTENCES_FORMAT = "1"


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


class SentencePlan:
    """The sentence vectors an index build owes (passages whose stored hash is missing or differs), encoded
    right after their passages' batch or at the end (`finish`), and written in the background; each passage
    once."""

    def __init__(self, db, passage_ids: Sequence[str], texts: Sequence[str], model: str):
        from lumina_assets.indexing.passage_table import BatchWriter
        from lumina_assets.indexing.table_ops import column_map, open_table
        from lumina_assets.parsing.sentences import sentence_spans

        self.db, self.passage_ids, self.texts = db, list(passage_ids), [t or "" for t in texts]
        table = open_table(db, SENTENCES_TABLE)
        self.stored = column_map(table, "passage_id", "text_hash") if table is not None else {}
        self.hashes = [sentence_hash(model, t) for t in self.texts]
        self.todo = [i for i, pid in enumerate(self.passage_ids) if self.stored.get(pid) != self.hashes[i]]
        self.pending = set(self.todo)
        self.owed = sum(len(sentence_spans(self.texts[i])) for i in self.todo)  # sentences to encode
        self.sentences = 0  # encoded so far
        self._batch_started: float | None = None
        self.seconds = 0.0  # spent splitting, encoding and building rows (writes run beside the next batch)
        self.writer = BatchWriter(db, SENTENCES_TABLE, table, "passage_id", append_only=not self.stored)

    def encode(self, positions: Sequence[int], embedder, dim: int, sizer, on_call=None) -> int:
        """Encode and write the sentences of the passages at `positions` still owed (others are skipped); returns
        how many sentences."""
        from lumina_assets.indexing.length_batches import encode_in_length_order
        from lumina_assets.parsing.sentences import sentence_spans

        chosen = [i for i in positions if i in self.pending]
        if not chosen:
            return 0
        self._batch_started = started = time.perf_counter()
        self.pending.difference_update(chosen)
        spans = [sentence_spans(self.texts[i]) for i in chosen]
        sentences = [self.texts[i][a:b] for i, found in zip(chosen, spans, strict=True) for a, b in found]

        def counted(count: int, chars: int) -> None:
            self.sentences += count
            if on_call is not None:
                on_call(count, chars)

        vectors = _normalized(encode_in_length_order(sentences, embedder.encode, dim, sizer, counted))
        rows, offset = [], 0
        for i, found in zip(chosen, spans, strict=True):
            block = vectors[offset : offset + len(found)].astype(np.float16)
            offset += len(found)
            rows.append(
                {
                    "passage_id": self.passage_ids[i],
                    "text_hash": self.hashes[i],
                    "starts": [a for a, _ in found],
                    "ends": [b for _, b in found],
                    "dim": dim,
                    "vectors": block.tobytes(),
                }
            )
        data = pa.Table.from_pylist(rows, schema=_schema())
        self.seconds += time.perf_counter() - started
        self._batch_started = None
        self.writer.write(data)  # waits for the previous batch's write, then starts this one
        return len(sentences)

    def progress_detail(self) -> str:
        """The sentences' part of a progress line: how many of those owed, at what rate while encoding them."""
        seconds = self.seconds
        if self._batch_started is not None:  # a batch is being encoded now
            seconds += time.perf_counter() - self._batch_started
        rate = f", {self.sentences / seconds:.1f}/s" if seconds and self.sentences else ""
        return f"sentences {self.sentences}/{self.owed}{rate}"

    def abandon(self) -> None:
        """After an error elsewhere in the build: wait for the write in flight, keep what was written."""
        self.writer.close(raise_errors=False)

    def finish(
        self,
        embedder,
        dim: int,
        sizer,
        *,
        prune: bool = True,
        progress_every_s: float = 10.0,
        say: Callable[[str], None] = log.info,
    ) -> dict:
        """Encode what is still owed, wait for the writes, delete the rows of passages gone upstream, index the
        table; returns counts (passages, encoded_passages, sentences, deleted) and `seconds` (as `self.seconds`)."""
        from lumina_assets.indexing.table_ops import delete_ids, ensure_scalar

        left = [i for i in self.todo if i in self.pending]
        if left:
            from lumina_assets.parsing.sentences import sentence_spans

            total = sum(len(sentence_spans(self.texts[i])) for i in left)
            say(f"sentence vectors: {len(left)} of {len(self.passage_ids)} passages to encode")
            progress = Progress("embedding sentences", total, say, unit="sentences", every_s=progress_every_s)
            try:
                for begin in range(0, len(left), 2048):
                    chosen = left[begin : begin + 2048]
                    self.encode(chosen, embedder, dim, sizer, lambda count, _chars: progress.advance(count))
            except BaseException:
                self.abandon()
                raise
            progress.finish()
        table = self.writer.close()
        deleted = 0
        if prune and table is not None and self.stored:
            deleted = delete_ids(table, "passage_id", sorted(set(self.stored) - set(self.passage_ids)))
        if table is not None and (self.todo or deleted):
            try:
                ensure_scalar(table, "passage_id", "BTREE")
                table.optimize()
            except Exception as error:  # an index is an optimization: lookups by id still work without it
                log.debug("sentence table index: %s", error)
        return {
            "passages": len(self.passage_ids),
            "encoded_passages": len(self.todo),
            "sentences": self.sentences,
            "deleted": deleted,
            "seconds": round(self.seconds, 2),
        }


def index_sentences(
    db,
    passage_ids: Sequence[str],
    texts: Sequence[str],
    embedder,
    model: str,
    *,
    log_fn: Callable[[str], None] | None = None,
) -> dict:
    """Bring `passage_sentences` up to date with these passages all at once (a backfill): counts and seconds."""
    from lumina_assets.indexing.length_batches import CallSizer

    plan = SentencePlan(db, passage_ids, texts, model)
    sizer = CallSizer(10.0 / 3, 1024)  # calls of about a third of the progress interval
    return plan.finish(embedder, int(embedder.dimension), sizer, say=log_fn or log.info)


def backfill_from_index(db, embedder, *, log_fn: Callable[[str], None] | None = None) -> dict:
    """Sentence vectors for the passages already in an index's `passages` table (an index built before this
    table existed, e.g. a reused eval index); incremental, so a complete table costs one hash comparison."""
    from lumina_assets.indexing.index_rows import embedder_identity
    from lumina_assets.indexing.passage_table import PASSAGES_TABLE
    from lumina_assets.indexing.table_ops import open_table, read_columns

    passages = open_table(db, PASSAGES_TABLE)
    if passages is None:
        return {"passages": 0, "encoded_passages": 0, "sentences": 0, "deleted": 0}
    from lumina_assets.indexing.model_identity import follow_table

    follow_table(embedder, passages)  # sentences are encoded (and hashed) in the index's form
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

    def lookup_table(self):
        """The `passage_sentences` table (reopened at most every `refresh_seconds`), or None."""
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

    def lookup(self, passages: dict[str, str]) -> dict[str, np.ndarray]:
        """{sentence text: unit vector (float32)} for the sentences of `passages` ({passage_id: text})."""
        from lumina_assets.indexing.table_ops import sql_in

        table = self.lookup_table()
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
