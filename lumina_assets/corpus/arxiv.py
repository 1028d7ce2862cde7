"""arXiv API (Atom feed): `search_query` and `id_list` with paging, parsed into `Paper` records.
arXiv asks for one request every 3 seconds; the HttpClient's per-host limit enforces it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass

from lumina_assets.core.http import HttpClient
from lumina_assets.core.ids import normalize_arxiv_class, normalize_arxiv_id, normalize_doi, paper_id_for
from lumina_assets.core.schemas import Paper

MIN_INTERVAL_SECONDS = 3.0  # arXiv asks for one request every 3 seconds
NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}


class ArxivError(RuntimeError):
    """A feed that could not be parsed; the message names the query."""


@dataclass
class ArxivPage:
    papers: list[Paper]
    total_results: int
    errors: list[str]


def _text(node: ET.Element | None) -> str:
    return re.sub(r"\s+", " ", node.text or "").strip() if node is not None else ""


def entry_to_paper(entry: ET.Element) -> Paper:
    raw_id = _text(entry.find("atom:id", NS))
    arxiv_id = normalize_arxiv_id(raw_id)
    if not arxiv_id:
        raise ArxivError(f"arXiv entry without a usable id ({raw_id!r})")
    doi = normalize_doi(_text(entry.find("arxiv:doi", NS)))
    published = _text(entry.find("atom:published", NS))
    pdf_urls = [
        link.get("href", "")
        for link in entry.findall("atom:link", NS)
        if link.get("title") == "pdf" or link.get("type") == "application/pdf"
    ]
    categories = [c.get("term", "") for c in entry.findall("atom:category", NS) if c.get("term")]
    primary = entry.find("arxiv:primary_category", NS)  # "cs.IR": BibTeX's primaryClass
    primary_class = normalize_arxiv_class(primary.get("term")) if primary is not None else None
    return Paper(
        paper_id=paper_id_for(doi=doi, arxiv_id=arxiv_id),
        title=_text(entry.find("atom:title", NS)),
        doi=doi,
        arxiv_id=arxiv_id,
        authors=[_text(a.find("atom:name", NS)) for a in entry.findall("atom:author", NS)],
        year=int(published[:4]) if published[:4].isdigit() else None,
        publication_date=published[:10] or None,
        venue=_text(entry.find("arxiv:journal_ref", NS)) or "arXiv",
        keywords=categories,
        abstract=_text(entry.find("atom:summary", NS)) or None,
        pdf_urls=[u.replace("http://", "https://", 1) for u in pdf_urls if u],
        language="en",
        arxiv_primary_class=primary_class,
        source="arxiv",
        source_id=arxiv_id,
    )


def parse_feed(xml_text: str, *, what: str = "arXiv query") -> ArxivPage:
    """Parse one Atom page; a bad entry is reported in `errors` and the others are kept."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ArxivError(f"malformed Atom feed for {what}: {exc}") from exc
    if root.tag != f"{{{NS['atom']}}}feed":
        raise ArxivError(f"not an Atom feed for {what} (root element {root.tag!r})")
    papers, errors = [], []
    for entry in root.findall("atom:entry", NS):
        title = _text(entry.find("atom:title", NS))
        if title == "Error":  # arXiv reports bad queries as a single entry titled Error
            errors.append(f"arXiv error for {what}: {_text(entry.find('atom:summary', NS))}")
            continue
        try:
            papers.append(entry_to_paper(entry))
        except ArxivError as exc:
            errors.append(str(exc))
    total = _text(root.find("opensearch:totalResults", NS))
    return ArxivPage(papers, int(total) if total.isdigit() else len(papers), errors)


class ArxivClient:
    def __init__(self, http: HttpClient):
        self.http = http

    def query(
        self,
        *,
        search_query: str | None = None,
        id_list: list[str] | None = None,
        start: int = 0,
        max_results: int = 50,
        sort_by: str | None = None,
        sort_order: str | None = None,
    ) -> ArxivPage:
        params = {
            "search_query": search_query or None,
            "id_list": ",".join(id_list) if id_list else None,
            "start": start,
            "max_results": max_results,
            "sortBy": sort_by,
            "sortOrder": sort_order,
        }
        what = f"search_query={search_query!r}" if search_query else f"id_list={id_list!r}"
        response = self.http.get("/query", params=params)
        try:
            return parse_feed(response.text, what=what)
        except ArxivError:
            self.http.evict(response)  # else every rerun fails on the cached bytes without asking again
            raise

    def iter_search(
        self, search_query: str, *, max_results: int = 100, page_size: int = 50, **sort: str
    ) -> Iterator[Paper]:
        """All results of a query up to `max_results`, page by page."""
        start = 0
        while start < max_results:
            page = self.query(
                search_query=search_query,
                start=start,
                max_results=min(page_size, max_results - start),
                **sort,
            )
            yield from page.papers
            if not page.papers or start + len(page.papers) >= page.total_results:
                return
            start += len(page.papers)

    def by_ids(self, arxiv_ids: list[str]) -> ArxivPage:
        """Papers for a list of ids (50 a request), errors collected rather than raised."""
        papers, errors = [], []
        ids = [i for i in (normalize_arxiv_id(x) for x in arxiv_ids) if i]
        for offset in range(0, len(ids), 50):
            chunk = ids[offset : offset + 50]
            page = self.query(id_list=chunk, max_results=len(chunk))
            papers += page.papers
            errors += page.errors
        return ArxivPage(papers, len(papers), errors)
