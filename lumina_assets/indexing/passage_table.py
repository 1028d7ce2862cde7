"""The `passages` table's write path: which rows changed (a text hash decides what is embedded again, a row hash
what is rewritten with its stored vector), embedding in length-ordered batches written in the background while the
next batch is encoded, pruning, and the table's full-text, scalar and ANN indexes."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pyarrow as pa

from lumina_assets.core.progress import Progress
from lumina_assets.indexing.index_rows import PASSAGE_COLUMNS, IndexConfig, IndexStats, passage_schema
from lumina_assets.indexing.table_ops import (
    column_map,
    delete_ids,
    ensure_ann,
    ensure_search_indexes,
    open_table,
    read_columns,
    sql_in,
    upsert,
    vector_array,
    vectors_from_arrow,
)

PASSAGES_TABLE = "passages"


class BatchWriter:
    """Upserts batches in order in one background thread (batch N written while N+1 is embedded, one write in
    flight); a write's error is raised by the next `write` or by `close`. `append_only`: the table holds none
    of these keys yet, so rows are appended instead of merged."""

    def __init__(self, db, name: str, table, key: str, *, append_only: bool = False):
        from concurrent.futures import ThreadPoolExecutor

        self.db, self.name, self.table, self.key = db, name, table, key
        self.append_only = append_only
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lumina-index-writer")
        self._pending = None

    def _upsert(self, data: pa.Table) -> None:
        if self.append_only and self.table is not None:
            self.table.add(data)
        else:
            self.table = upsert(self.db, self.name, self.table, data, self.key)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def write(self, data: pa.Table) -> None:
        self._wait()
        self._pending = self._pool.submit(self._upsert, data)

    def close(self, *, raise_errors: bool = True):
        """Wait for the last write; the table (None if nothing was ever written to a missing table)."""
        try:
            self._wait()
        except Exception:
            if raise_errors:
                raise
        finally:
            self._pool.shutdown(wait=True)
        return self.table


def call_sizer(config: IndexConfig):
    """Encode calls sized to take about a third of the progress interval, so progress lines come on time."""
    from lumina_assets.indexing.length_batches import CallSizer

    return CallSizer(config.progress_every_s / 3, config.embed_chunk_rows)


def _with_vectors(batch: pl.DataFrame, vectors: np.ndarray, dim: int) -> pa.Table:
    """The batch's rows with their vectors, as the table stores them."""
    table = batch.select(PASSAGE_COLUMNS).to_arrow().append_column("vector", vector_array(vectors, dim))
    return table.cast(passage_schema(dim))


def _embed_and_write(rows, to_embed, embedder, config, stats, dim, writer, progress, sentences) -> None:
    """Embed the `to_embed` rows batch by batch, shortest texts first, and hand each batch to `writer`; the
    batch's sentences (`sentences`) are encoded next while it is written. `progress`: (passages, sentences)
    callbacks."""
    from lumina_assets.indexing.length_batches import encode_in_length_order

    sizer, sentence_sizer = call_sizer(config), call_sizer(config)  # passages and sentences: their own rates
    for start in range(0, len(to_embed), config.write_batch_rows):
        chosen = to_embed[start : start + config.write_batch_rows]
        batch = rows[chosen]
        t0 = time.perf_counter()
        vectors = encode_in_length_order(
            batch["embed_text"].to_list(), embedder.encode, dim, sizer, progress[0]
        )
        stats.embed_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        writer.write(_with_vectors(batch, vectors, dim))  # waits for the previous batch's write first
        stats.write_seconds += time.perf_counter() - t0
        stats.passages_embedded += batch.height
        if sentences is not None:
            sentences.encode(chosen, embedder, dim, sentence_sizer, progress[1])


def _changed_rows(table, rows: pl.DataFrame) -> tuple[dict[str, tuple[str, str]], list[int], list[int]]:
    """(the stored (text hash, row hash) per passage, rows whose text changed or is new, rows whose metadata
    alone changed)."""
    existing_hash = column_map(table, "passage_id", "text_hash", "row_hash") if table is not None else {}
    ids, text_hashes, row_hashes = (rows[c].to_list() for c in ("passage_id", "text_hash", "row_hash"))
    to_embed = [i for i, pid in enumerate(ids) if existing_hash.get(pid, ("", ""))[0] != text_hashes[i]]
    to_refresh = [
        i
        for i, pid in enumerate(ids)
        if pid in existing_hash
        and existing_hash[pid][0] == text_hashes[i]
        and existing_hash[pid][1] != row_hashes[i]
    ]
    return existing_hash, to_embed, to_refresh


