"""Build and update the LanceDB tables the search engine reads: `passages` (one vector per passage) and `papers`
(metadata and title + abstract text for the paper-level full-text index).

Incremental by construction: rows are keyed by deterministic ids and written with `merge_insert`; a passage is
embedded again only when the text it is embedded from changed (a hash column records it); metadata-only changes
reuse the stored vector. Full-text and scalar indexes are created once and brought up to date with `optimize()`;
an ANN index is created once a table is large enough for brute force to stop being the fast option, and retrained
only when the table has grown past a factor of its training size.

Why one module over 500 lines: the three tables share one write path (row hashes, embedding only what changed,
upserts, index upkeep); the pieces are small functions, but splitting them would scatter one upsert protocol.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from lumina_assets.core.names import last_name
from lumina_assets.core.progress import Progress
from lumina_assets.core.schemas import CITATION_COLUMNS
from lumina_assets.indexing.table_ops import (
    ensure_ann,
    ensure_fts,
    ensure_scalar,
    open_table,
    read_columns,
    sql_in,
    upsert,
    vector_array,
    vectors_from_arrow,
)

log = logging.getLogger(__name__)

PASSAGES_TABLE = "passages"
PAPERS_TABLE = "papers"
INDEX_FORMAT_VERSION = "1"  # what gets embedded: changing it re-embeds every passage
TABLES_VERSION = (
    "2"  # columns and indexes around the vectors (2: author last names, acronyms, scalar indexes)
)
# what search shows of a passage: the columns fetched for candidates (search.stores) and kept in every index row
PASSAGE_DISPLAY_FIELDS = [
    "passage_id",
    "paper_id",
    "kind",
    "section_number",
    "section_title",
    "text",
    "prev_id",
    "next_id",
    "title",
    "doi",
    "url",
    "year",
    "authors",
]


@dataclass
class IndexConfig:
    """How passages are turned into index rows. Changing a field that alters embedded text re-embeds."""

    embed_title: bool = (
        True  # embed "title. passage" so a passage carries its paper's topic (contextual chunk)
    )
    ann_min_rows: int = 100_000  # below this a flat scan of 384-d vectors is faster than an ANN index
    ann_retrain_growth: float = (
        2.0  # retrain the ANN index once the table holds this many times its training rows
    )
    write_batch_rows: int = 4096  # rows embedded and written per merge_insert
    # pipelined: a batch's sentences are encoded right after its passages, and both are written in background
    # threads while the next batch is encoded; off: passages, titles, then sentences, each write awaited (the same
    # rows and vectors, tested)
    pipelined: bool = True
    embed_chunk_rows: int = 1024  # most texts per encode call (calls are sized so progress comes on time)
    progress_every_s: float = 10.0  # seconds between progress lines while embedding
    prune: bool = True  # delete rows whose passage / paper no longer exists upstream
    sentence_vectors: bool = True  # store passages' sentence vectors (highlighting encodes only the query)

    def fingerprint(self) -> str:
        return _sha(f"{INDEX_FORMAT_VERSION}|{int(self.embed_title)}")


@dataclass
class IndexStats:
    passages_total: int = 0
    passages_embedded: int = 0
    passages_metadata_updated: int = 0
    passages_deleted: int = 0
    papers_total: int = 0
    papers_deleted: int = 0
    sentences_embedded: int = 0
    sentence_seconds: float = 0.0  # splitting and encoding sentences (embed_seconds: passages)
    passage_seconds: float = 0.0  # encoding passages alone (what sentence_seconds is compared with)
    embed_seconds: float = 0.0
    write_seconds: float = 0.0
    total_seconds: float = 0.0
    ann_index: bool = False
    dimension: int = 0
    form: str = ""  # the numeric form the vectors were encoded in (indexing/encoder_forms.py)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def paper_url(
    doi: str | None, arxiv_id: str | None, openalex_id: str | None, pdf_urls: list[str] | None
) -> str | None:
    if doi:
        return f"https://doi.org/{doi}"
    if arxiv_id:
        return f"https://arxiv.org/abs/{arxiv_id}"
    if openalex_id:
        return f"https://openalex.org/{openalex_id}"
    if pdf_urls:
        return pdf_urls[0]
    return None


def passage_embed_text(title: str | None, text: str, *, embed_title: bool) -> str:
    title = (title or "").strip()
    if embed_title and title and not text.startswith(title):
        return f"{title}. {text}"
    return text


# ---------------------------------------------------------------- rows


def paper_rows(papers: pl.DataFrame) -> pl.DataFrame:
    """The per-paper metadata the search engine shows and filters on."""
    rows = []
    for row in papers.iter_rows(named=True):
        rows.append(
            {
                "paper_id": row["paper_id"],
                "title": row.get("title") or "",
                "abstract": row.get("abstract") or "",
                "doi": row.get("doi"),
                "url": paper_url(
                    row.get("doi"), row.get("arxiv_id"), row.get("openalex_id"), row.get("pdf_urls")
                ),
                "year": row.get("year"),
                "authors": list(row.get("authors") or []),
                "author_last_names": sorted({n for n in map(last_name, row.get("authors") or []) if n}),
                "venue": row.get("venue"),
                "tags": list(row.get("tags") or []),
                "collections": list(row.get("collections") or []),
                "library_labels": library_labels(row.get("tags"), row.get("collections")),
                **{name: row.get(name) or None for name in CITATION_COLUMNS},
            }
        )
    schema = {
        "paper_id": pl.String,
        "title": pl.String,
        "abstract": pl.String,
        "doi": pl.String,
        "url": pl.String,
        "year": pl.Int32,
        "authors": pl.List(pl.String),
        "author_last_names": pl.List(pl.String),
        "venue": pl.String,
        "tags": pl.List(pl.String),
        "collections": pl.List(pl.String),
        "library_labels": pl.List(pl.String),
        **dict.fromkeys(CITATION_COLUMNS, pl.String),
    }
    return pl.DataFrame(rows, schema=schema).unique("paper_id", keep="last", maintain_order=True)


def library_labels(tags, collections) -> list[str]:
    """What `tag:` / `collection:` filters match (lower case): `tag:<tag>`, and for a collection `A/B` the path,
    each enclosing path and the collection's own name (`collection:a/b`, `collection:a`, `collection:b`), so
    a filter on a collection takes in its sub-collections, as Zotero can show them."""
    labels = [f"tag:{t.strip().lower()}" for t in tags or [] if t and t.strip()]
    for path in collections or []:
        parts = [p.strip().lower() for p in (path or "").split("/") if p.strip()]
        labels += [f"collection:{'/'.join(parts[:n])}" for n in range(1, len(parts) + 1)]
        labels += [f"collection:{parts[-1]}"] if parts else []
    return sorted(set(labels))


def _labels_key(labels) -> str:
    """Library labels in a row hash, only where a paper has some (hashes of unlabelled papers stay as they were)."""
    return "|labels:" + ";".join(labels) if labels else ""


def _citation_key(values) -> str:
    """Pages and arXiv ids in a row hash, only where a paper has them (other papers' hashes stay as they were)."""
    return "".join(f"|{name}:{value}" for name, value in zip(CITATION_COLUMNS, values, strict=True) if value)


def embedder_identity(embedder) -> str:
    """The model behind `embedder` (path or hub name): part of every embedded text's hash, so switching models
    re-embeds everything instead of mixing two models' vectors in one table."""
    for candidate in (embedder, getattr(embedder, "inner", None)):
        for attribute in ("model_id", "model_name_or_path"):
            name = getattr(candidate, attribute, None)
            if isinstance(name, str) and name:
                return name
    return ""


def passage_rows(
    passages: pl.DataFrame, papers: pl.DataFrame, config: IndexConfig, model: str = ""
) -> pl.DataFrame:
    """Passages joined with their paper's metadata, plus the text that gets embedded and its hash (which covers
    the index config and the embedding `model`)."""
    meta = paper_rows(papers).select("paper_id", "title", "doi", "url", "year", "authors")
    frame = passages.unique("passage_id", keep="last", maintain_order=True).join(
        meta, on="paper_id", how="left"
    )
    frame = frame.with_columns(pl.col("title").fill_null(""), pl.col("text").fill_null(""))
    embed_texts = [
        passage_embed_text(title, text, embed_title=config.embed_title)
        for title, text in zip(frame["title"].to_list(), frame["text"].to_list(), strict=True)
    ]
    fingerprint = f"{config.fingerprint()}|{model}"
    frame = frame.with_columns(
        pl.Series("embed_text", embed_texts, dtype=pl.String),
        pl.Series("text_hash", [_sha(fingerprint + "|" + t) for t in embed_texts], dtype=pl.String),
        (pl.col("title") + pl.lit("\n") + pl.col("text")).alias("search_text"),
    )
    frame = frame.with_columns(
        pl.concat_str(
            [
                pl.col(c).cast(pl.String).fill_null("")
                for c in (
                    "paper_id",
                    "kind",
                    "section_number",
                    "section_title",
                    "prev_id",
                    "next_id",
                    "doi",
                    "url",
                )
            ]
            + [pl.col("year").cast(pl.String).fill_null(""), pl.col("authors").list.join(";").fill_null("")],
            separator="|",
        ).alias("row_hash")
    )
    columns = [*PASSAGE_DISPLAY_FIELDS[:6], "search_text", *PASSAGE_DISPLAY_FIELDS[6:]]
    columns += ["embed_text", "text_hash", "row_hash"]
    return frame.select(columns)


def passage_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("passage_id", pa.string(), nullable=False),
            pa.field("paper_id", pa.string(), nullable=False),
            pa.field("kind", pa.string()),
            pa.field("section_number", pa.string()),
            pa.field("section_title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("search_text", pa.string()),
            pa.field("prev_id", pa.string()),
            pa.field("next_id", pa.string()),
            pa.field("title", pa.string()),
            pa.field("doi", pa.string()),
            pa.field("url", pa.string()),
            pa.field("year", pa.int32()),
            pa.field("authors", pa.list_(pa.string())),
            pa.field("text_hash", pa.string()),
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


# a reference library's labels (corpus.library): shown with a paper, and what tag / collection filters match
LIBRARY_FIELDS = [
    pa.field("tags", pa.list_(pa.string())),
    pa.field("collections", pa.list_(pa.string())),
    pa.field("library_labels", pa.list_(pa.string())),
]
CITATION_FIELDS = [pa.field(name, pa.string()) for name in CITATION_COLUMNS]  # null where unknown


def paper_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("paper_id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("abstract", pa.string()),
            pa.field("search_text", pa.string()),
            pa.field("doi", pa.string()),
            pa.field("url", pa.string()),
            pa.field("year", pa.int32()),
            pa.field("authors", pa.list_(pa.string())),
            pa.field("author_last_names", pa.list_(pa.string())),
            pa.field("venue", pa.string()),
            *LIBRARY_FIELDS,
            *CITATION_FIELDS,
            pa.field("text_hash", pa.string()),
            pa.field("row_hash", pa.string()),
        ]
    )


# ---------------------------------------------------------------- indexing


class BatchWriter:
    """Upserts batches in order, in one background thread when `background`: batch N is written while batch N+1
    is embedded (onnxruntime and LanceDB both release the GIL), with at most one write in flight, so memory holds
    two batches at most. The rows written are the same either way (tested); an error in a write is raised by the
    next `write` or by `close`. `append_only`: the table holds none of these keys yet (a new index), so rows are
    appended instead of merged by key (no join against the table per batch)."""

    def __init__(self, db, name: str, table, key: str, *, background: bool = True, append_only: bool = False):
        from concurrent.futures import ThreadPoolExecutor

        self.db, self.name, self.table, self.key = db, name, table, key
        self.append_only = append_only
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="lumina-index-writer") if background else None
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
        if self._pool is None:
            self._upsert(data)
        else:
            self._pending = self._pool.submit(self._upsert, data)

    def close(self, *, raise_errors: bool = True):
        """Wait for the last write; the table (None if nothing was ever written to a missing table)."""
        try:
            self._wait()
        except Exception:
            if raise_errors:
                raise
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
        return self.table


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
    started = time.perf_counter()
    from lumina_assets.indexing import model_identity  # which model built the vectors: search refuses another

    built = open_table(db, PASSAGES_TABLE)
    if built is not None and built.count_rows():  # new vectors in the form of those already stored
        model_identity.adopt_form(embedder, model_identity.of_schema(built.schema).form)
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
        sentences = SentencePlan(db, ids, texts, model, background=config.pipelined)
    try:
        _index_passages(db, rows, embedder, config, stats, dim, say, sentences)
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
            _sizer(config),
            prune=config.prune,
            progress_every_s=config.progress_every_s,
            say=say,
        )
        stats.sentences_embedded, stats.sentence_seconds = found["sentences"], sentences.seconds
    say(cost_line(stats))
    stats.total_seconds = time.perf_counter() - started
    return stats


