"""OpenAlex works API: lookups by DOI / OpenAlex id / arXiv id, works by filter with cursor paging, abstracts
rebuilt from the inverted index, best open-access PDF URL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lumina_assets.core.http import HttpClient
from lumina_assets.core.ids import (
    normalize_arxiv_id,
    normalize_doi,
    normalize_openalex_id,
    normalize_pages,
    paper_id_for,
)
from lumina_assets.core.schemas import Paper

SELECT_FIELDS = (
    "id,doi,title,display_name,publication_year,publication_date,ids,language,primary_location,"
    "best_oa_location,locations,open_access,authorships,keywords,concepts,cited_by_count,"
    "referenced_works,abstract_inverted_index,type,biblio"
)


class OpenAlexError(RuntimeError):
    """A work that could not be fetched or understood; the message names it."""


def rebuild_abstract(inverted_index: dict[str, list[int]] | None) -> str | None:
    """OpenAlex ships abstracts as {word: [positions]}; put the words back in order."""
    if not inverted_index:
        return None
    positioned: dict[int, str] = {}
    for word, positions in inverted_index.items():
        for position in positions or []:
            positioned[int(position)] = word
    if not positioned:
        return None
    return " ".join(positioned[i] for i in sorted(positioned))


def best_pdf_urls(work: dict[str, Any]) -> list[str]:
    """Open-access PDF URLs, best location first, without duplicates."""
    candidates = [work.get("best_oa_location"), work.get("primary_location"), *(work.get("locations") or [])]
    return list(dict.fromkeys(url for location in candidates if (url := (location or {}).get("pdf_url"))))


def arxiv_id_of(work: dict[str, Any]) -> str | None:
    """arXiv id from the work's DOI (10.48550/arXiv.X) or an arxiv.org location."""
    doi = normalize_doi(work.get("doi"))
    if doi and doi.startswith("10.48550/arxiv."):
        return normalize_arxiv_id(doi.split("arxiv.", 1)[1])
    for location in work.get("locations") or []:
        for key in ("landing_page_url", "pdf_url"):
            url = (location or {}).get(key) or ""
            if "arxiv.org/" in url:
                found = normalize_arxiv_id(url)
                if found:
                    return found
    return None


def work_to_paper(work: dict[str, Any], *, crawl_depth: int = 0) -> Paper:
    """Normalize one OpenAlex work record; raises OpenAlexError when it has no usable id or title."""
    openalex_id = normalize_openalex_id(work.get("id"))
    title = (work.get("title") or work.get("display_name") or "").strip()
    if not openalex_id:
        raise OpenAlexError(f"OpenAlex record without an id (title {title[:60]!r})")
    doi = normalize_doi(work.get("doi"))
    arxiv_id = arxiv_id_of(work)
    venue = (((work.get("primary_location") or {}).get("source")) or {}).get("display_name")
    authors = [
        (a.get("author") or {}).get("display_name") or a.get("raw_author_name") or ""
        for a in work.get("authorships") or []
    ]
    keywords = [k.get("display_name") for k in work.get("keywords") or [] if k.get("display_name")]
    year = work.get("publication_year")
    biblio = work.get("biblio") or {}
    return Paper(
        paper_id=paper_id_for(doi=doi, arxiv_id=arxiv_id, openalex_id=openalex_id),
        title=title,
        doi=doi,
        openalex_id=openalex_id,
        arxiv_id=arxiv_id,
        authors=[a for a in authors if a],
        year=int(year) if year not in (None, "") else None,
        publication_date=work.get("publication_date"),
        venue=venue,
        keywords=keywords,
        abstract=rebuild_abstract(work.get("abstract_inverted_index")),
        citation_count=work.get("cited_by_count"),
        pdf_urls=best_pdf_urls(work),
        references=[
            f"openalex:{w}"
            for w in (normalize_openalex_id(r) for r in work.get("referenced_works") or [])
            if w
        ],
        language=work.get("language"),
        pages=normalize_pages(biblio.get("first_page"), biblio.get("last_page")),
        source="openalex",
        source_id=openalex_id,
        crawl_depth=crawl_depth,
    )


class OpenAlexClient:
    """Thin typed client over the shared HttpClient; the API key travels as the `api_key` parameter."""

    def __init__(self, http: HttpClient, *, api_key: str | None = None, mailto: str | None = None):
        self.http = http
        self._auth = {k: v for k, v in {"api_key": api_key, "mailto": mailto}.items() if v}

    def work(self, identifier: str) -> dict[str, Any] | None:
        """A work by DOI, OpenAlex id or arXiv id; None when OpenAlex does not know it (404, cached too)."""
        key = self.lookup_key(identifier)
        response = self.http.get(
            f"/works/{key}", params={"select": SELECT_FIELDS, **self._auth}, ok_statuses=(404,)
        )
        if response.status_code == 404:
            return None
        body = self.http.decode_json(response)
        if not isinstance(body, dict):
            raise OpenAlexError(f"unexpected OpenAlex body for work {identifier}: {type(body).__name__}")
        return body

    @staticmethod
    def lookup_key(identifier: str) -> str:
        """The path key OpenAlex resolves: `W123`, `doi:10.x/y`; arXiv papers go through their DataCite DOI."""
        text = identifier.strip()
        if re.fullmatch(r"(https?://openalex\.org/)?[Ww]\d+", text):
            return normalize_openalex_id(text)
        if doi := normalize_doi(text):
            return f"doi:{doi}"
        if arxiv := normalize_arxiv_id(text):
            return f"doi:10.48550/arxiv.{arxiv}"
        raise OpenAlexError(f"not a DOI, OpenAlex id or arXiv id: {identifier!r}")

    def iter_works(
        self, filter_expr: str, *, per_page: int = 100, limit: int | None = None
    ) -> Iterator[dict]:
        """Works matching a filter, following OpenAlex cursor paging until exhausted or `limit` reached."""
        cursor = "*"
        seen = 0
        while cursor:
            page = {"filter": filter_expr, "per-page": per_page, "cursor": cursor, "select": SELECT_FIELDS}
            body = self.http.get_json("/works", params={**page, **self._auth})
            if not isinstance(body, dict):
                raise OpenAlexError(f"unexpected OpenAlex body for /works: {type(body).__name__}")
            results = body.get("results")
            if not isinstance(results, list):
                raise OpenAlexError(f"OpenAlex page for filter {filter_expr!r} has no results list")
            for work in results:
                yield work
                seen += 1
                if limit is not None and seen >= limit:
                    return
            cursor = (body.get("meta") or {}).get("next_cursor")
            if not results:
                return

    def citing_works(
        self, openalex_id: str, *, since: str | None = None, limit: int | None = None
    ) -> Iterator[dict]:
        """Works that cite `openalex_id`, optionally created since a date (for the polling sensor)."""
        expr = f"cites:{normalize_openalex_id(openalex_id)}"
        if since:
            expr += f",from_created_date:{since}"
        return self.iter_works(expr, limit=limit)
