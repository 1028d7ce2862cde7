"""The Lumina search pipeline: query -> parse -> expand -> retrieve (passage vectors, passage full text, paper
title / abstract vectors, paper full text) -> fuse -> pseudo-relevance feedback -> boost / filter -> diversify ->
neighbour expansion -> optional rerank -> ranked `Context`s with pinpointed passages.

Every stage is a switch in `SearchConfig`, so the benchmark and `lumina eval beir` can measure each one's share.
Retrieval runs on an in-memory view of the LanceDB tables (vectors as one float32 matrix, a BM25 index over the
same texts LanceDB's full-text index holds), rebuilt whenever a table version changes; `backend="lancedb"` asks
LanceDB's own vector and full-text search instead (the path for tables too large for memory).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from lumina_assets.schemas import Context

log = logging.getLogger(__name__)

# ---------------------------------------------------------------- text


@functools.lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@functools.lru_cache(maxsize=1)
def _stemmer():
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:  # PyStemmer missing: exact-form matching still works
        return None


_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stopwords, Snowball-stemmed (the BM25 vocabulary)."""
    stop = stopwords()
    words = [w for w in _WORD.findall(text.lower()) if w not in stop and (len(w) > 1 or w.isdigit())]
    stemmer = _stemmer()
    return stemmer.stemWords(words) if stemmer is not None and words else words


