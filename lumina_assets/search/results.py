"""Search results for researchers: the engine's contexts turned into explained, pinpointed results.

`SearchService.search(SearchRequest)` runs the engine (a small pool of engines sharing one embedder and one open
store, so concurrent requests each get their own trace) and returns a JSON-ready dict:
- per result: paper metadata (title, authors, year, venue, DOI, URL, PDF link by content hash where the PDF is
  stored), the score and its explanation (the retrievers that found the paper, the boosts applied), and per passage
  its section title / number, page span, kind, prev / next ids and highlighted evidence sentences (offsets);
- the parsed constraints (filters applied strictly, cues only boosting, each with the syntax that turns it into a
  filter or the query without it);
- an overview citing the returned passages (LLM when configured, else extractive, labelled);
- pagination (page, k, has_more).
UI filters (year range, author, venue) become the query's explicit syntax (`year:2020..2023`, `author:"…"`,
`venue:"…"`), so they filter exactly as typed constraints do.
"""

from __future__ import annotations

import logging
import queue
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lumina_assets.search.evidence import EvidenceScorer, Highlight
from lumina_assets.search.overview import Reference, build_overview

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 1000
MAX_K = 50
MAX_PAGE = 20
MAX_FIELD_CHARS = 200
MAX_DEPTH = 200  # k × page: how deep one request may page into the ranking
WIDEN_FROM = 5  # widening follows the citations of this many top results
WIDEN_MAX = 30  # at most this many linked papers join the candidates
WIDEN_BONUS = (
    0.25  # a widened paper gains this share of the score of each top result it is linked to (set a priori)
)
DENSE_RESULTS = 10  # results whose sentences get dense (model) scores; further ones are scored lexically
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class BadRequest(ValueError):
    """A request the API refuses, with the message the client sees."""


@dataclass
class SearchRequest:
    query: str
    k: int = 10
    page: int = 1
    year_min: int | None = None
    year_max: int | None = None
    author: str | None = None
    venue: str | None = None
    overview: bool = True
    widen: bool = False  # also list in-corpus papers the top results cite or are cited by

    @classmethod
    def from_mapping(cls, data: dict) -> SearchRequest:
        """Validated and bounded; BadRequest with a message otherwise."""
        if not isinstance(data, dict):
            raise BadRequest("the request must be a JSON object")
        unknown = set(data) - {
            "query",
            "q",
            "k",
            "page",
            "year_min",
            "year_max",
            "author",
            "venue",
            "overview",
            "widen",
        }
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
        query = data.get("query", data.get("q"))
        if not isinstance(query, str):
            raise BadRequest("query is required and must be a string")
        if len(query) > MAX_QUERY_CHARS:
            raise BadRequest(f"query is too long ({len(query)} characters; at most {MAX_QUERY_CHARS})")
        if CONTROL.search(query):
            raise BadRequest("query contains control characters")
        query = re.sub(r"\s+", " ", query).strip()
        if not query:
            raise BadRequest("query is empty")
        k = _int(data.get("k", 10), "k", 1, MAX_K)
        page = _int(data.get("page", 1), "page", 1, MAX_PAGE)
        if k * page > MAX_DEPTH:
            raise BadRequest(f"k × page must be at most {MAX_DEPTH} (got {k} × {page})")
        year_min = _int(data.get("year_min"), "year_min", 1000, 2999, optional=True)
        year_max = _int(data.get("year_max"), "year_max", 1000, 2999, optional=True)
        if year_min is not None and year_max is not None and year_min > year_max:
            raise BadRequest("year_min is after year_max")
        author = _text(data.get("author"), "author")
        venue = _text(data.get("venue"), "venue")
        overview, widen = _flag(data.get("overview", True)), _flag(data.get("widen", False))
        return cls(query, k, page, year_min, year_max, author, venue, overview, widen)

    def engine_query(self) -> str:
        """The query with UI filters written as explicit (strict) syntax."""
        parts = [self.query]
        if self.year_min is not None and self.year_max is not None:
            parts.append(f"year:{self.year_min}..{self.year_max}")
        elif self.year_min is not None:
            parts.append(f"year>={self.year_min}")
        elif self.year_max is not None:
            parts.append(f"year<={self.year_max}")
        if self.author:
            parts.append(f'author:"{self.author}"')
        if self.venue:
            parts.append(f'venue:"{self.venue}"')
        return " ".join(parts)


