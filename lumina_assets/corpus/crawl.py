"""Seeds and the breadth-first reference crawl. Plain Python: the corpus assets call it, tests call it directly."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lumina_assets.core.http import HttpError
from lumina_assets.core.ids import normalize_arxiv_id, normalize_doi, normalize_openalex_id
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.arxiv import ArxivClient, ArxivError
from lumina_assets.corpus.openalex import OpenAlexClient, OpenAlexError, work_to_paper

log = logging.getLogger(__name__)
# What a well-formed JSON answer of the wrong shape raises in the record mappers (a list where a dict was due):
# that record's failure, never the crawl's.
MALFORMED_RECORD = (OpenAlexError, ArxivError, TypeError, ValueError, AttributeError, KeyError)


@dataclass
class ArxivQuery:
    query: str
    max_results: int = 25


@dataclass
class Seeds:
    dois: list[str] = field(default_factory=list)
    arxiv_ids: list[str] = field(default_factory=list)
    openalex_ids: list[str] = field(default_factory=list)
    arxiv_queries: list[ArxivQuery] = field(default_factory=list)
    depth: int = 1
    max_papers: int = 150
    references_per_paper: int = 25
    languages: list[str] = field(default_factory=lambda: ["en"])
    require_abstract: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def identifiers(self) -> list[str]:
        return [*self.dois, *self.arxiv_ids, *self.openalex_ids]

    def is_empty(self) -> bool:
        return not self.identifiers and not self.arxiv_queries


def load_seeds(path: Path) -> Seeds:
    """Read seeds.yaml; malformed entries are reported in `problems` and skipped, never fatal. Identifier lists
    are read as the strings written (YAML's BaseLoader), so no id turns into a number on the way."""
    seeds = Seeds()
    if not path.exists():
        seeds.problems.append(f"seed file {path} does not exist")
        return seeds
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        raw = yaml.safe_load(text)
        # Ids as written, whatever YAML would make of them: `2501.10120` unquoted is the float 2501.1012.
        verbatim = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        seeds.problems.append(f"seed file {path} is not valid YAML: {exc}")
        return seeds
    if not raw:
        seeds.problems.append(f"seed file {path} is empty")
        return seeds
    if not isinstance(raw, dict):
        seeds.problems.append(f"seed file {path} must be a mapping, got {type(raw).__name__}")
        return seeds
    for name in ("dois", "arxiv_ids", "openalex_ids"):
        listed = verbatim.get(name) if isinstance(verbatim, dict) else None
        raw[name] = [v if isinstance(v, str) else str(v) for v in listed] if isinstance(listed, list) else []
    for value in raw.get("dois") or []:
        (
            seeds.dois.append(d)
            if (d := normalize_doi(str(value)))
            else seeds.problems.append(f"not a DOI: {value!r}")
        )
    for value in raw.get("arxiv_ids") or []:
        (
            seeds.arxiv_ids.append(a)
            if (a := normalize_arxiv_id(str(value)))
            else seeds.problems.append(f"not an arXiv id: {value!r}")
        )
    for value in raw.get("openalex_ids") or []:
        (
            seeds.openalex_ids.append(w)
            if (w := normalize_openalex_id(str(value)))
            else seeds.problems.append(f"not an OpenAlex id: {value!r}")
        )
    for entry in raw.get("arxiv_queries") or []:
        if isinstance(entry, str):
            seeds.arxiv_queries.append(ArxivQuery(entry))
        elif isinstance(entry, dict) and entry.get("query"):
            seeds.arxiv_queries.append(ArxivQuery(str(entry["query"]), int(entry.get("max_results", 25))))
        else:
            seeds.problems.append(f"arXiv query entry without a query: {entry!r}")
    crawl = raw.get("crawl") or {}
    seeds.depth = int(crawl.get("depth", seeds.depth))
    seeds.max_papers = int(crawl.get("max_papers", seeds.max_papers))
    seeds.references_per_paper = int(crawl.get("references_per_paper", seeds.references_per_paper))
    filters = raw.get("filters") or {}
    seeds.languages = list(filters.get("languages", seeds.languages) or [])
    seeds.require_abstract = bool(filters.get("require_abstract", seeds.require_abstract))
    if seeds.is_empty():
        seeds.problems.append(f"seed file {path} lists no DOIs, arXiv ids, OpenAlex ids or arXiv queries")
    return seeds


@dataclass
class CrawlResult:
    papers: list[Paper] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    requests_skipped: int = 0

    def add_failure(self, message: str) -> None:
        log.warning(message)
        self.failures.append(message)


def crawl_openalex(client: OpenAlexClient, seeds: Seeds) -> CrawlResult:
    """Seeds, then their references breadth-first up to `depth` hops, never more than `max_papers` works.

    A seed that OpenAlex does not know, or a page that fails, is recorded and the crawl goes on.
    """
    result = CrawlResult()
    seen: set[str] = set()
    frontier: deque[tuple[Paper, int]] = deque()

    def keep(paper: Paper, depth: int) -> bool:
        if paper.openalex_id in seen or len(result.papers) >= seeds.max_papers:
            return False
        seen.add(paper.openalex_id)
        paper.crawl_depth = depth
        result.papers.append(paper)
        frontier.append((paper, depth))
        return True

    for identifier in seeds.identifiers:
        try:
            work = client.work(identifier)
        except (HttpError, *MALFORMED_RECORD) as exc:
            result.add_failure(f"seed {identifier}: {exc}")
            continue
        if work is None:
            result.add_failure(f"seed {identifier}: resolves to nothing in OpenAlex (404)")
            continue
        try:
            keep(work_to_paper(work, crawl_depth=0), 0)
        except MALFORMED_RECORD as exc:
            result.add_failure(
                f"seed {identifier}: malformed record ({type(exc).__name__}: {str(exc)[:120]})"
            )

    while frontier and len(result.papers) < seeds.max_papers:
        paper, depth = frontier.popleft()
        if depth >= seeds.depth:
            continue
        wanted = [r.split(":", 1)[1] for r in paper.references if r.split(":", 1)[1] not in seen]
        wanted = wanted[: seeds.references_per_paper]
        for offset in range(0, len(wanted), 50):
            batch = wanted[offset : offset + 50]
            try:
                for work in client.iter_works(f"openalex_id:{'|'.join(batch)}", per_page=50):
                    try:
                        keep(work_to_paper(work), depth + 1)
                    except MALFORMED_RECORD as exc:
                        result.add_failure(
                            f"reference of {paper.paper_id}: {type(exc).__name__}: {str(exc)[:120]}"
                        )
            except (HttpError, *MALFORMED_RECORD) as exc:
                result.add_failure(f"references of {paper.paper_id} ({len(batch)} works): {exc}")
    return result


def crawl_arxiv(client: ArxivClient, seeds: Seeds) -> CrawlResult:
    """The arXiv ids in the seeds plus every seeded arXiv query."""
    result = CrawlResult()
    by_id: dict[str, Paper] = {}
    if seeds.arxiv_ids:
        try:
            page = client.by_ids(seeds.arxiv_ids)
            for problem in page.errors:
                result.add_failure(problem)
            for paper in page.papers:
                by_id[paper.arxiv_id] = paper
            for missing in set(seeds.arxiv_ids) - set(by_id):
                result.add_failure(f"seed arXiv:{missing}: resolves to nothing in arXiv")
        except (HttpError, *MALFORMED_RECORD) as exc:
            result.add_failure(f"arXiv ids {seeds.arxiv_ids}: {exc}")
    for query in seeds.arxiv_queries:
        try:
            for paper in client.iter_search(query.query, max_results=query.max_results):
                by_id.setdefault(paper.arxiv_id, paper)
        except (HttpError, *MALFORMED_RECORD) as exc:
            result.add_failure(f"arXiv query {query.query!r}: {exc}")
    result.papers = list(by_id.values())[: seeds.max_papers]
    return result


def papers_to_rows(papers: list[Paper]) -> list[dict[str, Any]]:
    return [p.to_row() for p in papers]
