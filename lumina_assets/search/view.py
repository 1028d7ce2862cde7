"""The in-memory view of the LanceDB tables: vectors as one matrix and BM25 over the same texts, per table version."""

from __future__ import annotations

import hashlib
import logging
import threading

import numpy as np

from lumina_assets.search.acronyms import mine_acronyms
from lumina_assets.search.bm25 import BM25
from lumina_assets.search.query_parser import last_name
from lumina_assets.search.text import tokenize

log = logging.getLogger(__name__)


class IndexNotBuilt(RuntimeError):
    """The LanceDB tables do not exist yet."""


class IndexModelMismatch(RuntimeError):
    """The index was built with another embedding model than the one encoding the query."""


class CorpusView:
    """Vectors, texts and BM25 indexes of the `passages` and `papers` tables, loaded once per table version."""

    def __init__(self, db, *, k1: float, b: float) -> None:
        from lumina_assets.indexing.lancedb_tables import (
            PAPERS_TABLE,
            PASSAGES_TABLE,
            open_table,
            vectors_from_arrow,
        )

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
        self.author_last_names = [{last_name(a) for a in names} for names in self.authors]
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

    from lumina_assets.core import settings
    from lumina_assets.core.tables import atomic_replace

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
    from lumina_assets.indexing.lancedb_tables import index_version

    key = (db_uri, index_version(db), k1, b)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is None:
            for stale in [k for k in _VIEWS if k[0] == db_uri]:
                del _VIEWS[stale]
            view = CorpusView(db, k1=k1, b=b)
            _VIEWS[key] = view
    return view