def _embedding_progress(rows: pl.DataFrame, to_embed: list[int], config, say, sentences) -> tuple:
    """The passages' progress line and its two callbacks (passages encoded, sentences encoded); its ETA counts the
    characters to encode (passages' embedded texts and their sentences)."""
    texts = rows["embed_text"].to_list()
    chars = {"total": sum(len(texts[i]) for i in to_embed), "done": 0}
    if sentences is not None:
        chars["total"] += sum(len(sentences.texts[i]) for i in to_embed if i in sentences.pending)
    progress = Progress(
        "embedding passages",
        len(to_embed),
        say,
        unit="passages",
        every_s=config.progress_every_s,
        detail=sentences.progress_detail if sentences is not None else None,
        share_done=(lambda: chars["done"] / chars["total"]) if sentences and chars["total"] else None,
    )

    def encoded(count: int, length: int) -> None:
        chars["done"] += length
        progress.advance(count)

    def sentences_encoded(_count: int, length: int) -> None:
        chars["done"] += length
        progress.tick()

    return progress, encoded, sentences_encoded


def _refresh_metadata(db, table, rows: pl.DataFrame, to_refresh: list[int], config, stats, dim: int):
    """Rewrite the rows whose metadata alone changed, keeping their stored vectors; returns the table."""
    t0 = time.perf_counter()
    for start in range(0, len(to_refresh), config.write_batch_rows):
        batch = rows[to_refresh[start : start + config.write_batch_rows]]
        stored = read_columns(
            table, ["passage_id", "vector"], sql_in("passage_id", batch["passage_id"].to_list())
        )
        by_id = dict(
            zip(stored["passage_id"].to_pylist(), vectors_from_arrow(stored["vector"], dim), strict=True)
        )
        vectors = np.stack([by_id[pid] for pid in batch["passage_id"].to_list()])
        table = upsert(db, PASSAGES_TABLE, table, _with_vectors(batch, vectors, dim), "passage_id")
    stats.passages_metadata_updated = len(to_refresh)
    stats.write_seconds += time.perf_counter() - t0
    return table


def _ensure_passage_indexes(table, config, stats: IndexStats) -> None:
    """The full-text, scalar and (past its threshold) ANN indexes of a non-empty passages table."""
    t0 = time.perf_counter()
    if ensure_search_indexes(table, {"passage_id": "BTREE", "paper_id": "BTREE", "year": "BTREE"}):
        has_ann, note = ensure_ann(
            table,
            "vector",
            table.count_rows(),
            min_rows=config.ann_min_rows,
            retrain_growth=config.ann_retrain_growth,
        )
        stats.ann_index = stats.ann_index or has_ann
        if note:
            stats.notes.append(note)
    stats.write_seconds += time.perf_counter() - t0


def index_passages(
    db, rows: pl.DataFrame, embedder, config, stats: IndexStats, dim: int, say, sentences=None
) -> None:
    """Upsert passages (with the sentence vectors `sentences` owes for them), prune the passages no longer
    upstream (config.prune) and keep the table's indexes."""
    table = open_table(db, PASSAGES_TABLE)
    existing_hash, to_embed, to_refresh = _changed_rows(table, rows)
    ids = rows["passage_id"].to_list()
    say(f"passages: {len(ids)} upstream, {len(to_embed)} to embed, {len(to_refresh)} metadata-only updates")
    if sentences is not None and sentences.todo:
        say(
            f"sentence vectors: {len(sentences.todo)} passages owe {sentences.owed}, encoded with their passages"
        )
    progress, encoded, sentences_encoded = _embedding_progress(rows, to_embed, config, say, sentences)
    writer = BatchWriter(db, PASSAGES_TABLE, table, "passage_id", append_only=not existing_hash)
    try:
        _embed_and_write(
            rows,
            to_embed,
            embedder,
            config,
            stats,
            dim,
            writer,
            (encoded, sentences_encoded),
            sentences,
        )
    except BaseException:
        writer.close(raise_errors=False)  # the error that stopped embedding is the one to report
        raise
    t0 = time.perf_counter()
    table = writer.close()
    stats.write_seconds += time.perf_counter() - t0
    progress.finish()
    if to_refresh and table is not None:
        table = _refresh_metadata(db, table, rows, to_refresh, config, stats, dim)
    if table is None:  # nothing upstream yet: an empty table still lets search answer "no results"
        table = upsert(db, PASSAGES_TABLE, None, passage_schema(dim).empty_table(), "passage_id")
    if config.prune and existing_hash:
        stats.passages_deleted = delete_ids(table, "passage_id", sorted(set(existing_hash) - set(ids)))
    _ensure_passage_indexes(table, config, stats)
