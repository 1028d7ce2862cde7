"""The small-corpus store and the choice between stores: `MemoryStore` answers from memory what `LanceStore` asks
LanceDB for; `open_store` picks one per index and keeps it open (one per process and index, shared by engines)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import pyarrow as pa

from lumina_assets.indexing.index_rows import PASSAGE_DISPLAY_FIELDS as PASSAGE_FIELDS
from lumina_assets.search.fusion import Run
from lumina_assets.search.stores import Filters, IndexNotBuilt, LanceStore, arrow_rows, fts_text

log = logging.getLogger(__name__)


def empty_index_message() -> str:
    """What `lumina serve` and a search on an index without passages say: it is empty, and how to fill it."""
    from lumina_assets.core import settings

    return (
        "the index is empty: fill it with `make demo` (LUMINA_CORPUS=<a folder of PDFs> indexes your own), or "
        f"drop PDFs into {settings.inbox_dir()} and run `lumina demo` (or let the inbox sensor of `make ui` "
        "pick them up)"
    )


def _years(column) -> np.ndarray:
    return np.asarray([y if y is not None else -1 for y in column.to_pylist()], dtype=np.int32)


class MemoryStore(LanceStore):
    """Small corpora: passage vectors and display columns in memory (exact search by one matrix product), and both
    full-text searches answered by `fulltext_mirror`s built in a background thread (LanceDB answers until then)."""

    def __init__(self, db, *, mirrors: bool = True, **kwargs) -> None:
        super().__init__(db, **kwargs)
        from lumina_assets.indexing.table_ops import vectors_from_arrow

        table = self.passages_table.search().select([*PASSAGE_FIELDS, "search_text", "vector"])
        table = table.limit(max(self.passages_table.count_rows(), 1)).to_arrow().combine_chunks()
        passage_texts = table["search_text"]
        # Arrow columns in one chunk: compact, and a row is taken by position without a search across chunks
        self._rows = table.drop_columns(["vector", "search_text"])
        self._ids = table["passage_id"].to_pylist()
        self._paper_of = table["paper_id"].to_pylist()
        self._years = _years(table["year"])
        self._vectors = vectors_from_arrow(table["vector"], self.dimension)
        self._position = {pid: i for i, pid in enumerate(self._ids)}
        self._by_paper: dict[str, list[int]] = {}
        for index, paper_id in enumerate(self._paper_of):
            self._by_paper.setdefault(paper_id, []).append(index)
        # what a context is built from, by position: neighbour ids as lists, title / DOI / URL once per paper
        self._neighbours = self._rows.select(["prev_id", "next_id"]).to_pydict()
        # typed: an empty index has no first rows, and Arrow cannot take with an untyped empty list
        firsts = pa.array([positions[0] for positions in self._by_paper.values()], type=pa.int64())
        firsts_display = arrow_rows(self._rows.select(["title", "doi", "url"]).take(firsts))
        self._paper_display = dict(zip(self._by_paper, firsts_display, strict=True))
        texts = self._rows["text"]  # one chunk: taken without a copy
        self._texts = texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
        self.loaded_version = self.version()
        self._text_mirrors: tuple | None = None
        self.text_mirrors_ready = threading.Event()
        if not mirrors:  # a process that answers once and exits: LanceDB's full-text indexes answer
            self.text_mirrors_ready.set()
            return
        threading.Thread(
            target=self._build_text_mirrors,
            args=(passage_texts,),
            name="lumina-fulltext-mirror",
            daemon=True,
        ).start()

    def _build_text_mirrors(self, passage_texts) -> None:
        from lumina_assets.search.fulltext_mirror import FullTextMirror

        try:
            papers = self.papers_table.search().select(["paper_id", "year", "search_text"])
            papers = papers.limit(max(self.papers_table.count_rows(), 1)).to_arrow().combine_chunks()
            paper_ids = papers["paper_id"].to_pylist()
            self._text_mirrors = (
                FullTextMirror(passage_texts),
                FullTextMirror(papers["search_text"]),
                paper_ids,
                _years(papers["year"]),
            )
        except Exception as error:  # a hint only: LanceDB's indexes keep answering
            log.warning("full-text mirror not built, LanceDB's full-text index answers instead: %s", error)
        finally:
            self.text_mirrors_ready.set()

    def wait_until_warm(self, timeout: float | None = None) -> bool:
        return self.text_mirrors_ready.wait(timeout)

    def prewarm_in_background(self) -> list[threading.Thread]:
        """Nothing to load: vectors are in memory and the full-text mirrors build at open."""
        return []

    def _admitted(self, filters: Filters, years: np.ndarray, paper_ids: Sequence[str]) -> np.ndarray | None:
        """Boolean mask of the rows a filter lets through (None: no filter), as `Filters.sql` decides."""
        if filters.empty:
            return None
        mask = np.ones(len(years), dtype=bool)
        if filters.year_min is not None:
            mask &= years >= filters.year_min
        if filters.year_max is not None:
            mask &= (years >= 0) & (years <= filters.year_max)
        if filters.paper_ids is not None:
            wanted = set(filters.paper_ids)
            mask &= np.fromiter((p in wanted for p in paper_ids), dtype=bool, count=len(paper_ids))
        return mask

    def start_text_runs(self, text: str, passage_n: int, paper_n: int, filters: Filters) -> dict[str, Future]:
        """The full-text runs from the in-memory mirrors once built, else from LanceDB."""
        if self._text_mirrors is None:
            return super().start_text_runs(text, passage_n, paper_n, filters)
        passage_index, paper_index, paper_ids, paper_years = self._text_mirrors
        words = fts_text(text)
        futures: dict[str, Future] = {}
        for name, n, mirror, ids, papers, years in (
            ("passage_fulltext", passage_n, passage_index, self._ids, self._paper_of, self._years),
            ("paper_fulltext", paper_n, paper_index, paper_ids, paper_ids, paper_years),
        ):
            if n > 0:  # computed here: a hand-off to a thread costs as much as the search
                hits = mirror.top(words, n, self._admitted(filters, years, papers)) if words else []
                futures[name] = Future()
                futures[name].set_result(Run([(ids[i], score, papers[i]) for i, score in hits]))
        return futures

    def passage_vector_run(self, vector, n, filters) -> Run:
        scores = self._vectors @ vector
        admitted = self._admitted(filters, self._years, self._paper_of)
        if admitted is not None:
            scores = np.where(admitted, scores, -np.inf)
            n = min(n, int(admitted.sum()))
        n = min(n, len(scores))
        if n <= 0:
            return Run([])
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        ids, papers = self._ids, self._paper_of
        return Run(
            [(ids[i], score, papers[i]) for i, score in zip(top.tolist(), scores[top].tolist(), strict=True)]
        )

    def passages(self, passage_ids) -> dict[str, dict]:
        positions = sorted({self._position[p] for p in passage_ids if p in self._position})
        return {row["passage_id"]: row for row in arrow_rows(self._rows.take(positions))} if positions else {}

    def paper_passage_rows(self, paper_ids) -> dict[str, list[dict]]:
        positions = [i for paper_id in sorted(set(paper_ids)) for i in self._by_paper.get(paper_id, [])]
        out: dict[str, list[dict]] = {}
        texts = self._texts.take(positions).to_pylist() if positions else []
        previous, following = self._neighbours["prev_id"], self._neighbours["next_id"]
        for position, text in zip(positions, texts, strict=True):
            paper_id = self._paper_of[position]
            row = {
                "passage_id": self._ids[position],
                "paper_id": paper_id,
                "text": text,
                "prev_id": previous[position],
                "next_id": following[position],
                **self._paper_display[paper_id],
                "vector": self._vectors[position],
            }
            out.setdefault(paper_id, []).append(row)
        return out


_STORES: dict[tuple, LanceStore] = {}
_STORES_LOCK = threading.Lock()


def clear_open_stores() -> None:
    """Forget every open store (tests: a store of an index an earlier test wrote must not be reused)."""
    with _STORES_LOCK:
        _STORES.clear()


_RELOADING: set[tuple] = set()  # keys of memory stores being reloaded in the background


def open_store(
    db_uri: str,
    db,
    *,
    memory_max_passages: int,
    nprobes: int,
    refine_factor: int,
    probe_share: float,
    reload_in_background: bool = False,
    preload: bool = True,
    mirrors: bool = True,
) -> LanceStore:
    """The store for the current table versions: in memory below `memory_max_passages` rows, else index-backed. A
    memory store is rebuilt when a table version changes (with `reload_in_background`, the loaded one answers
    meanwhile); an index-backed one only re-checks out the tables."""
    from lumina_assets.indexing.lancedb_tables import PASSAGES_TABLE
    from lumina_assets.indexing.table_ops import open_table

    passages = open_table(db, PASSAGES_TABLE)
    if passages is None:
        raise IndexNotBuilt("the passage index has not been built yet")
    small = passages.count_rows() < memory_max_passages
    with _STORES_LOCK:
        key = (db_uri, small, nprobes, probe_share, refine_factor, preload, mirrors)
        store = _STORES.get(key)
        if store is not None:
            store.checkout_latest()
        stale_memory = not isinstance(store, MemoryStore) or store.loaded_version != store.version()
        options = dict(nprobes=nprobes, probe_share=probe_share, refine_factor=refine_factor, preload=preload)
        if small and stale_memory and reload_in_background and isinstance(store, MemoryStore):
            _reload_in_background(key, db, {**options, "mirrors": mirrors})
            return store  # the loaded version answers until the new one is in
        if small and stale_memory:
            store = MemoryStore(db, mirrors=mirrors, **options)
        elif store is None:
            store = LanceStore(db, **options)
        for stale in [k for k in _STORES if k[0] == db_uri and k != key]:
            del _STORES[stale]
        _STORES[key] = store
    return store


def _reload_in_background(key: tuple, db, options: dict) -> None:
    """Load the new table version into a MemoryStore in a daemon thread and swap it in (called under _STORES_LOCK)."""
    if key in _RELOADING:
        return
    _RELOADING.add(key)

    def load() -> None:
        try:
            fresh = MemoryStore(db, **options)
            with _STORES_LOCK:
                _STORES[key] = fresh
        except Exception as error:  # the loaded store keeps answering; the next refresh tries again
            log.warning("reloading the in-memory store failed: %s", error)
        finally:
            with _STORES_LOCK:
                _RELOADING.discard(key)

    threading.Thread(target=load, name="lumina-store-reload", daemon=True).start()
