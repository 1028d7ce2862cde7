"""Build and update the LanceDB tables the search engine reads: `passages` (a vector per passage) and `papers`
(metadata and the title + abstract full-text index). A passage is embedded again only when its embedded text
changed (`text_hash`); a metadata-only change keeps the stored vector."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import polars as pl
import pyarrow as pa

from lumina_assets.core.schemas import CITATION_COLUMNS
from lumina_assets.indexing.index_rows import (
    CITATION_FIELDS,
    LIBRARY_FIELDS,
    IndexConfig,
    IndexStats,
    citation_key,
    embedder_identity,
    labels_key,
    paper_rows,
    paper_schema,
    passage_rows,
    short_hash,
)
from lumina_assets.indexing.passage_table import PASSAGES_TABLE, call_sizer, index_passages
from lumina_assets.indexing.table_ops import (
    column_map,
    delete_ids,
    ensure_search_indexes,
    open_table,
    upsert,
)

log = logging.getLogger(__name__)

PAPERS_TABLE = "papers"
PAPER_HASH_COLUMNS = (
    "paper_id",
    "abstract",
    "doi",
    "url",
    "year",
    "authors",
    "venue",
)  # with the labels, pages
TABLES_VERSION = "2"  # columns and indexes around the vectors


def index_corpus(
    db,
    passages: pl.DataFrame,
    papers: pl.DataFrame,
    embedder,
    config: IndexConfig | None = None,
    *,
    log_fn: Callable[[str], None] | None = None,
) -> IndexStats:
    """Bring the `passages` and `papers` LanceDB tables up to date with the given upstream tables."""
    config = config or IndexConfig()
    say = log_fn or log.info
    stats = IndexStats()
    from lumina_assets.indexing import model_identity  # which model built the vectors: search refuses another

    adopt_index_form(db, embedder)
    dim = int(embedder.dimension)
    stats.dimension = dim
    stats.form = model_identity.of_embedder(embedder).form

    model = embedder_identity(embedder)
    rows = passage_rows(passages, papers, config, model)
    stats.passages_total = rows.height
    sentences = None
    if config.sentence_vectors:
        from lumina_assets.indexing.sentence_vectors import SentencePlan

        ids, texts = rows["passage_id"].to_list(), rows["text"].to_list()
        sentences = SentencePlan(db, ids, texts, model)
    try:
        index_passages(db, rows, embedder, config, stats, dim, say, sentences)
        model_identity.record(open_table(db, PASSAGES_TABLE), model_identity.of_embedder(embedder))
        _index_papers(db, papers, rows, config, stats, say)
    except BaseException:
        if sentences is not None:
            sentences.abandon()
        raise
    if sentences is not None:
        found = sentences.finish(
            embedder,
            dim,
            call_sizer(config),
            prune=config.prune,
            progress_every_s=config.progress_every_s,
            say=say,
        )
        stats.sentences_embedded, stats.sentence_seconds = found["sentences"], sentences.seconds
    say(cost_line(stats))
    return stats


def adopt_index_form(db, embedder) -> None:
    """Encode new vectors in the form of those already indexed."""
    from lumina_assets.indexing import model_identity

    built = open_table(db, PASSAGES_TABLE)
    if built is not None and built.count_rows():
        model_identity.adopt_form(embedder, model_identity.of_schema(built.schema).form)


def cost_line(stats: IndexStats) -> str:
    """What passages and their sentence vectors cost, side by side (seconds spent encoding each)."""
    line = f"passages: {stats.passages_embedded} encoded in {stats.embed_seconds:.1f}s"
    if stats.embed_seconds:
        line += f" ({stats.passages_embedded / stats.embed_seconds:.1f}/s)"
    if not stats.sentences_embedded:
        return line + "; no sentence vectors encoded"
    line += f"; sentence vectors: {stats.sentences_embedded} sentences in {stats.sentence_seconds:.1f}s"
    if stats.sentence_seconds:
        line += f" ({stats.sentences_embedded / stats.sentence_seconds:.1f}/s)"
    if stats.embed_seconds:
        line += f", {stats.sentence_seconds / stats.embed_seconds:.2f}x the passages' seconds"
    return line


def _index_papers(db, papers: pl.DataFrame, passage_frame, config, stats, say):
    """Paper rows: metadata and the title + abstract text of the paper-level full-text index."""
    meta = paper_rows(papers)
    stats.papers_total = meta.height
    table = open_table(db, PAPERS_TABLE)
    if table is not None and "author_last_names" not in table.schema.names:
        db.drop_table(PAPERS_TABLE)  # built before author filters existed: rebuilt once
        stats.notes.append("papers table rebuilt for the author_last_names column")
        table = None
    if table is not None and "title_vector" in table.schema.names:
        table.drop_columns(["title_vector", "abstract_vector"])  # written by earlier versions, read by none
    if table is not None and "library_labels" not in table.schema.names:
        table.add_columns(pa.schema(LIBRARY_FIELDS))  # null until a paper has labels
        stats.notes.append("papers table gained the tags / collections columns")
    if table is not None and "pages" not in table.schema.names:
        table.add_columns(pa.schema(CITATION_FIELDS))  # null until a paper's row is written again
        stats.notes.append("papers table gained the pages / arXiv columns")
    existing = column_map(table, "paper_id", "text_hash", "row_hash") if table is not None else {}
    abstracts = passage_frame.filter(pl.col("kind") == "abstract").group_by("paper_id")
    abstract_hash = dict(abstracts.agg((pl.col("passage_id") + pl.col("text_hash")).str.join("")).iter_rows())
    hashed = meta.select(*PAPER_HASH_COLUMNS, "library_labels", *CITATION_COLUMNS).iter_rows()
    row_hashes = [
        short_hash(
            "|".join(map(str, row[:7]))
            + abstract_hash.get(row[0], "")
            + labels_key(row[7])
            + citation_key(row[8:])
        )
        for row in hashed
    ]
    meta = meta.with_columns(
        (pl.col("title") + pl.lit("\n") + pl.col("abstract")).alias("search_text"),
        pl.Series("text_hash", [short_hash(t or "") for t in meta["title"].to_list()], dtype=pl.String),
        pl.Series("row_hash", row_hashes, dtype=pl.String),
    )
    changed = [
        i
        for i, (pid, th, rh) in enumerate(meta.select("paper_id", "text_hash", "row_hash").iter_rows())
        if existing.get(pid) != (th, rh)
    ]
    say(f"papers: {meta.height} upstream, {len(changed)} new or changed")
    schema = paper_schema()
    for start in range(0, len(changed), config.write_batch_rows):
        batch = meta[changed[start : start + config.write_batch_rows]]
        t0 = time.perf_counter()
        table = upsert(
            db, PAPERS_TABLE, table, batch.select(schema.names).to_arrow().cast(schema), "paper_id"
        )
        stats.write_seconds += time.perf_counter() - t0

    if table is None:
        table = db.create_table(PAPERS_TABLE, data=pa.Table.from_pylist([], schema=schema), schema=schema)
    if config.prune and existing:
        stats.papers_deleted = delete_ids(table, "paper_id", sorted(set(existing) - set(meta["paper_id"])))
    t0 = time.perf_counter()
    ensure_search_indexes(table, {"paper_id": "BTREE", "year": "BTREE", "author_last_names": "LABEL_LIST"})
    stats.write_seconds += time.perf_counter() - t0


def index_version(db) -> str:
    """Changes whenever either table changes: the cache key of in-memory search structures."""
    parts = []
    for name in (PASSAGES_TABLE, PAPERS_TABLE):
        table = open_table(db, name)
        parts.append(f"{name}:{table.version if table is not None else 'none'}")
    return ",".join(parts)