def cost_line(stats: IndexStats) -> str:
    """What passages and their sentence vectors cost, side by side (seconds spent encoding each)."""
    line = f"passages: {stats.passages_embedded} encoded in {stats.passage_seconds:.1f}s"
    if stats.passage_seconds:
        line += f" ({stats.passages_embedded / stats.passage_seconds:.1f}/s)"
    if not stats.sentences_embedded:
        return line + "; no sentence vectors encoded"
    line += f"; sentence vectors: {stats.sentences_embedded} sentences in {stats.sentence_seconds:.1f}s"
    if stats.sentence_seconds:
        line += f" ({stats.sentences_embedded / stats.sentence_seconds:.1f}/s)"
    if stats.passage_seconds:
        line += f", {stats.sentence_seconds / stats.passage_seconds:.2f}x the passages' seconds"
    return line


def _sizer(config: IndexConfig):
    """Encode calls sized to take about a third of the progress interval, so progress lines come on time."""
    from lumina_assets.indexing.length_batches import CallSizer

    return CallSizer(config.progress_every_s / 3, config.embed_chunk_rows)


def _embed_and_write(
    rows, to_embed, embedder, config, stats, dim, writer, progress, layout, sentences
) -> None:
    """Embed the `to_embed` rows batch by batch, shortest texts first (length_batches.py), and hand each batch to
    `writer`; pipelined, the batch's sentence vectors are encoded next (`sentences`, a SentencePlan) while the
    passages are written, and both are written while the next batch is encoded. `progress`: (on passages encoded,
    on sentences encoded), each called with (texts, characters)."""
    from lumina_assets.indexing.length_batches import encode_in_length_order

    base_columns, schema = layout
    sizer, sentence_sizer = _sizer(config), _sizer(config)  # passages and sentences: their own rates
    for start in range(0, len(to_embed), config.write_batch_rows):
        chosen = to_embed[start : start + config.write_batch_rows]
        batch = rows[chosen]
        t0 = time.perf_counter()
        vectors = encode_in_length_order(
            batch["embed_text"].to_list(), embedder.encode, dim, sizer, progress[0]
        )
        seconds = time.perf_counter() - t0
        stats.embed_seconds += seconds
        stats.passage_seconds += seconds
        t0 = time.perf_counter()
        data = batch.select(base_columns).to_arrow()
        data = data.append_column("vector", vector_array(vectors, dim)).cast(schema)
        writer.write(data)  # waits for the previous batch's write, then starts this one
        stats.write_seconds += time.perf_counter() - t0
        stats.passages_embedded += batch.height
        if sentences is not None and config.pipelined:
            sentences.encode(chosen, embedder, dim, sentence_sizer, progress[1])


