"""The records that flow between stages, as dataclasses plus the Arrow schemas of the tables they land in."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class Paper:
    """One work, normalized across sources (the PapeRet record plus provenance)."""

    paper_id: str
    title: str
    doi: str | None = None
    openalex_id: str | None = None
    arxiv_id: str | None = None
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    publication_date: str | None = None
    venue: str | None = None
    keywords: list[str] = field(default_factory=list)
    abstract: str | None = None
    citation_count: int | None = None
    pdf_urls: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)  # paper ids of cited works (normalized)
    language: str | None = None
    source: str = ""  # openalex | arxiv | local_pdf | beir
    source_id: str | None = None  # id in the source (BEIR _id, OpenAlex W id, file name ...)
    local_path: str | None = None  # PDF already on disk (local corpus / inbox)
    crawl_depth: int = 0
    # where each field came from, as "field:source" (pdf_text, pdf_info, grobid, openalex, arxiv ...): a stronger
    # source's entry comes first when records of one work are merged
    metadata_sources: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # the user's own labels, from their reference library
    collections: list[str] = field(default_factory=list)  # library collections ("Thesis/Chapter 2")
    pages: str | None = None  # in its venue, as BibTeX writes them ("84--91"; core.ids.normalize_pages)
    arxiv_primary_class: str | None = None  # arXiv's primary category ("cs.IR")

    def to_row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_ARROW_TYPES = {"str": pa.string(), "int": pa.int32(), "list[str]": pa.list_(pa.string())}


def arrow_fields(record: type, *, required: tuple[str, ...], int64: tuple[str, ...] = ()) -> list[pa.Field]:
    """A record dataclass's columns in its field order: `required` ones not nullable, `int64` integers wide."""
    return [
        pa.field(
            f.name,
            pa.int64() if f.name in int64 else _ARROW_TYPES[f.type.removesuffix(" | None")],
            nullable=f.name not in required,
        )
        for f in dataclasses.fields(record)
    ]


PAPER_FIELDS = arrow_fields(Paper, required=("paper_id",), int64=("citation_count",))
# what a citation of a paper needs beyond the metadata a result shows (search.citation_export): kept in the index's
# paper rows and in every search result, None where unknown
CITATION_COLUMNS = ("pages", "arxiv_id", "arxiv_primary_class")
# Columns the `papers` table adds to the record: when it was first seen, its ingest batch, a content hash.
PAPERS_TABLE_SCHEMA = pa.schema(
    PAPER_FIELDS
    + [
        pa.field("first_seen", pa.string()),
        pa.field("ingest_batch", pa.string()),
        pa.field("content_hash", pa.string()),
    ]
)
REJECTED_SCHEMA = pa.schema(
    [
        pa.field("paper_id", pa.string()),
        pa.field("title", pa.string()),
        pa.field("source", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("duplicate_of", pa.string()),
    ]
)


@dataclass
class Section:
    number: str  # "1", "2.3"; "0" for text before the first heading; "abstract" for the abstract
    title: str
    text: str
    page_start: int | None = None
    page_end: int | None = None


@dataclass
class Reference:
    ref_id: str  # the parser's bibliography id ("b12"), stable within a paper
    text: str
    title: str | None = None
    doi: str | None = None
    year: int | None = None
    authors: list[str] = field(default_factory=list)
    venue: str | None = None
    arxiv_id: str | None = None


@dataclass
class CitationLink:
    """An in-text citation: where it occurs and which bibliography entry it resolves to."""

    section_number: str
    ref_id: str | None
    marker: str


@dataclass
class Element:
    """A figure, table or display formula, searchable on its own."""

    kind: str  # figure | table | formula
    label: str | None
    caption: str
    content: str = ""
    page: int | None = None
    section_number: str | None = None


@dataclass
class ParsedPaper:
    paper_id: str
    parser: str
    title: str = ""
    abstract: str = ""
    sections: list[Section] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    citations: list[CitationLink] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    page_count: int | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> ParsedPaper:
        raw = json.loads(text)
        return cls(
            paper_id=raw["paper_id"],
            parser=raw["parser"],
            title=raw.get("title", ""),
            abstract=raw.get("abstract", ""),
            sections=[Section(**s) for s in raw.get("sections", [])],
            references=[Reference(**r) for r in raw.get("references", [])],
            citations=[CitationLink(**c) for c in raw.get("citations", [])],
            elements=[Element(**e) for e in raw.get("elements", [])],
            page_count=raw.get("page_count"),
        )


@dataclass
class Passage:
    """The unit of retrieval: the benchmark's "context" chunk."""

    passage_id: str
    paper_id: str
    kind: str  # text | abstract | figure | table | formula
    section_number: str
    section_title: str
    text: str
    page_start: int | None
    page_end: int | None
    token_count: int
    stop_reason: str  # section | token_limit
    prev_id: str | None = None
    next_id: str | None = None

    def to_row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PASSAGE_SCHEMA = pa.schema(arrow_fields(Passage, required=("passage_id", "paper_id")))

# One row per paper of an ingest batch: its PDF in the content-addressed store (the pdf_files table).
PDF_FILES_SCHEMA = pa.schema(
    [
        pa.field("paper_id", pa.string(), nullable=False),
        pa.field("sha256", pa.string()),
        pa.field("path", pa.string()),
        pa.field("bytes", pa.int64()),
        pa.field("status", pa.string()),  # ok | no_pdf | failed
        pa.field("reason", pa.string()),
        pa.field("source_url", pa.string()),
        pa.field("detail", pa.string()),
    ]
)

# One row per paper of an ingest batch: the parse's outcome and the parsed document as JSON (parsed_papers).
PARSED_PAPERS_SCHEMA = pa.schema(
    [
        pa.field("paper_id", pa.string(), nullable=False),
        pa.field("sha256", pa.string()),
        pa.field("parser", pa.string()),  # name@version of the parser that produced (or failed) this row
        pa.field("parser_config", pa.string()),  # the configured parser (what a re-run compares against)
        pa.field("status", pa.string()),  # ok | failed | no_pdf
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("page_count", pa.int32()),
        pa.field("sections", pa.int32()),
        pa.field("references", pa.int32()),
        pa.field("citations", pa.int32()),
        pa.field("elements", pa.int32()),
        pa.field("parse_seconds", pa.float64()),
        pa.field("parsed_json", pa.string()),
    ]
)


def rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Arrow table with exactly `schema`'s columns (missing keys become nulls)."""
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    return pa.table(columns, schema=schema)


@dataclass
class Context:
    """One search result as the benchmark judges it: a paper and the pinpointed passages that answer."""

    title: str
    chunks: list[str]
    doi: str | None = None
    url: str | None = None
    paper_id: str | None = None
    score: float = 0.0
    passage_ids: list[str] = field(default_factory=list)
    # the provider's own ranking of its passages, best first, where it differs from the chunks' order (search
    # shows a paper's passages in reading order); the benchmark cuts contexts best passage first (evals.contexts)
    ranked_passage_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
