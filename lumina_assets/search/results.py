"""Search results for researchers: `SearchService.search(SearchRequest)` runs an engine from a small pool and returns
the API's JSON-ready answer (shaped by `answer.py`; the path is in search/README.md)."""

from __future__ import annotations

import logging
import queue
import re
import time
from contextlib import contextmanager
from pathlib import Path

from lumina_assets.core.schemas import CITATION_COLUMNS
from lumina_assets.search.answer import (
    Details,
    Ranking,
    assemble_answer,
    page_of,
    result_view,
)
from lumina_assets.search.evidence import EvidenceScorer
from lumina_assets.search.explain import short_title
from lumina_assets.search.overview import Reference, build_overview
from lumina_assets.search.paper_files import PaperFiles
from lumina_assets.search.relevance import line_for, relevance_scores
from lumina_assets.search.request import SearchRequest

log = logging.getLogger(__name__)

WIDEN_FROM = 5  # widening follows the citations of this many top results
WIDEN_MAX = 30  # at most this many linked papers join the candidates
WIDEN_BONUS = 0.25  # a widened paper gains this share of the score of each top result it links to
DENSE_RESULTS = 10  # results whose sentences get dense (model) scores; further ones are scored lexically
DATE_SORT_POOL = 200  # sort=date orders this many most relevant papers by year (the deepest one may page)
MATCH_POOL = 50  # papers ranked per search so that the count above the relevance line is not just one page's
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class EnginePool:
    """A few SearchEngines sharing one embedder and store: a request holds one, so its `last_trace` is its own."""

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


