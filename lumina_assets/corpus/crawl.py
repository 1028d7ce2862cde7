"""The breadth-first reference crawl from the seeds (read by `corpus.seeds`). Plain Python: the corpus assets call
it, tests call it directly."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from lumina_assets.core.http import HttpError
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.arxiv import ArxivClient, ArxivError
from lumina_assets.corpus.openalex import OpenAlexClient, OpenAlexError, work_to_paper
from lumina_assets.corpus.seeds import ArxivQuery, Seeds, load_seeds

__all__ = ["ArxivQuery", "CrawlResult", "Seeds", "crawl_arxiv", "crawl_openalex", "load_seeds"]

log = logging.getLogger(__name__)
# What a well-formed JSON answer of the wrong shape raises in the record mappers (a list where a dict was due):
# that record's failure, never the crawl's.
MALFORMED_RECORD = (OpenAlexError, ArxivError, TypeError, ValueError, AttributeError, KeyError)


@dataclass
class CrawlResult:
    papers: list[Paper] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    requests_skipped: int = 0

    def add_failure(self, message: str) -> None:
        log.warning(message)
        self.failures.append(message)


def crawl_openalex(client: OpenAlexClient, seeds: Seeds) -> CrawlResult:
    """Seeds, then their references breadth-first up to `depth` hops, never more than `max_papers` works; a seed
    that OpenAlex does not know, or a page that fails, is recorded and the crawl goes on."""
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

    identifiers = seeds.identifiers
    for asked, identifier in enumerate(identifiers):
        if len(result.papers) >= seeds.max_papers:  # the cap holds for the seeds too: no request past it
            result.requests_skipped += len(identifiers) - asked
            log.info(
                "max_papers (%d) reached: %d seeds not asked", seeds.max_papers, len(identifiers) - asked
            )
            break
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
    wanted = seeds.arxiv_ids[: seeds.max_papers]  # one paper per id at most: more could never be kept
    result.requests_skipped += len(seeds.arxiv_ids) - len(wanted)
    if wanted:
        try:
            page = client.by_ids(wanted)
            for problem in page.errors:
                result.add_failure(problem)
            for paper in page.papers:
                by_id[paper.arxiv_id] = paper
            for missing in set(wanted) - set(by_id):
                result.add_failure(f"seed arXiv:{missing}: resolves to nothing in arXiv")
        except (HttpError, *MALFORMED_RECORD) as exc:
            result.add_failure(f"arXiv ids {wanted[:5]}{'...' if len(wanted) > 5 else ''}: {exc}")
    for query in seeds.arxiv_queries:
        if len(by_id) >= seeds.max_papers:
            break
        try:
            for paper in client.iter_search(query.query, max_results=query.max_results):
                by_id.setdefault(paper.arxiv_id, paper)
        except (HttpError, *MALFORMED_RECORD) as exc:
            result.add_failure(f"arXiv query {query.query!r}: {exc}")
    result.papers = list(by_id.values())[: seeds.max_papers]
    return result