class BM25:
    """Okapi BM25 over a sparse matrix of precomputed term weights; supports weighted queries (for RM3)."""

    def __init__(self, documents: Sequence[list[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        vocab: dict[str, int] = {}
        rows, cols, counts = [], [], []
        lengths = np.zeros(len(documents), dtype=np.float32)
        for doc_index, tokens in enumerate(documents):
            lengths[doc_index] = len(tokens)
            for term, count in Counter(tokens).items():
                term_id = vocab.setdefault(term, len(vocab))
                rows.append(doc_index)
                cols.append(term_id)
                counts.append(count)
        self.vocab = vocab
        self.num_docs = len(documents)
        shape = (len(documents), max(len(vocab), 1))
        tf = sp.csr_matrix(
            (
                np.asarray(counts, dtype=np.float32),
                (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)),
            ),
            shape=shape,
        )
        self.term_counts = tf  # raw tf, rows = documents (for feedback-term statistics)
        self.doc_lengths = lengths
        df = np.bincount(np.asarray(cols, dtype=np.int64), minlength=shape[1]).astype(np.float32)
        self.idf = np.log(1.0 + (self.num_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        avg = float(lengths.mean()) if len(documents) else 1.0
        coo = tf.tocoo()
        norm = k1 * (1.0 - b + b * lengths[coo.row] / max(avg, 1e-9))
        weights = self.idf[coo.col] * coo.data * (k1 + 1.0) / (coo.data + norm)
        self.weights = sp.csc_matrix((weights.astype(np.float32), (coo.row, coo.col)), shape=shape)
        self.id_to_term = {i: t for t, i in vocab.items()}

    def term_ids(self, terms: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        ids, weights = [], []
        for term, weight in terms.items():
            term_id = self.vocab.get(term)
            if term_id is not None and weight > 0:
                ids.append(term_id)
                weights.append(weight)
        return np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float32)

    def scores(self, terms: dict[str, float]) -> np.ndarray:
        ids, weights = self.term_ids(terms)
        if len(ids) == 0:
            return np.zeros(self.num_docs, dtype=np.float32)
        return np.asarray(self.weights[:, ids] @ weights, dtype=np.float32).reshape(-1)


# ---------------------------------------------------------------- query parsing

_YEAR = r"(1[89]\d{2}|20\d{2})"
_YEAR_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(rf"\b(?:published\s+)?between\s+{_YEAR}\s+(?:and|&)\s+{_YEAR}\b", re.I), "between"),
    (re.compile(rf"\bfrom\s+{_YEAR}\s+(?:to|until|till|through)\s+{_YEAR}\b", re.I), "between"),
    (re.compile(rf"\b(?:years?\s*:?\s*)?{_YEAR}\s*(?:-|–|—|\.\.|to)\s*{_YEAR}\b", re.I), "between"),
    (re.compile(rf"\b(?:published\s+)?(?:before|prior\s+to|earlier\s+than|pre)\s+{_YEAR}\b", re.I), "before"),
    (
        re.compile(rf"\b(?:published\s+)?(?:until|up\s+to|through|no\s+later\s+than)\s+{_YEAR}\b", re.I),
        "until",
    ),
    (re.compile(rf"\b(?:published\s+)?(?:after|later\s+than|post)\s+{_YEAR}\b", re.I), "after"),
    (
        re.compile(rf"\b(?:published\s+)?(?:since|from|starting\s+(?:in|from)|as\s+of)\s+{_YEAR}\b", re.I),
        "since",
    ),
    (re.compile(rf"\byear\s*(>=|<=|>|<|=|:)\s*{_YEAR}\b", re.I), "op"),
    (re.compile(rf"\b(?:published\s+)?(?:in|during)\s+(?:the\s+year\s+)?{_YEAR}\b", re.I), "in"),
]
_NAME = r"[A-Z][a-zA-Z'\u00C0-\u024F\-]+"
_AUTHOR_EXPLICIT = re.compile(r"\bauthor\s*:\s*(\"[^\"]+\"|'[^']+'|\S+)", re.I)
_AUTHOR_ET_AL = re.compile(rf"\b((?:{_NAME}\s+)?{_NAME})\s+et\s+al\.?", re.U)
_AUTHOR_BY = re.compile(
    rf"\b(?:papers?\s+|work\s+|articles?\s+|studies\s+)?by\s+((?:[A-Z]\.\s*)*{_NAME}(?:\s+{_NAME})?)", re.U
)


_EXPLICIT_YEAR = re.compile(r"\b(?:published|year)\b", re.I)
_PUBLICATION_WORDS = re.compile(
    r"\b(?:papers?|articles?|studies|publications?|literature|reviews?|preprints?|works?|research|published)\b",
    re.I,
)


def _is_statement(query: str) -> bool:
    """A declarative sentence (a claim pasted as the query) rather than a search request: ends with a full stop,
    has at least six words and does not talk about publications. Its years are content, not date filters."""
    stripped = query.strip()
    return stripped.endswith(".") and len(stripped.split()) >= 6 and not _PUBLICATION_WORDS.search(stripped)


@dataclass
class ParsedQuery:
    """What the parser understood. `text` is what retrieval sees (constraint phrases removed)."""

    original: str
    text: str
    authors: list[str] = field(default_factory=list)
    year_min: int | None = None
    year_max: int | None = None
    keywords: list[str] = field(default_factory=list)
    parser: str = "heuristic"

    @property
    def has_year(self) -> bool:
        return self.year_min is not None or self.year_max is not None


def _last_name(name: str) -> str:
    parts = [
        p for p in re.split(r"[\s,]+", name.strip().strip("\"'")) if p and not re.fullmatch(r"[A-Z]\.?", p)
    ]
    return parts[-1].lower() if parts else ""


def parse_query(query: str, known_authors: Callable[[str], bool] | None = None) -> ParsedQuery:
    """Heuristic parse: explicit author syntax, "X et al.", "by X" (only when X is a known author), year ranges.

    "by X" is ambiguous in scientific text ("activated by Notch"), so it counts as an author only when
    `known_authors(last_name)` says the index has such an author; otherwise the words stay in the query.
    """
    text = query
    authors: list[str] = []
    for pattern, kind in ((_AUTHOR_EXPLICIT, "explicit"), (_AUTHOR_ET_AL, "et_al"), (_AUTHOR_BY, "by")):
        for match in list(pattern.finditer(text)):
            name = match.group(1).strip().strip("\"'")
            if kind == "by" and (known_authors is None or not known_authors(_last_name(name))):
                continue
            authors.append(name)
            text = text.replace(match.group(0), " ", 1)
    year_min = year_max = None
    statement = _is_statement(query)
    for pattern, kind in _YEAR_PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        if statement and not _EXPLICIT_YEAR.search(match.group(0)):
            continue  # "incidence fell from 2009 to 2014." states a fact: its years are content, not a filter
        if kind == "between":
            first, second = sorted((int(match.group(1)), int(match.group(2))))
            year_min, year_max = first, second
        elif kind == "before":
            year_max = int(match.group(1)) - 1
        elif kind == "until":
            year_max = int(match.group(1))
        elif kind == "after":
            year_min = int(match.group(1)) + 1
        elif kind == "since":
            year_min = int(match.group(1))
        elif kind == "in":
            year_min = year_max = int(match.group(1))
        elif kind == "op":
            op, year = match.group(1), int(match.group(2))
            if op in (">=",):
                year_min = year
            elif op == ">":
                year_min = year + 1
            elif op == "<=":
                year_max = year
            elif op == "<":
                year_max = year - 1
            else:
                year_min = year_max = year
        text = text.replace(match.group(0), " ", 1)
        if kind in ("between", "in", "op"):
            break
    text = re.sub(r"\s+", " ", text).strip(" ,;")
    keywords = [w for w in _WORD.findall(text.lower()) if w not in stopwords() and len(w) > 1]
    return ParsedQuery(query, text, authors, year_min, year_max, keywords)


# ---------------------------------------------------------------- acronyms (mined from the corpus)

_PAREN_ACRONYM = re.compile(r"\(([A-Z][A-Za-z0-9\-]{1,9})\)")


def _long_form(words: list[str], short: str) -> str | None:
    """Schwartz & Hearst (2003), simplified: the shortest word run before "(SF)" whose letters cover SF in order."""
    letters = [c.lower() for c in short if c.isalnum()]
    if not letters or not words:
        return None
    for size in range(1, min(len(words), len(letters) + 2) + 1):
        candidate = words[-size:]
        if candidate[0][:1].lower() != letters[0]:
            continue
        joined = " ".join(candidate).lower()
        position = 0
        ok = True
        for letter in letters:
            position = joined.find(letter, position)
            if position < 0:
                ok = False
                break
            position += 1
        if ok:
            return " ".join(candidate)
    return None


def mine_acronyms(texts: Sequence[str], min_count: int = 1) -> dict[str, str]:
    """{acronym (lower): its most frequent long form} found as "long form (LF)" in the corpus."""
    found: dict[str, Counter] = {}
    for text in texts:
        for match in _PAREN_ACRONYM.finditer(text):
            short = match.group(1)
            if sum(c.isupper() for c in short) < 2:
                continue
            before = re.findall(r"[\w\-]+", text[max(0, match.start() - 120) : match.start()])
            long = _long_form(before[-12:], short)
            if long and len(long) > len(short):
                found.setdefault(short.lower(), Counter())[long.lower()] += 1
    return {
        short: counts.most_common(1)[0][0]
        for short, counts in found.items()
        if counts.most_common(1)[0][1] >= min_count
    }


# ---------------------------------------------------------------- configuration


@dataclass
class SearchConfig:
    """Every stage of the pipeline; defaults are the tuned offline configuration (no LLM, no reranker)."""

    # parsing
    parse_query: bool = True
    llm_parser: Callable[[str], ParsedQuery] | None = (
        None  # e.g. evals' LLM wrapper; used instead of the heuristic
    )
    # expansion
    expand_acronyms: bool = True
    synonyms: dict[str, list[str]] = field(default_factory=dict)  # user-supplied term -> alternatives
    expansion_weight: float = 0.5
    llm_multi_query: Callable[[str], list[str]] | None = None  # extra phrasings, each embedded and fused
    # retrieval
    backend: str = "memory"  # memory | lancedb
    passage_vectors: bool = True
    passage_fulltext: bool = True
    # paper-level vectors: available, off by default (no nDCG gain on SciFact / CISI for 2 extra matrix products)
    paper_title_vectors: bool = False
    paper_abstract_vectors: bool = False
    paper_fulltext: bool = True
    candidates: int = 200  # per retriever
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    passage_aggregation: str = (
        "max"  # max | sum2 (best passage + half of the second): a paper's score from passages
    )
    # fusion
    fusion: str = "weighted"  # rrf | weighted (min-max normalized scores over each retriever's candidates)
    rrf_k: int = 60
    normalization: str = "minmax"  # weighted fusion: minmax | max | zscore over each retriever's candidates
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "passage_vectors": 1.0,
            "passage_fulltext": 1.0,
            "paper_title_vectors": 0.3,
            "paper_abstract_vectors": 0.5,
            "paper_fulltext": 0.5,
        }
    )
    # pseudo-relevance feedback (second retrieval round from the first round's top papers)
    # off by default: on SciFact train and CISI both lowered nDCG@10 (see the ablation table in `eval beir --ablation`)
    dense_prf: bool = False  # Rocchio on the query vector
    dense_prf_docs: int = 3
    dense_prf_beta: float = 0.5
    rm3: bool = False  # RM3 expansion terms for the full-text retrievers
    rm3_docs: int = 5
    rm3_terms: int = 10
    rm3_weight: float = 0.3
    # boosts and filters
    author_boost: float = 1.0
    year_mode: str = "boost"  # boost | filter | off
    year_boost: float = 0.5
    recency_weight: float = 0.0  # e.g. 0.2 favours recent papers
    # results
    max_passages_per_paper: int = 2  # diversity: contexts hold at most this many hit passages
    expand_neighbours: bool = True  # parent-document: add the passages around a short hit
    neighbour_window: int = 1
    neighbour_below_words: int = 60  # only hits shorter than this get neighbours
    # rerank(query, contexts) -> contexts, e.g. search_models.cross_encoder_reranker / llm_reranker; None = off
    rerank: Callable[[str, list[Context]], list[Context]] | None = None
    rerank_depth: int = (
        30  # how many fused papers the reranker sees (it can lift one from below k into the top k)
    )
    max_query_chars: int = 2000

    def replace(self, **changes) -> SearchConfig:
        return dataclasses.replace(self, **changes)