def _flag(value) -> bool:
    if isinstance(value, str):
        return value.lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def _int(value, name: str, low: int, high: int, *, optional: bool = False) -> int | None:
    if value is None or value == "":
        if optional:
            return None
        raise BadRequest(f"{name} is required")
    if isinstance(value, bool):
        raise BadRequest(f"{name} must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be an integer") from None
    if isinstance(value, float) and value != number:
        raise BadRequest(f"{name} must be an integer")
    if not low <= number <= high:
        raise BadRequest(f"{name} must be between {low} and {high} (got {number})")
    return number


def _text(value, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    if len(value) > MAX_FIELD_CHARS:
        raise BadRequest(f"{name} is too long (at most {MAX_FIELD_CHARS} characters)")
    if CONTROL.search(value) or '"' in value:
        raise BadRequest(f"{name} contains control characters or quotes")
    value = re.sub(r"\s+", " ", value).strip()
    return value or None


class PaperFiles:
    """Page spans of passages and stored PDFs of papers, read from the `passages` and `pdf_files` tables for the
    requested ids only (Parquet predicate pushdown); empty when those tables do not exist (e.g. a BEIR index)."""

    def __init__(self, tables_dir: Path | None = None):
        from lumina_assets.core import settings

        self.tables_dir = Path(tables_dir) if tables_dir else settings.tables_dir()

    def _scan(self, name: str):
        import polars as pl

        folder = self.tables_dir / name
        if not folder.is_dir() or not any(folder.glob("*.parquet")):
            return None
        return pl.scan_parquet(str(folder / "*.parquet"), missing_columns="insert", extra_columns="ignore")

    def page_spans(self, passage_ids: list[str]) -> dict[str, tuple[int | None, int | None]]:
        import polars as pl

        scan = self._scan("passages")
        if scan is None or not passage_ids:
            return {}
        try:
            frame = (
                scan.filter(pl.col("passage_id").is_in(passage_ids))
                .select("passage_id", "page_start", "page_end")
                .collect()
            )
        except Exception as error:  # a table being rewritten: no page numbers this time
            log.debug("page spans unavailable: %s", error)
            return {}
        return {r["passage_id"]: (r["page_start"], r["page_end"]) for r in frame.iter_rows(named=True)}

    def pdf_hashes(self, paper_ids: list[str]) -> dict[str, str]:
        import polars as pl

        scan = self._scan("pdf_files")
        if scan is None or not paper_ids:
            return {}
        try:
            frame = (
                scan.filter(pl.col("paper_id").is_in(paper_ids) & (pl.col("status") == "ok"))
                .select("paper_id", "sha256")
                .collect()
            )
        except Exception as error:
            log.debug("pdf hashes unavailable: %s", error)
            return {}
        return {r["paper_id"]: r["sha256"] for r in frame.iter_rows(named=True) if r["sha256"]}

    def citations(self, paper_id: str) -> dict[str, list[str]]:
        """In-corpus links from `citation_edges`: what `paper_id` cites and what cites it."""
        import polars as pl

        path = self.tables_dir / "citation_edges.parquet"
        if not path.exists():
            return {"cites": [], "cited_by": []}
        frame = (
            pl.scan_parquet(str(path))
            .filter((pl.col("citing") == paper_id) | (pl.col("cited") == paper_id))
            .collect()
        )
        return {
            "cites": sorted(frame.filter(pl.col("citing") == paper_id)["cited"].to_list()),
            "cited_by": sorted(frame.filter(pl.col("cited") == paper_id)["citing"].to_list()),
        }


class EnginePool:
    """A few SearchEngines sharing one embedder (and, through stores.open_store, one open store): a request holds
    one engine for its search, so its `last_trace` is its own."""

    def __init__(self, factory, size: int = 4):
        self._engines: queue.Queue = queue.Queue()
        self.engines = [factory() for _ in range(max(1, size))]
        for engine in self.engines:
            self._engines.put(engine)

    @contextmanager
    def engine(self):
        engine = self._engines.get()
        try:
            yield engine
        finally:
            self._engines.put(engine)


def _constraints(parsed, config) -> list[dict]:
    """What the parser understood, each as filter (strict) or boost (reorders only), with the syntax that turns a
    boost into a filter and the query without it."""
    if parsed is None:
        return []
    out = []
    if parsed.has_year:
        low, high = parsed.year_min, parsed.year_max
        strict = parsed.year_explicit or config.year_mode == "filter"
        syntax = (
            f"year:{low}..{high}"
            if low is not None and high is not None
            else f"year>={low}"
            if low is not None
            else f"year<={high}"
        )
        out.append(
            {
                "kind": "year",
                "value": {"min": low, "max": high},
                "mode": "filter" if strict else "boost",
                "as_filter": syntax,
            }
        )
    explicit = {a.lower() for a in parsed.explicit_authors}
    for author in parsed.authors:
        out.append(
            {
                "kind": "author",
                "value": author,
                "mode": "filter" if author.lower() in explicit else "boost",
                "as_filter": f'author:"{author}"',
            }
        )
    for venue in getattr(parsed, "explicit_venues", []) or []:
        out.append({"kind": "venue", "value": venue, "mode": "filter", "as_filter": f'venue:"{venue}"'})
    for item in out:
        item["query_without"] = parsed.text
    return out


def _boosts(parsed, config, paper: dict) -> list[str]:
    """The boosts the engine applied to this paper (mirrors SearchEngine._boost's rules)."""
    from lumina_assets.search.query_parser import last_name

    if parsed is None:
        return []
    applied = []
    boost_authors = [a for a in parsed.authors if a not in parsed.explicit_authors]
    paper_names = {last_name(a) for a in paper.get("authors") or []}
    for author in boost_authors:
        if last_name(author) in paper_names:
            applied.append(f"author {author} ×{1 + config.author_boost:g}")
    year = paper.get("year")
    if parsed.has_year and not parsed.year_explicit and config.year_mode == "boost" and year:
        low = parsed.year_min if parsed.year_min is not None else -(10**6)
        high = parsed.year_max if parsed.year_max is not None else 10**6
        if low <= year <= high:
            applied.append(f"year {year} in the asked range ×{1 + config.year_boost:g}")
    if config.recency_weight > 0 and year:
        applied.append(f"recency (weight {config.recency_weight:g})")
    return applied


RETRIEVER_LABELS = {
    "passage_vectors": "passage meaning (dense vectors)",
    "passage_fulltext": "passage words (BM25)",
    "paper_fulltext": "title/abstract words (BM25)",
    "paper_title_vectors": "title meaning (dense vectors)",
    "paper_abstract_vectors": "abstract meaning (dense vectors)",
}


def stored_sentences(engine):
    """The index's stored sentence vectors (SentenceVectors) for the engine's model; None where the engine has
    no LanceDB behind it. An index without the table still answers: sentences are then encoded per request."""
    from lumina_assets.indexing.lancedb_tables import embedder_identity
    from lumina_assets.indexing.sentence_vectors import SentenceVectors

    try:
        return SentenceVectors(engine.db, embedder_identity(engine.embedder))
    except Exception as error:  # no index yet, or a test double without one
        log.debug("no stored sentence vectors: %s", error)
        return None


class SearchService:
    """Everything `lumina serve` answers, without HTTP: search, one passage with its neighbours, citations."""

    def __init__(
        self,
        engine_factory,
        *,
        pool_size: int = 4,
        scorer: EvidenceScorer | None = None,
        llm_client=None,
        files: PaperFiles | None = None,
    ):
        self.pool = EnginePool(engine_factory, pool_size)
        first = self.pool.engines[0]
        self.scorer = scorer or EvidenceScorer(first.embedder, stored=stored_sentences(first))
        self.llm_client = llm_client
        self.files = files or PaperFiles()
        self.config = first.config

    def warm_up(self) -> None:
        with self.pool.engine() as engine:
            engine.warm_up()
        self.scorer.highlight("warm up", [["A warm up sentence. Another one."]])

    def store(self):
        with self.pool.engine() as engine:
            return engine.store()

    def _papers(self, store, paper_ids: list[str]) -> dict[str, dict]:
        from lumina_assets.search.stores import _rows, sql_in

        if not paper_ids:
            return {}
        columns = [
            c
            for c in ("paper_id", "title", "doi", "url", "year", "authors", "venue")
            if c in store.paper_columns
        ]
        query = store.papers_table.search().where(sql_in("paper_id", paper_ids)).select(columns)
        return {r["paper_id"]: r for r in _rows(query.limit(len(paper_ids)))}

    def search(self, request: SearchRequest) -> dict:
        started = time.perf_counter()
        depth = request.k * request.page
        via: dict[str, list[str]] = {}
        bonus: dict[str, float] = {}
        with self.pool.engine() as engine:
            contexts = engine.search(request.engine_query(), k=depth + 1)
            if request.widen and contexts:
                contexts, via, bonus = self._widen(engine, request.engine_query(), contexts, depth + 1)
            trace = engine.last_trace
            store = engine.store()
        has_more = len(contexts) > depth
        contexts_all = contexts
        contexts = contexts[(request.page - 1) * request.k : depth]
        search_ms = (time.perf_counter() - started) * 1000
        parsed = trace.parsed
        passage_ids = [p for c in contexts for p in c.passage_ids]
        rows = store.passages(passage_ids)
        pages = self.files.page_spans(passage_ids) if passage_ids else {}
        papers = self._papers(store, [c.paper_id for c in contexts])
        pdfs = self.files.pdf_hashes([c.paper_id for c in contexts])
        t0 = time.perf_counter()
        highlight_query = parsed.text if parsed and parsed.text else request.query
        # the engine already encoded this text with the same model: the scorer reuses its vector
        same_vector = (
            trace.query_text == highlight_query and self.scorer.embedder is self.pool.engines[0].embedder
        )
        highlights = self.scorer.highlight(
            highlight_query,
            [c.chunks for c in contexts],
            query_vector=trace.query_vector if same_vector else None,
            dense_results=set(range(DENSE_RESULTS)),
            passage_ids=[c.passage_ids for c in contexts],
        )
        highlight_ms = (time.perf_counter() - t0) * 1000

        results = []
        references: list[Reference] = []
        for rank, (context, per_passage) in enumerate(
            zip(contexts, highlights, strict=True), start=(request.page - 1) * request.k + 1
        ):
            paper = papers.get(context.paper_id, {})
            passages = []
            for passage_id, text, marks in zip(context.passage_ids, context.chunks, per_passage, strict=True):
                row = rows.get(passage_id, {})
                page_start, page_end = row.get("page_start"), row.get("page_end")
                if page_start is None and passage_id in pages:
                    page_start, page_end = pages[passage_id]
                number = len(references) + 1
                evidence = text[marks[0].start : marks[0].end] if marks else ""
                references.append(
                    Reference(
                        number,
                        passage_id,
                        context.paper_id,
                        context.title,
                        text,
                        evidence,
                        marks[0].score if marks else 0.0,
                    )
                )
                passages.append(
                    {
                        "number": number,
                        "passage_id": passage_id,
                        "kind": row.get("kind") or "text",
                        "section_number": row.get("section_number"),
                        "section_title": row.get("section_title"),
                        "page_start": page_start,
                        "page_end": page_end,
                        "text": text,
                        "highlights": [h.to_dict() for h in marks],
                        "prev_id": row.get("prev_id"),
                        "next_id": row.get("next_id"),
                    }
                )
            best = max((h for marks in per_passage for h in marks), key=lambda h: h.score, default=None)
            sha = pdfs.get(context.paper_id)
            results.append(
                {
                    "rank": rank,
                    "paper_id": context.paper_id,
                    "title": paper.get("title") or context.title,
                    "authors": list(paper.get("authors") or []),
                    "year": paper.get("year"),
                    "venue": paper.get("venue"),
                    "doi": paper.get("doi") or context.doi,
                    "url": paper.get("url") or context.url,
                    "pdf": f"/pdf/{sha}" if sha else None,
                    "pdf_sha256": sha,
                    "score": round(float(context.score), 6),
                    "via": via.get(context.paper_id, []),
                    "explanation": {
                        "found_by": [
                            {"retriever": r, "label": RETRIEVER_LABELS.get(r, r)}
                            for r in trace.found_by.get(context.paper_id, [])
                        ],
                        "fusion": self.config.fusion,
                        "boosts": _boosts(parsed, self.config, paper),
                        "citation_bonus": round(bonus[context.paper_id], 6)
                        if context.paper_id in bonus
                        else None,
                        "best_evidence_score": round(best.score, 4) if best else None,
                        "score_note": (
                            "fused score of the retrievers that found the paper "
                            f"({self.config.fusion} fusion), times any boosts; comparable within one search only"
                        ),
                    },
                    "passages": passages,
                }
            )
        overview = None
        if request.overview and references:
            top_papers = {r["paper_id"] for r in results[:5]}
            overview = build_overview(
                highlight_query, [r for r in references if r.paper_id in top_papers], self.llm_client
            ).to_dict()
        related = self._related(store, via, {c.paper_id for c in contexts_all}) if via else []
        filters = trace.filters
        return {
            "related": related,
            "query": request.query,
            "engine_query": request.engine_query(),
            "k": request.k,
            "page": request.page,
            "has_more": has_more,
            "message": trace.message,
            "constraints": _constraints(parsed, self.config),
            "filters": {
                "year_min": getattr(filters, "year_min", None),
                "year_max": getattr(filters, "year_max", None),
                "paper_ids": len(filters.paper_ids)
                if filters is not None and filters.paper_ids is not None
                else None,
                "authors": list(parsed.explicit_authors) if parsed else [],
                "venues": list(getattr(parsed, "explicit_venues", []) or []) if parsed else [],
            },
            "results": results,
            "overview": overview,
            "timings_ms": {
                **{key: round(value, 1) for key, value in trace.timings_ms.items()},
                "search": round(search_ms, 1),
                "highlight": round(highlight_ms, 1),
                "total": round((time.perf_counter() - started) * 1000, 1),
            },
        }

    def _links(self, top) -> dict[str, list[tuple[str, str]]]:
        """{paper_id: [(top paper_id, "cited by" | "cites")]}: the in-corpus citation links (`citation_edges`) of
        the `top` contexts, to any paper (returned or not)."""
        links: dict[str, list[tuple[str, str]]] = {}
        for context in top:
            edges = self.files.citations(context.paper_id)
            for other in edges["cites"]:
                links.setdefault(other, []).append((context.paper_id, "cited by"))
            for other in edges["cited_by"]:
                links.setdefault(other, []).append((context.paper_id, "cites"))
        return {p: found for p, found in links.items() if any(t != p for t, _ in found)}

    def _widen(self, engine, query: str, contexts: list, depth: int):
        """The query widened along in-corpus citations: papers the top results cite or are cited by join the
        candidates; one search restricted to candidates + linked papers scores them all with the same pipeline
        (retrievers, fusion, boosts); then each paper gains `WIDEN_BONUS` × the score of every top result it is
        linked to, and the candidates are re-ranked. Returns (contexts, via, bonus)."""
        from dataclasses import replace

        top = contexts[:WIDEN_FROM]
        titles = {c.paper_id: _short(c.title or c.paper_id) for c in top}
        links = self._links(top)
        returned = {c.paper_id for c in contexts}
        new = sorted((p for p in links if p not in returned), key=lambda p: (-len(links[p]), p))[:WIDEN_MAX]
        if not links:
            return contexts, {}, {}
        pool = [c.paper_id for c in contexts] + new
        with _only_papers(engine, pool):
            rescored = engine.search(query, k=len(pool))
        score_of = {c.paper_id: c.score for c in rescored}
        bonus = {
            p: WIDEN_BONUS * sum(score_of.get(t, 0.0) for t, _ in found if t != p)
            for p, found in links.items()
            if p in score_of
        }
        boosted = [replace(c, score=c.score + bonus.get(c.paper_id, 0.0)) for c in rescored]
        boosted.sort(key=lambda c: -c.score)
        via = {
            p: [f"{kind} \u201c{titles[t]}\u201d" for t, kind in found if t != p]
            for p, found in links.items()
        }
        return boosted[:depth], {p: v for p, v in via.items() if v}, bonus

    def _related(self, store, via: dict[str, list[str]], shown: set[str]) -> list[dict]:
        """The linked papers the widened ranking did not place among its candidates, each with its link."""
        rest = sorted((p for p in via if p not in shown), key=lambda p: (-len(via[p]), p))
        papers = self._papers(store, rest)
        return [
            {"paper_id": p, "title": papers[p].get("title"), "year": papers[p].get("year"), "via": via[p]}
            for p in rest
            if p in papers
        ]

    def passage(self, passage_id: str) -> dict | None:
        """One passage with its previous and next passage (for "show more context")."""
        store = self.store()
        row = store.passages([passage_id]).get(passage_id)
        if row is None:
            return None
        around = store.passages([p for p in (row.get("prev_id"), row.get("next_id")) if p])
        pages = self.files.page_spans([passage_id])

        def view(r: dict | None) -> dict | None:
            if r is None:
                return None
            start, end = pages.get(r["passage_id"], (None, None))
            return {
                "passage_id": r["passage_id"],
                "paper_id": r["paper_id"],
                "kind": r.get("kind"),
                "section_number": r.get("section_number"),
                "section_title": r.get("section_title"),
                "page_start": start,
                "page_end": end,
                "text": r.get("text") or "",
                "prev_id": r.get("prev_id"),
                "next_id": r.get("next_id"),
            }

        return {
            "passage": view(row),
            "prev": view(around.get(row.get("prev_id"))),
            "next": view(around.get(row.get("next_id"))),
        }

    def citations(self, paper_id: str) -> dict:
        links = self.files.citations(paper_id)
        store = self.store()
        titles = self._papers(store, sorted(set(links["cites"] + links["cited_by"])))
        return {
            "paper_id": paper_id,
            **{
                key: [
                    {"paper_id": p, "title": (titles.get(p) or {}).get("title")} for p in ids if p in titles
                ]
                for key, ids in links.items()
            },
        }

    def pdf_path(self, sha256: str) -> Path | None:
        """A stored PDF by content hash only (never a path from the client)."""
        from lumina_assets.parsing.pdf_store import PdfStore

        if not SHA256.match(sha256 or ""):
            return None
        path = PdfStore().path_for(sha256)
        return path if path.is_file() else None


def _short(title: str, limit: int = 60) -> str:
    return title if len(title) <= limit else title[: limit - 1] + "…"


@contextmanager
def _only_papers(engine, paper_ids: list[str]):
    """While held, `engine` admits only these papers as candidates (intersected with the query's own
    filters): every retriever is restricted to them, so they are ranked by the same pipeline."""
    from dataclasses import replace

    original = engine._filters
    allowed = set(paper_ids)

    def restricted(parsed, store):
        filters = original(parsed, store)
        keep = allowed if filters.paper_ids is None else allowed & set(filters.paper_ids)
        return replace(filters, paper_ids=tuple(sorted(keep)))

    engine._filters = restricted
    try:
        yield engine
    finally:
        del engine._filters


def highlight_markup(text: str, highlights: list[Highlight]) -> str:
    """`text` with highlights wrapped in [[...]] (for the terminal)."""
    out, cursor = [], 0
    for h in sorted(highlights, key=lambda h: h.start):
        out += [text[cursor : h.start], "[[", text[h.start : h.end], "]]"]
        cursor = h.end
    out.append(text[cursor:])
    return "".join(out)
