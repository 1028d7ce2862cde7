"""The search pipeline over candidate sets, never arrays the size of the corpus: parse -> retrieve (passage
vectors, passage and paper full text) -> fuse -> smooth over the corpus graph -> boost -> contexts (diversified, with
neighbours) -> optional rerank. The whole path is in search/README.md."""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lumina_assets.core import settings
from lumina_assets.core.ids import reading_key
from lumina_assets.core.names import last_name
from lumina_assets.core.schemas import Context
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.fusion import Run, fuse, ranked
from lumina_assets.search.index_cache import IndexCachePolicy, index_cache_policy
from lumina_assets.search.memory_store import empty_index_message, open_store
from lumina_assets.search.neighbour_graph import GraphCache
from lumina_assets.search.passage_picks import closest, with_neighbours
from lumina_assets.search.query_parser import (
    ParsedQuery,
    author_match,
    citation_only,
    library_labels,
    parse_query,
    without_paper_name,
)
from lumina_assets.search.stopwords import lancedb_english
from lumina_assets.search.stores import Filters, IndexModelMismatch, IndexNotBuilt, LanceStore
from lumina_assets.search.text import WORD, tokenize

log = logging.getLogger(__name__)


@dataclass
class SearchTrace:
    """What happened to one query (for debugging, the API's explanations and the ablation report)."""

    parsed: ParsedQuery | None = None
    filters: Filters | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)  # each retriever's paper-level candidates
    candidates: int = 0  # how many of each run fusion saw
    message: str = ""
    # the unit vector of `query_text`, so evidence scoring need not encode it again
    query_text: str = ""
    query_vector: np.ndarray | None = None

    @functools.cached_property
    def found_by(self) -> dict[str, list[str]]:
        """paper id -> the retrievers that put it among their candidates (computed for explanations only)."""
        found: dict[str, list[str]] = {}
        for name, run in self.runs.items():
            for paper_id, _, _ in run.top(self.candidates):
                found.setdefault(paper_id, []).append(name)
        return found


@dataclass
class Plan:
    """The fused, boosted candidates of one query, before contexts are built."""

    parsed: ParsedQuery
    vector: np.ndarray
    doc_scores: dict[str, float]
    passage_runs: dict[str, Run]  # the passage-level runs, fused per paper only for the papers shown