# ---------------------------------------------------------------- the in-memory view of the index


class IndexNotBuilt(RuntimeError):
    """The LanceDB tables do not exist yet."""


class IndexModelMismatch(RuntimeError):
    """The index was built with another embedding model than the one encoding the query."""


class CorpusView:
    """Vectors, texts and BM25 indexes of the `passages` and `papers` tables, loaded once per table version."""

    def __init__(self, db, *, k1: float, b: float) -> None:
        from lumina_assets.indexing import PAPERS_TABLE, PASSAGES_TABLE, open_table, vectors_from_arrow

        passages_table = open_table(db, PASSAGES_TABLE)
        papers_table = open_table(db, PAPERS_TABLE)
        if passages_table is None or papers_table is None:
            raise IndexNotBuilt("the passage index has not been built yet")
        self.passages_table, self.papers_table = passages_table, papers_table
        p = passages_table.to_arrow()
        q = papers_table.to_arrow()
        self.paper_ids: list[str] = q["paper_id"].to_pylist()
        self.paper_pos = {pid: i for i, pid in enumerate(self.paper_ids)}
        self.titles: list[str] = [t or "" for t in q["title"].to_pylist()]
        self.dois: list[str | None] = q["doi"].to_pylist()
        self.urls: list[str | None] = q["url"].to_pylist()
        years = q["year"].to_pylist()
        self.years = np.asarray([y if y is not None else 0 for y in years], dtype=np.int32)
        self.authors: list[list[str]] = [a or [] for a in q["authors"].to_pylist()]
        self.author_last_names = [{_last_name(a) for a in names} for names in self.authors]
        self.known_last_names = set().union(*self.author_last_names) if self.author_last_names else set()
        self.title_vectors = vectors_from_arrow(q["title_vector"])
        self.abstract_vectors = vectors_from_arrow(q["abstract_vector"])

        self.passage_ids: list[str] = p["passage_id"].to_pylist()
        self.passage_pos = {pid: i for i, pid in enumerate(self.passage_ids)}
        self.passage_texts: list[str] = p["text"].to_pylist()
        self.prev_ids: list[str | None] = p["prev_id"].to_pylist()
        self.next_ids: list[str | None] = p["next_id"].to_pylist()
        self.passage_paper = np.asarray(
            [self.paper_pos.get(pid, -1) for pid in p["paper_id"].to_pylist()], dtype=np.int64
        )
        self.passage_vectors = vectors_from_arrow(p["vector"])
        order = np.argsort(self.passage_paper, kind="stable")
        bounds = np.searchsorted(self.passage_paper[order], np.arange(len(self.paper_ids) + 1))
        self.paper_passages = [order[bounds[i] : bounds[i + 1]] for i in range(len(self.paper_ids))]

        self.passage_bm25, self.paper_bm25, self.acronyms = lexical_indexes(
            [t or "" for t in p["search_text"].to_pylist()],
            [t or "" for t in q["search_text"].to_pylist()],
            k1=k1,
            b=b,
        )

    @property
    def empty(self) -> bool:
        return not self.passage_ids

    def doc_max(self, passage_scores: np.ndarray, aggregation: str = "max") -> np.ndarray:
        """Per-paper score from passage scores (max, or best + half the second best)."""
        out = np.full(len(self.paper_ids), -np.inf, dtype=np.float32)
        valid = self.passage_paper >= 0
        np.maximum.at(out, self.passage_paper[valid], passage_scores[valid])
        if aggregation == "sum2":
            second = np.full(len(self.paper_ids), -np.inf, dtype=np.float32)
            is_best = passage_scores >= out[self.passage_paper]
            rest = valid & ~is_best
            np.maximum.at(second, self.passage_paper[rest], passage_scores[rest])
            out = out + 0.5 * np.where(np.isfinite(second), np.maximum(second, 0), 0)
        return out


