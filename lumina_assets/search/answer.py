"""The shape of a search answer: the engine's ranking (`Ranking`), the page of it split at the relevance line
(`Page`), the rows a page needs (`Details`) and the views assembled into the API's answer (`assemble_answer`)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from lumina_assets.core.schemas import CITATION_COLUMNS
from lumina_assets.search.explain import RETRIEVER_LABELS, applied_boosts, constraints
from lumina_assets.search.overview import Reference
from lumina_assets.search.relevance import partition
from lumina_assets.search.request import SearchRequest


def pdf_name(title: str | None) -> str:
    """A stored PDF's file name for its link (`/pdf/<sha256>/<name>.pdf`): the title's words in ASCII."""
    import unicodedata

    ascii_title = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode()
    words = re.findall(r"[A-Za-z0-9]+", ascii_title)
    return "-".join(words)[:80].strip("-") + ".pdf" if words else "paper.pdf"


@dataclass
class Ranking:
    """What the engine answered for one request, with the relevance line and scores and the widening's links."""

    contexts: list
    pool: int
    trace: object
    store: object
    config: object
    explain: dict
    line: float | None
    relevance: dict[str, float]
    via: dict[str, list[str]]
    bonus: dict[str, float]


@dataclass
class Page:
    """The ranking split at the relevance line (matching papers first) and the requested page of it."""

    matching: list
    less_related: list
    ranked: list  # matching + less_related
    contexts: list  # the requested page
    has_more: bool


@dataclass
class Details:
    """Per page of results: passage rows, page spans, paper rows, PDF hashes and cited-by counts."""

    rows: dict
    pages: dict
    papers: dict
    pdfs: dict
    cited_by: dict


def page_of(ranking: Ranking, request: SearchRequest) -> Page:
    """The results above the relevance line first, the less related after them, and the page `request` asks for."""
    depth = request.k * request.page
    matching, less_related = partition(ranking.contexts, ranking.relevance, ranking.line)
    ranked = matching + less_related
    page = ranked[(request.page - 1) * request.k : depth]
    return Page(matching, less_related, ranked, page, has_more=len(ranked) > depth)


def passage_view(number: int, passage_id: str, text: str, marks: list, details: Details) -> dict:
    """One passage of a result: its place in the paper (section, pages, neighbours) and its highlights."""
    row = details.rows.get(passage_id, {})
    page_start, page_end = row.get("page_start"), row.get("page_end")
    if page_start is None and passage_id in details.pages:
        page_start, page_end = details.pages[passage_id]
    return {
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


def passages_view(context, per_passage: list, details: Details, references: list[Reference]) -> list[dict]:
    """A result's passages, each numbered after the `references` so far and added to them (the overview cites them)."""
    passages = []
    for passage_id, text, marks in zip(context.passage_ids, context.chunks, per_passage, strict=True):
        number = len(references) + 1
        best = marks[0] if marks else None
        evidence = (text[best.start : best.end], best.score, best.dense) if best else ("", 0.0, 0.0)
        references.append(Reference(number, passage_id, context.paper_id, context.title, text, *evidence))
        passages.append(passage_view(number, passage_id, text, marks, details))
    return passages


def explain_result(context, paper: dict, per_passage: list, ranking: Ranking) -> dict:
    """Why a result ranks where it does: the retrievers, fusion, boosts and citation bonus, its best evidence."""
    config, paper_id = ranking.config, context.paper_id
    best = max((h for marks in per_passage for h in marks), key=lambda h: h.score, default=None)
    return {
        "found_by": [
            {"retriever": r, "label": RETRIEVER_LABELS.get(r, r)}
            for r in ranking.trace.found_by.get(paper_id, [])
        ],
        "fusion": config.fusion,
        "boosts": applied_boosts(ranking.trace.parsed, config, paper),
        "citation_bonus": round(ranking.bonus[paper_id], 6) if paper_id in ranking.bonus else None,
        "best_evidence_score": round(best.score, 4) if best else None,
        "score_note": (
            "fused score of the retrievers that found the paper "
            f"({config.fusion} fusion), plus a share of its nearest papers' fused scores "
            "where the index has a neighbour graph, times any boosts; comparable within one "
            "search only"
        ),
    }


def result_view(
    rank: int,
    context,
    per_passage: list,
    ranking: Ranking,
    page: Page,
    details: Details,
    references: list[Reference],
) -> dict:
    """One result: the paper's metadata, its score and explanation, and its passages."""
    paper_id = context.paper_id
    paper = details.papers.get(paper_id, {})
    passages = passages_view(context, per_passage, details, references)
    title = paper.get("title") or context.title
    sha = details.pdfs.get(paper_id)
    return {
        "rank": rank,
        "paper_id": paper_id,
        "title": title,
        "authors": list(paper.get("authors") or []),
        "year": paper.get("year"),
        "venue": paper.get("venue"),
        "tags": list(paper.get("tags") or []),  # from the user's reference library
        "collections": list(paper.get("collections") or []),
        "doi": paper.get("doi") or context.doi,
        "url": paper.get("url") or context.url,
        **{key: paper.get(key) for key in CITATION_COLUMNS},  # None where the index has no column
        "pdf": f"/pdf/{sha}/{pdf_name(title)}" if sha else None,
        "pdf_sha256": sha,
        "cited_by_count": details.cited_by.get(paper_id, 0),
        "score": round(float(context.score), 6),
        "relevance": round(ranking.relevance[paper_id], 4) if paper_id in ranking.relevance else None,
        "matching": rank <= len(page.matching),
        "via": ranking.via.get(paper_id, []),
        "explanation": explain_result(context, paper, per_passage, ranking),
        "passages": passages,
    }


def filters_view(filters, parsed) -> dict:
    """The filters the search applied (a paper-id restriction by its size)."""
    return {
        "year_min": getattr(filters, "year_min", None),
        "year_max": getattr(filters, "year_max", None),
        "paper_ids": len(filters.paper_ids)
        if filters is not None and filters.paper_ids is not None
        else None,
        **{
            name: list(getattr(parsed, f"explicit_{name}", None) or [])
            for name in ("authors", "venues", "tags", "collections")
        },
    }


def assemble_answer(
    request: SearchRequest,
    ranking: Ranking,
    page: Page,
    related: list[dict],
    results: list[dict],
    overview: dict | None,
    timings: dict[str, float],
    started: float,
) -> dict:
    """The JSON-ready answer to one request (the keys and their order are the API's)."""
    trace = ranking.trace
    return {
        "related": related,
        "query": request.query,
        "engine_query": request.engine_query(),
        "k": request.k,
        "page": request.page,
        "sort": request.sort,
        "has_more": page.has_more,
        # how many papers are above the relevance line (`matching_complete` false: at least this many, every
        # ranked candidate was above it); `relevance_line` is None where the model has no fitted line
        "matching": len(page.matching),
        "matching_complete": bool(page.less_related) or len(page.contexts) < ranking.pool,
        "relevance_line": ranking.line,
        "message": trace.message,
        "constraints": constraints(trace.parsed, ranking.config),
        "filters": filters_view(trace.filters, trace.parsed),
        "results": results,
        "overview": overview,
        "explain": ranking.explain,
        "timings_ms": {
            **{key: round(value, 1) for key, value in trace.timings_ms.items()},
            **{key: round(value, 1) for key, value in timings.items()},
            "total": round((time.perf_counter() - started) * 1000, 1),
        },
    }
