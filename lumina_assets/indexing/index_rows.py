"""The rows and schemas of the index tables: passages joined with their paper's metadata and the text that gets
embedded, paper rows for the paper-level full-text index, and the hashes that tell what changed; `IndexConfig` (how
rows are made and written) and `IndexStats` (what an indexing run did)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from lumina_assets.core.names import last_name
from lumina_assets.core.schemas import CITATION_COLUMNS, PASSAGE_SCHEMA

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


# the passages table's columns besides the vector
PASSAGE_COLUMNS = [
    *PASSAGE_DISPLAY_FIELDS[:6],
    "search_text",
    *PASSAGE_DISPLAY_FIELDS[6:],
    "text_hash",
    "row_hash",
]

# what a passage's row hash covers besides its authors: a change rewrites the row, keeping its vector
ROW_HASH_COLUMNS = (
    "paper_id",
    "kind",
    "section_number",
    "section_title",
    "prev_id",
    "next_id",
    "doi",
    "url",
    "year",
)

INDEX_FORMAT_VERSION = "1"  # what gets embedded: changing it re-embeds every passage


def short_hash(text: str) -> str:
    """The 24-hex-digit SHA-256 prefix that row and text hashes use."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@dataclass
class IndexConfig:
    """How passages are turned into index rows. Changing a field that alters embedded text re-embeds."""

    ann_min_rows: int = 100_000  # below this a flat scan of 384-d vectors is faster than an ANN index
    ann_retrain_growth: float = 2.0  # retrain the ANN index once the table holds this many times its rows
    write_batch_rows: int = 4096  # rows embedded and written per merge_insert
    embed_chunk_rows: int = 1024  # most texts per encode call (calls are sized so progress comes on time)
    progress_every_s: float = 10.0  # seconds between progress lines while embedding
    prune: bool = True  # delete rows whose passage / paper no longer exists upstream
    sentence_vectors: bool = True  # store passages' sentence vectors (highlighting encodes only the query)

    def fingerprint(self) -> str:
        return short_hash(f"{INDEX_FORMAT_VERSION}|1")  # "1": the title is embedded (kept so hashes hold)


@dataclass
class IndexStats:
    passages_total: int = 0
    passages_embedded: int = 0
    passages_metadata_updated: int = 0
    passages_deleted: int = 0
    papers_total: int = 0
    papers_deleted: int = 0
    sentences_embedded: int = 0
    sentence_seconds: float = 0.0  # splitting and encoding sentences
    embed_seconds: float = 0.0  # encoding passages alone
    write_seconds: float = 0.0
    ann_index: bool = False
    dimension: int = 0
    form: str = ""  # the numeric form the vectors were encoded in (indexing/encoder_forms.py)
    notes: list[str] = field(default_factory=list)


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


def section_heading(kind: str | None, section_title: str | None, text: str) -> str:
    """The section title a body passage is indexed under (its words are often the answer's: "§ 2.3
    Citation-Based Pretraining Objective"); "" for abstracts, whose title says nothing, for figures, tables and
    formulas, whose text opens with their label and caption, and for a text that opens with it already."""
    heading = (section_title or "").strip() if kind == "text" else ""
    return "" if text.startswith(heading) else heading


def passage_embed_text(title: str | None, text: str, section: str = "") -> str:
    """What is embedded: the paper title and the section heading before the passage (contextual chunk)."""
    title = (title or "").strip()
    head = [title] if title and not text.startswith(title) else []
    head += [section] if section else []
    return ". ".join([*head, text])


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
    meta = [f for f in paper_schema() if f.name not in ("search_text", "text_hash", "row_hash")]
    frame = pl.from_arrow(pa.Table.from_pylist(rows, schema=pa.schema(meta)))
    return frame.unique("paper_id", keep="last", maintain_order=True)


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


def labels_key(labels) -> str:
    """Library labels in a row hash, only where a paper has some (hashes of unlabelled papers stay as they were)."""
    return "|labels:" + ";".join(labels) if labels else ""


def citation_key(values) -> str:
    """Pages and arXiv ids (CITATION_COLUMNS' values) in a row hash, only where a paper has them (other papers'
    hashes stay as they were)."""
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
    titles, texts = frame["title"].to_list(), frame["text"].to_list()
    sections = [
        section_heading(kind, section, text)
        for kind, section, text in zip(
            frame["kind"].to_list(), frame["section_title"].to_list(), texts, strict=True
        )
    ]
    columns = (titles, texts, sections)
    embed_texts = [
        passage_embed_text(title, text, section) for title, text, section in zip(*columns, strict=True)
    ]
    fingerprint = f"{config.fingerprint()}|{model}"
    frame = frame.with_columns(
        pl.Series("embed_text", embed_texts, dtype=pl.String),
        pl.Series("text_hash", [short_hash(fingerprint + "|" + t) for t in embed_texts], dtype=pl.String),
        pl.Series(  # the full-text index reads the paper title and the section heading too
            "search_text",
            [
                "\n".join(filter(None, (title, section))) + "\n" + text
                for title, text, section in zip(*columns, strict=True)
            ],
            dtype=pl.String,
        ),
    )
    covered = [pl.col(c).cast(pl.String).fill_null("") for c in ROW_HASH_COLUMNS]
    row_hash = pl.concat_str([*covered, pl.col("authors").list.join(";").fill_null("")], separator="|")
    return frame.with_columns(row_hash.alias("row_hash")).select(
        *PASSAGE_COLUMNS[:-2], "embed_text", *PASSAGE_COLUMNS[-2:]
    )


def passage_schema(dim: int) -> pa.Schema:
    """The passages table: a passage's columns (core.schemas) with its paper's, the hashes and the vector."""
    fields = {f.name: f for f in PASSAGE_SCHEMA} | {f.name: f for f in paper_schema()}
    vector = pa.field("vector", pa.list_(pa.float32(), dim))
    return pa.schema([*(fields[name] for name in PASSAGE_COLUMNS), vector])


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