LEXICAL_FORMAT = 1  # bump when tokenize(), BM25 or mine_acronyms change what they compute
LEXICAL_CACHE_KEEP = 4  # cached lexical indexes kept on disk (newest first)


def lexical_indexes(
    passage_texts: list[str], paper_texts: list[str], *, k1: float, b: float
) -> tuple[BM25, BM25, dict[str, str]]:
    """(passage BM25, paper BM25, acronyms), from a disk cache keyed by the texts themselves.

    Why: tokenizing and stemming every text costs ~5 s on SciFact (more on bigger corpora) in each new process,
    which every first `lumina search` paid; the cache is content-addressed, so a rebuilt or changed index can
    never be served a stale one.
    """
    import pickle

    from lumina_assets import settings
    from lumina_assets.tables import atomic_replace

    digest = hashlib.sha256(f"{LEXICAL_FORMAT}|{k1}|{b}|{len(passage_texts)}|{len(paper_texts)}".encode())
    for text in (*passage_texts, *paper_texts):
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    folder = settings.cache_dir() / "search"
    path = folder / f"lexical-{digest.hexdigest()[:24]}.pkl"
    if path.exists():
        try:
            with path.open("rb") as handle:
                return pickle.load(handle)
        except Exception as error:  # noqa: BLE001 - unreadable cache: rebuild it
            log.warning("rebuilding the lexical index cache (%s: %s)", type(error).__name__, error)
    built = (
        BM25([tokenize(t) for t in passage_texts], k1=k1, b=b),
        BM25([tokenize(t) for t in paper_texts], k1=k1, b=b),
        mine_acronyms(paper_texts),
    )
    try:
        atomic_replace(
            path, lambda temp: temp.write_bytes(pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))
        )
        for stale in sorted(folder.glob("lexical-*.pkl"), key=lambda f: f.stat().st_mtime)[
            :-LEXICAL_CACHE_KEEP
        ]:
            stale.unlink(missing_ok=True)
    except OSError as error:  # a read-only data dir still searches, just without the cache
        log.warning("cannot cache the lexical index: %s", error)
    return built


