"""The Lumina search pipeline: query -> parse -> expand -> retrieve (passage vectors, passage full text, paper
title / abstract vectors, paper full text) -> fuse -> pseudo-relevance feedback -> boost / filter -> diversify ->
neighbour expansion -> optional rerank -> ranked `Context`s with pinpointed passages.

Every stage is a switch in `SearchConfig`, so the benchmark and `lumina eval beir` can measure each one's share.
Retrieval runs on an in-memory view of the LanceDB tables (vectors as one float32 matrix, a BM25 index over the
same texts LanceDB's full-text index holds), rebuilt whenever a table version changes; `backend="lancedb"` asks
LanceDB's own vector and full-text search instead (the path for tables too large for memory).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from lumina_assets.core.schemas import Context
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.fusion import fuse, top_indices
from lumina_assets.search.query_parser import ParsedQuery, last_name, parse_query
from lumina_assets.search.text import WORD, tokenize
from lumina_assets.search.view import CorpusView, IndexModelMismatch, IndexNotBuilt, corpus_view

log = logging.getLogger(__name__)


@dataclass
class SearchTrace:
    """What happened to one query (for debugging and the ablation report)."""

    parsed: ParsedQuery | None = None
    expansions: dict[str, float] = field(default_factory=dict)
    feedback_terms: dict[str, float] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    message: str = ""


class SearchEngine:
    """`SearchEngine(db_uri, embedder, config).search(query, k) -> list[Context]`.

    `db_uri` is a LanceDB URI (local path or s3://...); `embedder` anything with `encode(list[str]) -> ndarray`
    (lumina_assets.indexing.embedding.Embedder); `config` a SearchConfig (defaults when None).
    """

    def __init__(
        self,
        db_uri: str | None = None,
        embedder=None,
        config: SearchConfig | None = None,
        *,
        storage_options=None,
        refresh_seconds: float = 5.0,
    ):
        from lumina_assets.core import settings

        self.db_uri = db_uri or settings.lancedb_uri()
        self.storage_options = storage_options
        if embedder is None:
            from lumina_assets.indexing.embedding import Embedder

            embedder = Embedder()
        self.embedder = embedder
        self.config = config or SearchConfig()
        self._db = None
        self._view: CorpusView | None = None
        self._view_checked_at = 0.0
        self.refresh_seconds = refresh_seconds
        self.embedding_cache: dict[str, np.ndarray] | None = None  # text -> vector, filled by evaluations
        self.last_trace = SearchTrace()

    # -- plumbing

    @property
    def db(self):
        if self._db is None:
            from pathlib import Path

            import lancedb

            if "://" not in self.db_uri and not Path(self.db_uri).exists():
                raise IndexNotBuilt(f"no LanceDB index at {self.db_uri}")
            self._db = lancedb.connect(self.db_uri, storage_options=self.storage_options or None)
        return self._db

    def view(self) -> CorpusView:
        """The in-memory view; the table versions are re-checked at most every `refresh_seconds`."""
        now = time.monotonic()
        if self._view is None or now - self._view_checked_at > self.refresh_seconds:
            self._view = corpus_view(self.db_uri, self.db, k1=self.config.bm25_k1, b=self.config.bm25_b)
            self._view_checked_at = now
        return self._view

    def warm_up(self) -> None:
        """Load the view and run one query so that first-query latency is not model / cache loading."""
        self.view()
        self.embedder.encode_query("warm up")

    # -- public API

    def search(self, query: str, k: int = 10) -> list[Context]:
        """Top-k contexts for `query`. Empty, unusable or filtered-out queries give []; never raises on input."""
        plan = self._plan(query)
        if plan is None:
            return []
        view, parsed, doc_scores, passage_scores = plan
        reranking = self.config.rerank is not None
        order = top_indices(doc_scores, max(k, self.config.rerank_depth) if reranking else k)
        contexts = self._contexts(view, order, doc_scores, passage_scores)
        if reranking:
            contexts = self.config.rerank(parsed.text or query, contexts)
        return contexts[:k]

    def rank_documents(self, query: str, k: int = 100) -> list[tuple[str, float]]:
        """(paper_id, score) for the top-k papers: document-level ranking for BEIR-style qrels."""
        plan = self._plan(query)
        if plan is None:
            return []
        view, parsed, doc_scores, passage_scores = plan
        order = top_indices(doc_scores, k)
        if self.config.rerank is None or len(order) == 0:
            return [(view.paper_ids[i], float(doc_scores[i])) for i in order]
        head = order[: self.config.rerank_depth]
        contexts = self._contexts(view, head, doc_scores, passage_scores)
        reranked = [c.paper_id for c in self.config.rerank(parsed.text or query, contexts)]
        seen = set(reranked)
        ranked = reranked + [pid for pid in (view.paper_ids[i] for i in order) if pid not in seen]
        return [
            (pid, float(len(ranked) - rank)) for rank, pid in enumerate(ranked)
        ]  # scores keep the new order

    # -- pipeline

    def _plan(self, query: str):
        cfg = self.config
        trace = SearchTrace()
        self.last_trace = trace
        started = time.perf_counter()
        if not isinstance(query, str) or not query.strip():
            trace.message = "empty query"
            return None
        query = re.sub(r"\s+", " ", query).strip()[: cfg.max_query_chars]
        view = self.view()
        if view.empty:
            trace.message = "the index is empty"
            return None

        # parse
        if cfg.llm_parser is not None:
            parsed = cfg.llm_parser(query)
        elif cfg.parse_query:
            parsed = parse_query(query, known_authors=lambda name: name in view.known_last_names)
        else:
            parsed = ParsedQuery(query, query)
        trace.parsed = parsed
        text = parsed.text or query
        terms = Counter(tokenize(text))
        if not terms:
            trace.message = "the query has only stopwords or punctuation"
            return None
        query_terms: dict[str, float] = {t: float(c) for t, c in terms.most_common(128)}

        # expand
        if cfg.expand_acronyms or cfg.synonyms:
            extra: dict[str, float] = {}
            for word in WORD.findall(text):
                alternatives = []
                if (
                    cfg.expand_acronyms
                    and word.isupper()
                    and len(word) >= 2
                    and word.lower() in view.acronyms
                ):
                    alternatives.append(view.acronyms[word.lower()])
                alternatives += cfg.synonyms.get(word.lower(), [])
                for alternative in alternatives:
                    for token in tokenize(alternative):
                        if token not in query_terms:
                            extra[token] = max(extra.get(token, 0.0), cfg.expansion_weight)
            trace.expansions = extra
            query_terms.update(extra)
        texts = [text]
        if cfg.llm_multi_query is not None:
            texts += [t for t in cfg.llm_multi_query(text) if t and t.strip()][:4]
        t0 = time.perf_counter()
        cached = [self.embedding_cache.get(t) for t in texts] if self.embedding_cache is not None else [None]
        if all(v is not None for v in cached):
            query_vectors = np.stack(cached)
        else:
            encode = getattr(self.embedder, "encode_queries", self.embedder.encode)
            query_vectors = encode(texts)
        query_vector = query_vectors.mean(axis=0)
        query_vector /= max(float(np.linalg.norm(query_vector)), 1e-12)
        trace.timings_ms["embed"] = (time.perf_counter() - t0) * 1000
        if view.passage_vectors.shape[1] != query_vector.shape[0]:
            raise IndexModelMismatch(
                f"the index holds {view.passage_vectors.shape[1]}-d vectors but the query model gives "
                f"{query_vector.shape[0]}-d ones: search with the model that built the index "
                "(LUMINA_EMBEDDING_MODEL) or rebuild the index"
            )

        # retrieve + fuse
        t0 = time.perf_counter()

        def fused(runs):
            """One fusion setting for both rounds (the first pass and the feedback pass)."""
            return fuse(
                runs,
                cfg.weights,
                len(view.paper_ids),
                method=cfg.fusion,
                candidates=cfg.candidates,
                rrf_k=cfg.rrf_k,
                normalization=cfg.normalization,
            )

        runs, passage_runs = self._retrieve(view, text, query_vector, query_terms)
        doc_scores = fused(runs)

        # pseudo-relevance feedback: a second round from the first round's best papers
        if (cfg.dense_prf or cfg.rm3) and np.any(doc_scores > 0):
            feedback_docs = top_indices(
                np.where(doc_scores > 0, doc_scores, -np.inf), max(cfg.dense_prf_docs, cfg.rm3_docs)
            )
            if cfg.dense_prf and cfg.dense_prf_beta > 0:
                centroid = view.abstract_vectors[feedback_docs[: cfg.dense_prf_docs]].mean(axis=0)
                query_vector = query_vector + cfg.dense_prf_beta * centroid
                query_vector /= max(float(np.linalg.norm(query_vector)), 1e-12)
            if cfg.rm3:
                feedback = self._rm3_terms(view, feedback_docs[: cfg.rm3_docs], doc_scores, query_terms)
                trace.feedback_terms = feedback
                total = sum(query_terms.values()) or 1.0
                mixed = {t: (1 - cfg.rm3_weight) * w / total for t, w in query_terms.items()}
                for term, weight in feedback.items():
                    mixed[term] = mixed.get(term, 0.0) + cfg.rm3_weight * weight
                query_terms = mixed
            runs, passage_runs = self._retrieve(view, text, query_vector, query_terms)
            doc_scores = fused(runs)
        trace.timings_ms["retrieve"] = (time.perf_counter() - t0) * 1000

        doc_scores = self._boost(view, parsed, doc_scores)
        trace.timings_ms["total"] = (time.perf_counter() - started) * 1000
        if not np.any(doc_scores > 0):
            trace.message = "no matching papers"
            return None
        doc_scores = np.where(doc_scores > 0, doc_scores, -np.inf)
        passage_scores = fuse(
            passage_runs,
            cfg.weights,
            len(view.passage_ids),
            method=cfg.fusion,
            candidates=10 * cfg.candidates,
            rrf_k=cfg.rrf_k,
            normalization=cfg.normalization,
        )
        return view, parsed, doc_scores, passage_scores

    def _retrieve(self, view: CorpusView, text: str, vector: np.ndarray, terms: dict[str, float]):
        """Per-retriever document scores, and per-retriever passage scores (for choosing the chunks)."""
        cfg = self.config
        runs: dict[str, np.ndarray] = {}
        passage_runs: dict[str, np.ndarray] = {}
        if cfg.backend == "lancedb":
            return self._retrieve_lancedb(view, text, vector)
        if cfg.passage_vectors:
            scores = view.passage_vectors @ vector
            passage_runs["passage_vectors"] = scores
            runs["passage_vectors"] = view.doc_max(scores, cfg.passage_aggregation)
        if cfg.passage_fulltext:
            scores = view.passage_bm25.scores(terms)
            passage_runs["passage_fulltext"] = np.where(scores > 0, scores, -np.inf)
            runs["passage_fulltext"] = view.doc_max(passage_runs["passage_fulltext"], cfg.passage_aggregation)
        if cfg.paper_title_vectors:
            runs["paper_title_vectors"] = view.title_vectors @ vector
        if cfg.paper_abstract_vectors:
            runs["paper_abstract_vectors"] = view.abstract_vectors @ vector
        if cfg.paper_fulltext:
            scores = view.paper_bm25.scores(terms)
            runs["paper_fulltext"] = np.where(scores > 0, scores, -np.inf)
        return runs, passage_runs

    def _retrieve_lancedb(self, view: CorpusView, text: str, vector: np.ndarray):
        """The same retrievers through LanceDB's own vector search and full-text (BM25) index."""
        cfg = self.config
        n = cfg.candidates
        runs: dict[str, np.ndarray] = {}
        passage_runs: dict[str, np.ndarray] = {}

        def scatter(rows, size, positions, column) -> np.ndarray:
            out = np.full(size, -np.inf, dtype=np.float32)
            for row in rows:
                index = positions.get(row[column[0]])
                if index is not None:
                    out[index] = row[column[1]]
            return out

        if cfg.passage_vectors:
            rows = (
                view.passages_table.search(vector, vector_column_name="vector")
                .distance_type("cosine")
                .select(["passage_id", "_distance"])
                .limit(n * 3)
                .to_list()
            )
            for row in rows:
                row["sim"] = 1.0 - row["_distance"]
            scores = scatter(rows, len(view.passage_ids), view.passage_pos, ("passage_id", "sim"))
            passage_runs["passage_vectors"] = scores
            runs["passage_vectors"] = view.doc_max(scores, cfg.passage_aggregation)
        fts_text = " ".join(WORD.findall(text))[:1000]
        if cfg.passage_fulltext and fts_text:
            rows = (
                view.passages_table.search(fts_text, query_type="fts")
                .select(["passage_id", "_score"])
                .limit(n * 3)
                .to_list()
            )
            scores = scatter(rows, len(view.passage_ids), view.passage_pos, ("passage_id", "_score"))
            passage_runs["passage_fulltext"] = scores
            runs["passage_fulltext"] = view.doc_max(scores, cfg.passage_aggregation)
        for name, column, enabled in (
            ("paper_title_vectors", "title_vector", cfg.paper_title_vectors),
            ("paper_abstract_vectors", "abstract_vector", cfg.paper_abstract_vectors),
        ):
            if enabled:
                rows = (
                    view.papers_table.search(vector, vector_column_name=column)
                    .distance_type("cosine")
                    .select(["paper_id", "_distance"])
                    .limit(n)
                    .to_list()
                )
                for row in rows:
                    row["sim"] = 1.0 - row["_distance"]
                runs[name] = scatter(rows, len(view.paper_ids), view.paper_pos, ("paper_id", "sim"))
        if cfg.paper_fulltext and fts_text:
            rows = (
                view.papers_table.search(fts_text, query_type="fts")
                .select(["paper_id", "_score"])
                .limit(n)
                .to_list()
            )
            runs["paper_fulltext"] = scatter(
                rows, len(view.paper_ids), view.paper_pos, ("paper_id", "_score")
            )
        return runs, passage_runs

    def _rm3_terms(
        self, view: CorpusView, docs: np.ndarray, doc_scores: np.ndarray, query_terms
    ) -> dict[str, float]:
        """RM3 feedback model: P(t|R) ~ sum_d P(t|d) P(d|q) over the feedback papers, top terms, normalized."""
        cfg = self.config
        if len(docs) == 0:
            return {}
        weights = doc_scores[docs].astype(np.float64)
        weights = weights / weights.sum() if weights.sum() > 0 else np.full(len(docs), 1.0 / len(docs))
        tf = view.paper_bm25.term_counts[docs]
        lengths = np.asarray(tf.sum(axis=1)).reshape(-1)
        lengths[lengths == 0] = 1
        relevance = sp.diags(weights / lengths) @ tf
        term_scores = np.asarray(relevance.sum(axis=0)).reshape(-1)
        # terms in a single feedback document are noise as often as signal; require two unless only one doc
        support = np.asarray((tf > 0).sum(axis=0)).reshape(-1)
        if len(docs) > 1:
            term_scores = np.where(support >= 2, term_scores, 0.0)
        top = np.argsort(-term_scores)[: cfg.rm3_terms]
        chosen = {view.paper_bm25.id_to_term[i]: float(term_scores[i]) for i in top if term_scores[i] > 0}
        total = sum(chosen.values()) or 1.0
        return {t: w / total for t, w in chosen.items()}

    def _boost(self, view: CorpusView, parsed: ParsedQuery, scores: np.ndarray) -> np.ndarray:
        cfg = self.config
        scores = scores.copy()
        positive = scores > 0
        if parsed.authors and cfg.author_boost > 0:
            wanted = {last_name(a) for a in parsed.authors}
            match = np.fromiter(
                (bool(wanted & names) for names in view.author_last_names),
                dtype=bool,
                count=len(view.paper_ids),
            )
            scores = np.where(positive & match, scores * (1.0 + cfg.author_boost), scores)
        if parsed.has_year and cfg.year_mode != "off":
            low = parsed.year_min if parsed.year_min is not None else -(10**6)
            high = parsed.year_max if parsed.year_max is not None else 10**6
            known = view.years > 0
            inside = known & (view.years >= low) & (view.years <= high)
            if cfg.year_mode == "filter":
                scores = np.where(known & ~inside, 0.0, scores)
            else:
                scores = np.where(positive & inside, scores * (1.0 + cfg.year_boost), scores)
        if cfg.recency_weight > 0:
            known = view.years > 0
            if known.any():
                oldest, newest = int(view.years[known].min()), int(view.years[known].max())
                recency = np.where(known, (view.years - oldest) / max(newest - oldest, 1), 0.0)
                scores = np.where(positive, scores * (1.0 + cfg.recency_weight * recency), scores)
        return scores.astype(np.float32)

    def _contexts(self, view: CorpusView, order, doc_scores, passage_scores) -> list[Context]:
        cfg = self.config
        contexts = []
        for doc in order:
            members = view.paper_passages[doc]
            if len(members) == 0:
                continue
            ranked = members[np.argsort(-passage_scores[members], kind="stable")]
            chosen = [int(ranked[0])]
            for extra in ranked[1 : cfg.max_passages_per_paper]:
                if passage_scores[extra] > 0:
                    chosen.append(int(extra))
            selected = set(chosen)
            if cfg.expand_neighbours and cfg.neighbour_window > 0:
                for hit in list(chosen):
                    if len(view.passage_texts[hit].split()) >= cfg.neighbour_below_words:
                        continue
                    for direction in (view.prev_ids, view.next_ids):
                        current = hit
                        for _ in range(cfg.neighbour_window):
                            neighbour_id = direction[current]
                            neighbour = view.passage_pos.get(neighbour_id) if neighbour_id else None
                            if neighbour is None:
                                break
                            selected.add(neighbour)
                            current = neighbour
            ordered = sorted(selected)  # table order follows reading order within a paper
            ordered.sort(key=lambda i: _reading_key(view.passage_ids[i]))
            contexts.append(
                Context(
                    title=view.titles[doc],
                    chunks=[view.passage_texts[i] for i in ordered],
                    doi=view.dois[doc],
                    url=view.urls[doc],
                    paper_id=view.paper_ids[doc],
                    score=float(doc_scores[doc]),
                    passage_ids=[view.passage_ids[i] for i in ordered],
                )
            )
        return contexts


def _reading_key(passage_id: str) -> tuple:
    """Sort key from `<paper>#<section>:<index>`: abstract first, then section numbers naturally, then index."""
    _, _, tail = passage_id.rpartition("#")
    section, _, index = tail.rpartition(":")
    parts = [
        (0, int(x)) if x.isdigit() else (1 if section != "abstract" else -1, x)
        for x in re.split(r"[.\-]", section)
    ]
    return (parts, int(index) if index.isdigit() else 0)


def percentile_ms(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples) * 1000.0, q)) if samples else math.nan
