"""Why a result is where it is, in words a researcher reads: the constraints the parser understood (filter or
boost, with the syntax that makes a boost a filter), the boosts applied to a paper, and the retrievers' labels."""

from __future__ import annotations

from lumina_assets.core.names import last_name
from lumina_assets.search.query_parser import author_match, year_syntax


def constraints(parsed, config) -> list[dict]:
    """What the parser understood, each as filter (strict) or boost (reorders only), with the syntax that turns a
    boost into a filter and the query without it."""
    if parsed is None:
        return []
    out = []
    if parsed.has_year:
        low, high = parsed.year_min, parsed.year_max
        strict = parsed.year_explicit or config.year_mode == "filter"
        out.append(
            {
                "kind": "year",
                "value": {"min": low, "max": high},
                "mode": "filter" if strict else "boost",
                "as_filter": year_syntax(low, high),
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
    for kind in ("venue", "tag", "collection"):
        for label in getattr(parsed, f"explicit_{kind}s", []) or []:
            out.append({"kind": kind, "value": label, "mode": "filter", "as_filter": f'{kind}:"{label}"'})
    for item in out:
        item["query_without"] = parsed.text
    return out


def applied_boosts(parsed, config, paper: dict) -> list[str]:
    """The boosts the engine applied to this paper (mirrors SearchEngine._boost's rules)."""
    if parsed is None:
        return []
    applied = []
    boost_authors = [a for a in parsed.authors if a not in parsed.explicit_authors]
    paper_names = {last_name(a) for a in paper.get("authors") or []}
    share = author_match(parsed, paper.get("authors")) if boost_authors else 0.0
    for author in boost_authors:
        if last_name(author) in paper_names:
            applied.append(f"author {author} ×{1 + config.author_boost * share:g}")
    year = paper.get("year")
    if parsed.has_year and not parsed.year_explicit and config.year_mode == "boost" and year:
        if parsed.in_years(year):
            applied.append(f"year {year} in the asked range ×{1 + config.year_boost:g}")
    if config.recency_weight > 0 and year:
        applied.append(f"recency (weight {config.recency_weight:g})")
    return applied


RETRIEVER_LABELS = {
    "passage_vectors": "passage meaning (dense vectors)",
    "passage_fulltext": "passage words (BM25)",
    "paper_fulltext": "title/abstract words (BM25)",
}


def short_title(title: str, limit: int = 60) -> str:
    return title if len(title) <= limit else title[: limit - 1] + "…"