def stored_sentences(engine):
    """The index's stored sentence vectors for the engine's model; None without them."""
    from lumina_assets.indexing.lancedb_tables import PASSAGES_TABLE, embedder_identity
    from lumina_assets.indexing.model_identity import follow_table
    from lumina_assets.indexing.sentence_vectors import SentenceVectors
    from lumina_assets.indexing.table_ops import open_table

    try:
        follow_table(engine.embedder, open_table(engine.db, PASSAGES_TABLE))  # the model that stored them
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
        self.db_uri = getattr(first, "db_uri", None)  # which index this service answers from
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
        from lumina_assets.search.stores import rows_by_id

        columns = [
            c
            for c in ("paper_id", "title", "doi", "url", "year", "authors", "venue", "tags", "collections")
            + CITATION_COLUMNS
            if c in store.paper_columns
        ]
        return rows_by_id(store.papers_table, "paper_id", paper_ids, columns)

    def search(self, request: SearchRequest, *, use_llm: bool = True) -> dict:
        """The answer to one request; `use_llm=False` keeps the overview extractive (the API's GETs)."""
        started = time.perf_counter()
        ranking = self._rank(request)
        page = page_of(ranking, request)
        search_ms = (time.perf_counter() - started) * 1000
        details = self._details(ranking.store, page.contexts)
        t0 = time.perf_counter()
        highlight_query, highlights = self._highlight(request, ranking.trace, page.contexts)
        highlight_ms = (time.perf_counter() - t0) * 1000
        references: list[Reference] = []
        results = [
            result_view(rank, context, per_passage, ranking, page, details, references)
            for rank, (context, per_passage) in enumerate(
                zip(page.contexts, highlights, strict=True), start=(request.page - 1) * request.k + 1
            )
        ]
        overview = None
        if request.overview and references:
            top_papers = {r["paper_id"] for r in results[:5] if r["matching"]}
            overview = build_overview(
                highlight_query,
                [r for r in references if r.paper_id in top_papers],
                self.llm_client if use_llm else None,
            ).to_dict()
        shown = {c.paper_id for c in page.ranked}
        related = self._related(ranking.store, ranking.via, shown) if ranking.via else []
        timings = {"search": search_ms, "highlight": highlight_ms}
        return assemble_answer(request, ranking, page, related, results, overview, timings, started)

    def _rank(self, request: SearchRequest) -> Ranking:
        """The engine's ranking for `request`, deep enough for the page asked for, widened and sorted as asked."""
        depth = request.k * request.page
        via: dict[str, list[str]] = {}
        bonus: dict[str, float] = {}
        pool = max(DATE_SORT_POOL, depth + 1) if request.sort == "date" else depth + 1
        if not request.widen:  # (widening ranks its own pool: the papers shown and the ones they link to)
            pool = max(pool, MATCH_POOL)
        with self.pool.engine() as engine:
            contexts = engine.search(request.query, k=pool, constrain=request.constrain)
            if request.widen and contexts:
                contexts, via, bonus = self._widen(engine, request, contexts, pool)
            trace = engine.last_trace
            store = engine.store()
            config, explain = engine.config, engine.config.explain()
            line = line_for(engine.embedder)
            relevance = relevance_scores(engine, contexts)
            if request.sort == "date":
                contexts = self._newest_first(store, contexts)
        return Ranking(contexts, pool, trace, store, config, explain, line, relevance, via, bonus)

    def _details(self, store, contexts: list) -> Details:
        """What the page's results show beyond the engine's contexts."""
        passage_ids = [p for c in contexts for p in c.passage_ids]
        paper_ids = [c.paper_id for c in contexts]
        return Details(
            rows=store.passages(passage_ids),
            pages=self.files.page_spans(passage_ids) if passage_ids else {},
            papers=self._papers(store, paper_ids),
            pdfs=self.files.pdf_hashes(paper_ids),
            cited_by=self.files.cited_by_counts(paper_ids),
        )

    def _highlight(self, request: SearchRequest, trace, contexts: list) -> tuple[str, list]:
        """(the text highlighted against, per result and passage its evidence sentences)."""
        parsed = trace.parsed
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
        return highlight_query, highlights

    def _newest_first(self, store, contexts: list) -> list:
        """`contexts` by year, newest first (papers without a year last), relevance order within a year."""
        years = {p: r.get("year") for p, r in self._papers(store, [c.paper_id for c in contexts]).items()}
        return sorted(contexts, key=lambda c: -(years.get(c.paper_id) or 0))

    def _links(self, top) -> dict[str, list[tuple[str, str]]]:
        """{paper_id: [(top paper_id, "cited by" | "cites")]}: the in-corpus citation links of the `top` contexts."""
        links: dict[str, list[tuple[str, str]]] = {}
        for context in top:
            edges = self.files.citations(context.paper_id)
            for other in edges["cites"]:
                links.setdefault(other, []).append((context.paper_id, "cited by"))
            for other in edges["cited_by"]:
                links.setdefault(other, []).append((context.paper_id, "cites"))
        return {p: found for p, found in links.items() if any(t != p for t, _ in found)}

    def _widen(self, engine, request: SearchRequest, contexts: list, depth: int):
        """(contexts, via, bonus): papers the top results cite or are cited by join the candidates, all are scored by
        one restricted search, and each gains `WIDEN_BONUS` × the score of every top result it is linked to."""
        from dataclasses import replace

        top = contexts[:WIDEN_FROM]
        titles = {c.paper_id: short_title(c.title or c.paper_id) for c in top}
        links = self._links(top)
        returned = {c.paper_id for c in contexts}
        new = sorted((p for p in links if p not in returned), key=lambda p: (-len(links[p]), p))[:WIDEN_MAX]
        if not links:
            return contexts, {}, {}
        pool = [c.paper_id for c in contexts] + new
        with _only_papers(engine, pool):
            rescored = engine.search(request.query, k=len(pool), constrain=request.constrain)
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

    def paper(self, paper_id: str) -> dict | None:
        """One indexed paper's metadata, shaped as a search result without passages; None when not indexed."""
        found = self._papers(self.store(), [paper_id]).get(paper_id)
        if found is None:
            return None
        return {
            "paper_id": paper_id,
            "title": found.get("title"),
            "authors": list(found.get("authors") or []),
            **{key: found.get(key) for key in ("year", "venue", "doi", "url", *CITATION_COLUMNS)},
            "cited_by_count": self.files.cited_by_counts([paper_id]).get(paper_id, 0),
            "passages": [],
        }

    def citations(self, paper_id: str) -> dict | None:
        """What `paper_id` cites and what cites it within the corpus; None when no indexed paper has that id."""
        store = self.store()
        if not self._papers(store, [paper_id]):
            return None
        links = self.files.citations(paper_id)
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


@contextmanager
def _only_papers(engine, paper_ids: list[str]):
    """While held, `engine` admits only these papers as candidates (within the query's own filters)."""
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