_VIEWS: dict[tuple[str, str, float, float], CorpusView] = {}
_VIEWS_LOCK = threading.Lock()


def corpus_view(db_uri: str, db, *, k1: float, b: float) -> CorpusView:
    from lumina_assets.indexing import index_version

    key = (db_uri, index_version(db), k1, b)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is None:
            for stale in [k for k in _VIEWS if k[0] == db_uri]:
                del _VIEWS[stale]
            view = CorpusView(db, k1=k1, b=b)
            _VIEWS[key] = view
    return view


# ---------------------------------------------------------------- fusion helpers


def _top_indices(scores: np.ndarray, n: int) -> np.ndarray:
    finite = np.isfinite(scores)
    count = int(finite.sum())
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    n = min(n, count)
    masked = np.where(finite, scores, -np.inf)
    top = np.argpartition(-masked, n - 1)[:n]
    return top[np.argsort(-masked[top], kind="stable")]


def fuse(
    runs: dict[str, np.ndarray],
    weights: dict[str, float],
    size: int,
    *,
    method: str,
    candidates: int,
    rrf_k: int,
    normalization: str = "minmax",
) -> np.ndarray:
    """Fused score per document (0 for documents no retriever put in its candidates)."""
    fused = np.zeros(size, dtype=np.float32)
    for name, scores in runs.items():
        weight = weights.get(name, 1.0)
        if weight <= 0:
            continue
        top = _top_indices(scores, candidates)
        if len(top) == 0:
            continue
        if method == "rrf":
            fused[top] += weight / (rrf_k + np.arange(1, len(top) + 1, dtype=np.float32))
        else:
            values = scores[top]
            high, low = float(values[0]), float(values[-1])
            if high <= 0 and name.endswith("fulltext"):
                continue
            if normalization == "zscore":
                std = float(values.std())
                fused[top] += (
                    weight * ((values - float(values.mean())) / std if std > 1e-9 else 0.0) + weight * 3.0
                )
            elif normalization == "max":
                fused[top] += weight * (values / high if high > 1e-9 else np.ones_like(values))
            else:
                span = high - low
                fused[top] += weight * ((values - low) / span if span > 1e-9 else np.ones_like(values))
    return fused


# ---------------------------------------------------------------- the engine


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
    (lumina_assets.embedding.Embedder); `config` a SearchConfig (defaults when None).
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
        from lumina_assets import settings

        self.db_uri = db_uri or settings.lancedb_uri()
        self.storage_options = storage_options
        if embedder is None:
            from lumina_assets.embedding import Embedder

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
        order = _top_indices(doc_scores, max(k, self.config.rerank_depth) if reranking else k)
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
        order = _top_indices(doc_scores, k)
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
            for word in _WORD.findall(text):
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
            feedback_docs = _top_indices(
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
        fts_text = " ".join(_WORD.findall(text))[:1000]
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
            wanted = {_last_name(a) for a in parsed.authors}
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