def _index_passages(
    db, rows: pl.DataFrame, embedder, config, stats: IndexStats, dim: int, say, sentences=None
) -> dict:
    """Upsert passages (pipelined: with the sentence vectors `sentences` owes for them); returns
    {passage_id: vector} for abstract passages (paper-level abstract vectors)."""
    table = open_table(db, PASSAGES_TABLE)
    existing_hash: dict[str, tuple[str, str]] = {}
    if table is not None:
        stored = read_columns(table, ["passage_id", "text_hash", "row_hash"])
        existing_hash = {
            pid: (th, rh)
            for pid, th, rh in zip(
                stored["passage_id"].to_pylist(),
                stored["text_hash"].to_pylist(),
                stored["row_hash"].to_pylist(),
                strict=True,
            )
        }
    ids = rows["passage_id"].to_list()
    text_hashes = rows["text_hash"].to_list()
    row_hashes = rows["row_hash"].to_list()
    to_embed = [i for i, pid in enumerate(ids) if existing_hash.get(pid, ("", ""))[0] != text_hashes[i]]
    to_refresh = [
        i
        for i, pid in enumerate(ids)
        if pid in existing_hash
        and existing_hash[pid][0] == text_hashes[i]
        and existing_hash[pid][1] != row_hashes[i]
    ]
    say(f"passages: {len(ids)} upstream, {len(to_embed)} to embed, {len(to_refresh)} metadata-only updates")
    if sentences is not None and config.pipelined and sentences.todo:
        say(
            f"sentence vectors: {len(sentences.todo)} passages owe {sentences.owed}, encoded with their passages"
        )
    schema = passage_schema(dim)
    base_columns = [f.name for f in schema if f.name != "vector"]

    pipelined_sentences = sentences if config.pipelined else None
    # characters to encode in this loop (passages' embedded texts, and their sentences when pipelined): the ETA of
    # lines that count passages while each batch's sentences are encoded between them
    texts = rows["embed_text"].to_list()
    chars = {"total": sum(len(texts[i]) for i in to_embed), "done": 0}
    if pipelined_sentences is not None:
        owed = pipelined_sentences.pending
        chars["total"] += sum(len(pipelined_sentences.texts[i]) for i in to_embed if i in owed)
    progress = Progress(
        "embedding passages",
        len(to_embed),
        say,
        unit="passages",
        every_s=config.progress_every_s,
        detail=pipelined_sentences.progress_detail if pipelined_sentences is not None else None,
        share_done=(lambda: chars["done"] / chars["total"])
        if pipelined_sentences and chars["total"]
        else None,
    )

    def encoded(count: int, length: int) -> None:
        chars["done"] += length
        progress.advance(count)

    def sentences_encoded(_count: int, length: int) -> None:
        chars["done"] += length
        progress.tick()

    writer = BatchWriter(
        db,
        PASSAGES_TABLE,
        table,
        "passage_id",
        background=config.pipelined,
        append_only=not existing_hash and (table is None or not table.count_rows()),
    )
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
            (base_columns, schema),
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
            data = batch.select(base_columns).to_arrow()
            data = data.append_column("vector", vector_array(vectors, dim)).cast(schema)
            table = upsert(db, PASSAGES_TABLE, table, data, "passage_id")
        stats.passages_metadata_updated = len(to_refresh)
        stats.write_seconds += time.perf_counter() - t0

    if table is None:  # nothing upstream yet: an empty table still lets search answer "no results"
        empty = pa.Table.from_pylist([], schema=schema)
        table = db.create_table(PASSAGES_TABLE, data=empty, schema=schema)

    if config.prune and existing_hash:
        stale = sorted(set(existing_hash) - set(ids))
        for start in range(0, len(stale), 500):
            table.delete(sql_in("passage_id", stale[start : start + 500]))
        stats.passages_deleted = len(stale)

    t0 = time.perf_counter()
    if table.count_rows():
        ensure_fts(table, "search_text")
        for column in ("passage_id", "paper_id", "year"):
            ensure_scalar(table, column, "BTREE")
        table.optimize()
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
    existing: dict[str, tuple[str, str]] = {}
    if table is not None:
        stored = read_columns(table, ["paper_id", "text_hash", "row_hash"])
        existing = dict(
            zip(
                stored["paper_id"].to_pylist(),
                zip(stored["text_hash"].to_pylist(), stored["row_hash"].to_pylist(), strict=True),
                strict=True,
            )
        )
    abstract_hash: dict[str, str] = {}
    for paper_id, pid, th in (
        passage_frame.filter(pl.col("kind") == "abstract")
        .select("paper_id", "passage_id", "text_hash")
        .iter_rows()
    ):
        abstract_hash[paper_id] = abstract_hash.get(paper_id, "") + pid + th
    meta = meta.with_columns(
        (pl.col("title") + pl.lit("\n") + pl.col("abstract")).alias("search_text"),
        pl.Series("text_hash", [_sha(t or "") for t in meta["title"].to_list()], dtype=pl.String),
        pl.Series(
            "row_hash",
            [
                _sha(
                    "|".join(str(v) for v in row[:7])
                    + abstract_hash.get(row[0], "")
                    + _labels_key(row[7])
                    + _citation_key(row[8:])
                )
                for row in meta.select(
                    "paper_id",
                    "abstract",
                    "doi",
                    "url",
                    "year",
                    "authors",
                    "venue",
                    "library_labels",
                    *CITATION_COLUMNS,
                ).iter_rows()
            ],
            dtype=pl.String,
        ),
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
        stale = sorted(set(existing) - set(meta["paper_id"].to_list()))
        for start in range(0, len(stale), 500):
            table.delete(sql_in("paper_id", stale[start : start + 500]))
        stats.papers_deleted = len(stale)
    t0 = time.perf_counter()
    if table.count_rows():
        ensure_fts(table, "search_text")
        for column, kind in (("paper_id", "BTREE"), ("year", "BTREE"), ("author_last_names", "LABEL_LIST")):
            ensure_scalar(table, column, kind)
        table.optimize()
    stats.write_seconds += time.perf_counter() - t0


def index_version(db) -> str:
    """Changes whenever either table changes: the cache key of in-memory search structures."""
    parts = []
    for name in (PASSAGES_TABLE, PAPERS_TABLE):
        table = open_table(db, name)
        parts.append(f"{name}:{table.version if table is not None else 'none'}")
    return ",".join(parts)