class SearchEngine:
    """`SearchEngine(db_uri, embedder, config).search(query, k) -> list[Context]`; `embedder` is anything with
    `encode(list[str]) -> ndarray`."""

    def __init__(
        self,
        db_uri: str | None = None,
        embedder=None,
        config: SearchConfig | None = None,
        *,
        storage_options=None,
        refresh_seconds: float = 5.0,
        reload_in_background: bool = False,
        background_loading: bool = True,
    ):
        self.db_uri = db_uri or settings.lancedb_uri()
        self.storage_options = storage_options
        if embedder is None:
            from lumina_assets.indexing.embedding import Embedder

            embedder = Embedder()
        self.embedder = embedder
        prepare = getattr(embedder, "prepare_query_encoder", None)
        if prepare is not None:  # load the query encoder while this thread imports and opens the indexes
            threading.Thread(target=prepare, name="lumina-query-encoder", daemon=True).start()
        self.config = config or SearchConfig()
        self._db = None
        self.cache_policy: IndexCachePolicy | None = None  # chosen when the database is opened
        self._store: LanceStore | None = None
        self._store_checked_at = 0.0
        self.refresh_seconds = refresh_seconds
        # a server keeps answering from the loaded small-corpus store while a new version loads
        self.reload_in_background = reload_in_background
        # False for a process that answers once and exits (`lumina search`): no loading thread outlives it
        self.background_loading = background_loading
        self.embedding_cache: dict[str, np.ndarray] | None = None  # text -> vector, filled by evaluations
        self._query_model = None  # model_identity.ModelIdentity of the embedder, computed on the first query
        self._unchecked_warned = False
        self.last_trace = SearchTrace()
        self.graphs, self.graph = GraphCache(), None  # the index's paper neighbours, when smoothing is on

    @property
    def db(self):
        if self._db is None:
            from pathlib import Path

            import lancedb

            if "://" not in self.db_uri and not Path(self.db_uri).exists():
                raise IndexNotBuilt(f"no LanceDB index at {self.db_uri}")
            self.cache_policy = index_cache_policy(self.db_uri)
            limit_mb = self.cache_policy.limit_mb if self.background_loading else None
            session = lancedb.Session(index_cache_size_bytes=limit_mb * 2**20) if limit_mb else None
            self._db = lancedb.connect(
                self.db_uri, storage_options=self.storage_options or None, session=session
            )
        return self._db

    def store(self) -> LanceStore:
        """The open indexes; re-checked for new table versions at most every `refresh_seconds`."""
        now = time.monotonic()
        if self._store is None or now - self._store_checked_at > self.refresh_seconds:
            cfg = self.config
            limit = {"memory": math.inf, "index": -1}.get(cfg.store, cfg.memory_max_passages)
            db = self.db
            self._store = open_store(
                self.db_uri,
                db,
                memory_max_passages=limit,
                nprobes=cfg.nprobes,
                probe_share=cfg.ann_probe_share,
                reload_in_background=self.reload_in_background,
                refine_factor=cfg.refine_factor,
                preload=self.background_loading
                and (self.cache_policy.preload if self.cache_policy else True),
                mirrors=self.background_loading,
            )
            self.graph = self.graphs.get(self.db) if self.config.smooths() else None
            self._store_checked_at = now
        return self._store

    def warm_up(self) -> None:
        """Open the indexes and run one query so that first-query latency is not model or index loading."""
        self.store()
        self.search("warm up query", k=1)

    def wait_until_warm(self, timeout: float | None = None) -> bool:
        """Block until what the store loads in the background is ready (for measurements); False on timeout."""
        return self.store().wait_until_warm(timeout)

    def search(
        self, query: str, k: int = 10, *, constrain: Callable[[ParsedQuery], ParsedQuery] | None = None
    ) -> list[Context]:
        """Top-k contexts for `query` ([] for an empty, unusable or filtered-out query); `constrain` adjusts the parsed
        query before filtering (structured filters applied as given)."""
        plan = self._plan(query, constrain)
        if plan is None:
            return []
        depth = max(k, self.config.rerank_depth) if self.config.rerank is not None else k
        order = [paper_id for paper_id, _ in ranked(plan.doc_scores, depth)]
        contexts = self._contexts(plan, order)
        self.store().after_query()
        if self.config.rerank is not None:
            contexts = self.config.rerank(plan.parsed.text or query, contexts)
        return contexts[:k]

    def rank_documents(self, query: str, k: int = 100) -> list[tuple[str, float]]:
        """(paper_id, score) for the top-k papers: document-level ranking for BEIR-style qrels."""
        plan = self._plan(query)
        if plan is None:
            return []
        order = ranked(plan.doc_scores, k)
        self.store().after_query()
        if self.config.rerank is None or not order:
            return order
        head = [paper_id for paper_id, _ in order[: self.config.rerank_depth]]
        reranked = [
            c.paper_id for c in self.config.rerank(plan.parsed.text or query, self._contexts(plan, head))
        ]
        seen = set(reranked)
        ids = reranked + [paper_id for paper_id, _ in order if paper_id not in seen]
        # scores that keep the order
        return [(paper_id, float(len(ids) - rank)) for rank, paper_id in enumerate(ids)]

    def _filters(self, parsed: ParsedQuery, store: LanceStore) -> Filters:
        """Explicit constraints (and natural-language years when year_mode="filter") as pushed-down filters."""
        cfg = self.config
        year_filter = parsed.has_year and (parsed.year_explicit or cfg.year_mode == "filter")
        paper_ids = None
        if parsed.explicit_authors:
            names = sorted({last_name(a) for a in parsed.explicit_authors} - {""})
            paper_ids = tuple(store.papers_by_author(names, cfg.author_filter_max_papers))
        elif citation_only(parsed):  # "Cohan et al. 2020" alone: the cited author's papers, if any
            names = sorted({last_name(a) for a in parsed.first_authors} - {""})
            paper_ids = tuple(store.papers_by_author(names, cfg.author_filter_max_papers)) or None
        if parsed.explicit_venues:  # `venue:ACL`: only that venue's papers
            venue_ids = store.papers_by_venue(parsed.explicit_venues, cfg.author_filter_max_papers)
            admitted = set(venue_ids)
            paper_ids = tuple(p for p in (venue_ids if paper_ids is None else paper_ids) if p in admitted)
        if labels := library_labels(parsed):  # `tag:to-read`, `collection:Thesis`: the library's papers
            admitted = set(store.papers_with_labels(labels, cfg.author_filter_max_papers))
            paper_ids = tuple(
                p for p in (sorted(admitted) if paper_ids is None else paper_ids) if p in admitted
            )
        return Filters(
            year_min=parsed.year_min if year_filter else None,
            year_max=parsed.year_max if year_filter else None,
            paper_ids=paper_ids,
        )

    def _check_model(self, store: LanceStore) -> None:
        """Refuse a query model other than the one that built the index; one recording no identity gets one warning."""
        from lumina_assets.indexing import model_identity

        index = getattr(store, "model_identity", None) or model_identity.ModelIdentity()
        if self._query_model is None:
            self._query_model = model_identity.query_identity(self.embedder, index)  # in the index's form
        problem = model_identity.mismatch(index, self._query_model)
        if problem:
            raise IndexModelMismatch(problem)
        if not (index.known and self._query_model.known) and not self._unchecked_warned:
            self._unchecked_warned = True
            missing = (
                "the index (built before model identities were recorded; rebuild passage_index to record it)"
            )
            log.warning(
                "cannot check that the query model matches the index: no model identity recorded by %s",
                missing if not index.known else "the query embedder",
            )

    def _embed(self, text: str) -> np.ndarray:
        vector = self.embedding_cache.get(text) if self.embedding_cache is not None else None
        if vector is None:
            encode = getattr(self.embedder, "encode_queries", self.embedder.encode)
            vector = encode([text])[0]
        vector = np.asarray(vector, dtype=np.float32)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)

    def _retrieve(self, store: LanceStore, text: str, embed: Callable[[], np.ndarray], filters: Filters):
        """(paper runs, passage runs, query vector) from every enabled retriever; the full-text searches start
        before the query is embedded, so the two overlap."""
        cfg = self.config
        depth = cfg.fulltext_candidates or cfg.candidates
        futures = store.start_text_runs(
            text, depth if cfg.passage_fulltext else 0, depth if cfg.paper_fulltext else 0, filters
        )
        vector = embed()
        passage_runs = {}
        if cfg.passage_vectors:  # searched here while the full-text runs go on in the background
            passage_runs["passage_vectors"] = store.passage_vector_run(vector, cfg.candidates, filters)
        if "passage_fulltext" in futures:
            passage_runs["passage_fulltext"] = futures["passage_fulltext"].result()
        runs = {name: run.by_paper() for name, run in passage_runs.items()}
        runs.update({name: future.result() for name, future in futures.items() if name not in passage_runs})
        return runs, passage_runs, vector

    def _fuse(
        self, runs: dict[str, Run], candidates: int, papers: set[str] | None = None
    ) -> dict[str, float]:
        cfg = self.config
        return fuse(
            runs, cfg.weights, method=cfg.fusion, candidates=candidates, rrf_k=cfg.rrf_k, papers=papers
        )

    def _candidate_passages(self, plan: Plan, papers: Sequence[str]):
        """(paper id -> its candidate passages, best first; passage id -> fused score), for the papers shown only."""
        scores = self._fuse(plan.passage_runs, 10 * self.config.candidates, set(papers))
        paper_of = {hit: paper for run in plan.passage_runs.values() for hit, _, paper in run.hits}
        by_paper: dict[str, list[str]] = {}
        for passage_id, _ in ranked(scores):
            by_paper.setdefault(paper_of[passage_id], []).append(passage_id)
        return by_paper, scores

    def _plan(self, query: str, constrain=None) -> Plan | None:
        cfg = self.config
        trace = SearchTrace()
        self.last_trace = trace
        started = time.perf_counter()
        if not isinstance(query, str) or not query.strip():
            trace.message = "empty query"
            return None
        query = re.sub(r"\s+", " ", query).strip()[: cfg.max_query_chars]
        store = self.store()
        if store.empty():
            trace.message = empty_index_message()
            return None
        self._check_model(store)

        parsed = (
            parse_query(query, known_authors=store.has_author)
            if cfg.parse_query
            else ParsedQuery(query, query)
        )
        if constrain is not None:
            parsed = constrain(parsed)
        trace.parsed = parsed
        text = parsed.text or query
        if not tokenize(text):
            trace.message = "the query has only stopwords or punctuation"
            return None
        filters = self._filters(parsed, store)
        trace.filters = filters
        if filters.paper_ids == ():
            trace.message = f"no paper {parsed.filters_in_words()} in the index"
            return None

        def embed() -> np.ndarray:
            t0 = time.perf_counter()
            vector = self._embed(text)
            trace.timings_ms["embed"] = (time.perf_counter() - t0) * 1000
            trace.query_text, trace.query_vector = text, vector
            if store.dimension != vector.shape[0]:
                raise IndexModelMismatch(
                    f"the index holds {store.dimension}-d vectors but the query model gives {vector.shape[0]}-d "
                    "ones: search with the model that built the index (LUMINA_EMBEDDING_MODEL) or rebuild the index"
                )
            return vector

        t0 = time.perf_counter()
        runs, passage_runs, vector = self._retrieve(store, text, embed, filters)
        doc_scores = self._fuse(runs, cfg.candidates)
        if self.graph is not None and cfg.smooths():
            doc_scores = self.graph.smooth(doc_scores, cfg.neighbour_smoothing, cfg.smoothing_neighbours)
        trace.timings_ms["retrieve"] = (time.perf_counter() - t0) * 1000
        trace.runs, trace.candidates = runs, cfg.candidates

        if citation_only(parsed) and filters.paper_ids:  # "Cohan et al. 2020" alone: the author's papers,
            doc_scores = dict.fromkeys(filters.paper_ids, 1.0)  # ordered by the cues only
        doc_scores = self._boost(store, parsed, doc_scores)
        trace.timings_ms["total"] = (time.perf_counter() - started) * 1000
        doc_scores = {paper_id: score for paper_id, score in doc_scores.items() if score > 0}
        if not doc_scores:
            trace.message = "no matching papers"
            return None
        return Plan(parsed, vector, doc_scores, passage_runs)

    def _boost(self, store: LanceStore, parsed: ParsedQuery, scores: dict[str, float]) -> dict[str, float]:
        """Author, year and recency boosts on the fused candidates (metadata fetched for them only)."""
        cfg = self.config
        year_boost = parsed.has_year and cfg.year_mode == "boost" and not parsed.year_explicit
        wants_authors = bool(parsed.authors) and cfg.author_boost > 0
        if not scores or not (year_boost or wants_authors or cfg.recency_weight > 0):
            return scores
        meta = store.papers(list(scores))
        boosted = dict(scores)
        years = [m["year"] for m in meta.values() if m.get("year")]
        oldest, newest = (min(years), max(years)) if years else (0, 0)
        for paper_id, score in scores.items():
            if score <= 0:
                continue
            paper = meta.get(paper_id, {})
            year = paper.get("year")
            factor = 1.0
            if wants_authors:  # "X et al." prefers papers with X as first author (query_parser.author_match)
                factor *= 1.0 + cfg.author_boost * author_match(parsed, paper.get("authors"))
            if year_boost and year and parsed.in_years(year):
                factor *= 1.0 + cfg.year_boost
            if cfg.recency_weight > 0 and year:
                factor *= 1.0 + cfg.recency_weight * (year - oldest) / max(newest - oldest, 1)
            boosted[paper_id] = score * factor
        return boosted

    def _choose_without_names(self, plan: Plan, by_paper, paper_passages, passage_scores) -> None:
        """A query word naming a paper ("SPECTER" for "SPECTER: …") is in every passage's header, so it says nothing
        about which passage answers: such a paper's passages are chosen by the query without that word (stop words
        dropped first: LanceDB drops them only after stemming). Paper ranking is not touched."""
        text, groups, stop = plan.parsed.text or "", {}, lancedb_english()
        for paper_id, members in by_paper.items():
            rest = without_paper_name(text, members[0].get("title"))
            if rest != text and tokenize(rest):
                groups.setdefault(rest, []).append(paper_id)
        for rest, papers in groups.items():
            words = " ".join(w for w in WORD.findall(rest) if w.lower() not in stop)
            filters = Filters(paper_ids=tuple(sorted(papers)))
            _, runs, vector = self._retrieve(self.store(), words, lambda r=rest: self._embed(r), filters)
            found, scores = self._candidate_passages(Plan(plan.parsed, vector, {}, runs), papers)
            paper_passages.update(found)
            passage_scores.update(scores)

    def _contexts(self, plan: Plan, order: list[str]) -> list[Context]:
        """Contexts for the ordered papers: their best candidate passages (else the passage closest to the query
        vector), plus neighbours of short hits, from one fetch of their passages."""
        cfg = self.config
        by_paper = self.store().paper_passage_rows(order)
        rows = {row["passage_id"]: row for members in by_paper.values() for row in members}
        paper_passages, passage_scores = self._candidate_passages(plan, order)
        if cfg.passages_without_paper_name:
            self._choose_without_names(plan, by_paper, paper_passages, passage_scores)
        chosen: dict[str, list[str]] = {}
        for paper_id in order:
            hits = [p for p in paper_passages.get(paper_id, []) if p in rows]
            if hits:
                picks = [hits[0]] + [p for p in hits[1 : cfg.max_passages_per_paper] if passage_scores[p] > 0]
            else:
                picks = [closest(by_paper.get(paper_id, []), plan.vector)] if by_paper.get(paper_id) else []
            if picks:
                chosen[paper_id] = picks
        if cfg.expand_neighbours and cfg.neighbour_window > 0:
            chosen = {paper_id: with_neighbours(picks, rows, cfg) for paper_id, picks in chosen.items()}
        contexts = []
        for paper_id in order:
            picks = [p for p in chosen.get(paper_id, []) if p in rows]
            if not picks:
                continue
            ranked = list(picks)  # best hit first, each hit followed by its neighbours
            picks.sort(key=reading_key)
            first = rows[picks[0]]
            contexts.append(
                Context(
                    title=first.get("title") or "",
                    chunks=[rows[p]["text"] or "" for p in picks],
                    doi=first.get("doi"),
                    url=first.get("url"),
                    paper_id=paper_id,
                    score=float(plan.doc_scores[paper_id]),
                    passage_ids=picks,
                    ranked_passage_ids=ranked,
                )
            )
        return contexts
