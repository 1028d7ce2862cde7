"""Where the search pipeline gets its candidates: every method answers for a handful of ids or a top-n list, never
for the whole corpus, so a search process holds open indexes and nothing the size of the corpus.

`LanceStore` asks LanceDB for everything: ANN (or exact, below the ANN threshold) vector search with a refine step,
the native full-text (BM25) index, and scalar-indexed lookups by id for the metadata of candidates only. Filters
(years, paper ids) are pushed down into each search as prefilters.

`MemoryStore` is the small-corpus fast path: the same interface with the passage vectors and display columns held
in memory (exact search by one matrix product instead of LanceDB's flat scan, which reads every vector from disk
per query) and the full-text searches answered by in-memory mirrors of LanceDB's indexes (`fulltext_mirror`: same
tokens, same BM25 scores), so both stores feed the same pipeline the same candidates. `open_store` picks it below
`memory_max_passages` (150k by default); from there on the ANN and full-text indexes answer.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lumina_assets.indexing.lancedb_tables import PASSAGE_DISPLAY_FIELDS as PASSAGE_FIELDS
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.fusion import Run

log = logging.getLogger(__name__)

PAPER_FIELDS = ["paper_id", "title", "doi", "url", "year", "authors"]
# what a context is built from: fewer columns than a passage shows, so building one converts less to Python
CONTEXT_FIELDS = ["passage_id", "paper_id", "text", "prev_id", "next_id", "title", "doi", "url"]
_FTS_WORD = re.compile(r"\w+", re.UNICODE)


# a filter admitting at most this many rows is searched exactly (an exact scan of 20k vectors: ~10-20 ms), since an
# ANN index probing a few percent of its partitions would find only the admitted rows that lie in them
EXACT_SEARCH_MAX_ROWS = 20_000


class IndexNotBuilt(RuntimeError):
    """The LanceDB tables do not exist yet."""


class IndexModelMismatch(RuntimeError):
    """The index was built with another embedding model than the one encoding the query."""


@dataclass(frozen=True)
class Filters:
    """Constraints pushed down into every retriever: a paper outside them is never a candidate."""

    year_min: int | None = None
    year_max: int | None = None
    paper_ids: tuple[str, ...] | None = None  # e.g. the papers of an explicitly requested author

    @property
    def empty(self) -> bool:
        return self.year_min is None and self.year_max is None and self.paper_ids is None

    def sql(self) -> str | None:
        clauses = []
        if self.year_min is not None:
            clauses.append(f"year >= {int(self.year_min)}")
        if self.year_max is not None:
            clauses.append(f"year <= {int(self.year_max)}")
        if self.paper_ids is not None:
            clauses.append(sql_in("paper_id", list(self.paper_ids)) if self.paper_ids else "false")
        return " AND ".join(clauses) or None

    def admits(self, year: int | None, paper_id: str) -> bool:
        if self.year_min is not None and (year is None or year < self.year_min):
            return False
        if self.year_max is not None and (year is None or year > self.year_max):
            return False
        return self.paper_ids is None or paper_id in self.paper_ids


def sql_in(column: str, values: Sequence[str]) -> str:
    quoted = ",".join("'" + str(v).replace("'", "''") + "'" for v in values)
    return f"{column} IN ({quoted})"


def fts_text(text: str, limit: int = 1000) -> str:
    """Words only: LanceDB's query parser must never see operators or quotes from user input."""
    return " ".join(_FTS_WORD.findall(text))[:limit]


class CandidateStore(Protocol):
    """What the pipeline needs from an index."""

    dimension: int

    def version(self) -> str: ...
    def passage_vector_run(self, vector: np.ndarray, n: int, filters: Filters) -> Run: ...
    def start_text_runs(
        self, text: str, passage_n: int, paper_n: int, filters: Filters
    ) -> dict[str, Future]: ...
    def paper_vector_run(self, column: str, vector: np.ndarray, n: int, filters: Filters) -> Run: ...
    def passages(self, passage_ids: Sequence[str]) -> dict[str, dict]: ...
    def paper_passages(
        self, paper_ids: Sequence[str], vector: np.ndarray
    ) -> dict[str, list[tuple[str, float]]]: ...
    def papers(self, paper_ids: Sequence[str]) -> dict[str, dict]: ...
    def paper_vectors(self, paper_ids: Sequence[str], column: str) -> np.ndarray: ...
    def papers_by_author(self, last_names: Sequence[str], limit: int) -> list[str]: ...
    def has_author(self, last_name: str) -> bool: ...
    def acronyms(self, shorts: Sequence[str]) -> dict[str, str]: ...


def arrow_rows(table) -> list[dict]:
    """An Arrow table as row dicts, column by column (5x faster than `Table.to_pylist` for the ~50 rows of a
    result page: 0.16 vs 0.83 ms)."""
    columns = table.to_pydict()
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _rows(query) -> list[dict]:
    return arrow_rows(query.to_arrow())


def _rows_on_loop(query) -> list[dict]:
    """Rows of an async LanceDB query (built on a sync table's async handle, `table._table`; lancedb 0.40 pinned),
    run on LanceDB's own event loop: 2-3 ms less per lookup at 1M passages than the sync API (9.2 -> 6.9 ms for
    the passages of 10 papers), which builds the same query in Python first."""
    from lancedb.background_loop import LOOP

    async def fetch():
        return await query.to_arrow()

    return arrow_rows(asyncio.run_coroutine_threadsafe(fetch(), LOOP.loop).result())


class LanceStore:
    """Candidates from LanceDB indexes; metadata fetched by id for candidates only."""

    def __init__(
        self,
        db,
        *,
        nprobes: int = SearchConfig.nprobes,
        probe_share: float = SearchConfig.ann_probe_share,
        refine_factor: int = SearchConfig.refine_factor,
    ) -> None:
        from lumina_assets.indexing import model_identity
        from lumina_assets.indexing.lancedb_tables import (
            ACRONYMS_TABLE,
            PAPERS_TABLE,
            PASSAGES_TABLE,
            open_table,
        )

        self.passages_table = open_table(db, PASSAGES_TABLE)
        self.papers_table = open_table(db, PAPERS_TABLE)
        if self.passages_table is None or self.papers_table is None:
            raise IndexNotBuilt("the passage index has not been built yet")
        self.acronyms_table = open_table(db, ACRONYMS_TABLE)
        self.min_probes, self.probe_share, self.refine_factor = nprobes, probe_share, refine_factor
        self.nprobes = self._probes()
        self._prewarm_started = False
        self._prewarm_threads: list[threading.Thread] = []
        self._admitted_counts: dict[tuple, int] = {}
        schema = self.passages_table.schema
        self.dimension = schema.field("vector").type.list_size
        # the model that built the vectors (name and weights fingerprint), if the index recorded it
        self.model_identity = model_identity.of_schema(schema)
        self.paper_columns = set(self.papers_table.schema.names)

    def version(self) -> str:
        return f"{self.passages_table.version}:{self.papers_table.version}"

    def after_query(self) -> None:
        """Called after each search: the first one starts `prewarm_in_background`. Not at open: loading whole
        indexes while the first query runs slowed it on 2 cores (1M passages: 1.29 s to the first answer without
        prewarming, 1.6-2.0 s with it), and the first query needs only the posting lists and IVF partitions it
        touches; loading the rest afterwards spares the next ~100 queries those loads."""
        if not self._prewarm_started:
            self._prewarm_started = True
            self._prewarm_threads = self.prewarm_in_background()

    def prewarm_in_background(self) -> list[threading.Thread]:
        """Loads the vector and full-text indexes in daemon threads (one per index): at 1M passages the IVF_SQ
        partitions take ~0.5 s and the full-text index ~0.4 s, otherwise loaded piecemeal by the queries that
        need them. A hint only: an index LanceDB cannot prewarm is skipped, and a query never waits for these."""

        def prewarm(table, name: str) -> None:
            try:
                table.prewarm_index(name)
            except (RuntimeError, ValueError, OSError) as error:
                log.debug("cannot prewarm %s: %s", name, error)

        threads = [
            threading.Thread(
                target=prewarm,
                args=(table, index.name),
                name=f"lumina-prewarm-{table.name}.{index.name}",
                daemon=True,
            )
            for table in (self.passages_table, self.papers_table)
            for index in table.list_indices()
            if index.index_type.startswith(("FTS", "Ivf"))
        ]
        for thread in threads:
            thread.start()
        return threads

    def wait_until_warm(self, timeout: float | None = None) -> bool:
        """Block until the index prewarm a first query started has finished (a measurement then sees the steady
        state; queries never wait for it). False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._prewarm_threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._prewarm_threads)

    def empty(self) -> bool:
        """Counted when the store opens or re-checks out its tables, not per query."""
        if getattr(self, "_empty", None) is None:
            self._empty = self.passages_table.count_rows() == 0
        return self._empty

    def _probes(self) -> int:
        """IVF partitions a vector search probes, for the index as trained now (a retrain changes its size)."""
        from lumina_assets.indexing.lancedb_tables import ann_probes

        return ann_probes(self.passages_table, "vector", self.min_probes, self.probe_share)

    def checkout_latest(self) -> None:
        """See rows another process added since this one opened the tables."""
        for table in (self.passages_table, self.papers_table, self.acronyms_table):
            if table is not None:
                table.checkout_latest()
        self._empty = None
        self.nprobes = self._probes()

    def _vector_search(
        self, table, column: str, vector: np.ndarray, n: int, filters: Filters, fields: list[str]
    ):
        query = table._table.query().nearest_to(np.asarray(vector, dtype=np.float32)).column(column)
        query = query.distance_type("cosine").nprobes(self.nprobes)
        if self.refine_factor > 0:
            query = query.refine_factor(self.refine_factor)
        query = query.select(fields).limit(n)
        where = filters.sql()
        if where:
            query = query.where(where)  # an async vector query filters before the search (prefilter)
            if self._admitted_rows(table, where) <= EXACT_SEARCH_MAX_ROWS:
                query = query.bypass_vector_index()
        return _rows_on_loop(query)

    def _admitted_rows(self, table, where: str) -> int:
        """Rows a filter admits (scalar indexes answer it: ~3 ms at 1M), counted once per filter and table version.

        Why: the ANN index only scores the partitions it probes, so a selective filter (an author's 15 passages
        among 1M) left it 0-4 of them; at or below `EXACT_SEARCH_MAX_ROWS` the admitted rows are searched exactly
        (1M passages, 15 admitted: 4 ms)."""
        key = (table.name, table.version, where)
        count = self._admitted_counts.get(key)
        if count is None:
            if len(self._admitted_counts) > 256:
                self._admitted_counts.clear()
            count = self._admitted_counts[key] = table.count_rows(where)
        return count

    def passage_vector_run(self, vector, n, filters) -> Run:
        rows = self._vector_search(
            self.passages_table, "vector", vector, n, filters, ["passage_id", "paper_id", "_distance"]
        )
        return Run([(r["passage_id"], 1.0 - r["_distance"], r["paper_id"]) for r in rows])

    def start_text_runs(self, text: str, passage_n: int, paper_n: int, filters: Filters) -> dict[str, Future]:
        """The passage and paper full-text searches (those with n > 0), started now as one coroutine each on
        LanceDB's own event loop; each future gives a Run. Two Python threads blocking on the sync API cost more
        than the searches on a 2-core machine (10k passages, back to back under load: 47 ms a query that way, 27
        ms this way), and the query embedding runs meanwhile in the caller."""
        from lancedb.background_loop import LOOP

        words, where = fts_text(text), filters.sql()

        async def run(table, n: int, fields: list[str], passage_level: bool) -> Run:
            if not words or n <= 0:
                return Run([])
            # the sync table's async handle (lancedb 0.40, pinned): same checkout, no schema round trips per query
            query = table._table.query().nearest_to_text(words, columns="search_text").select(fields).limit(n)
            if where:
                query = query.where(where)
            rows = arrow_rows(await query.to_arrow())
            if passage_level:
                return Run([(r["passage_id"], r["_score"], r["paper_id"]) for r in rows])
            return Run([(r["paper_id"], r["_score"], r["paper_id"]) for r in rows])

        jobs = {
            "passage_fulltext": (self.passages_table, passage_n, ["passage_id", "paper_id", "_score"], True),
            "paper_fulltext": (self.papers_table, paper_n, ["paper_id", "_score"], False),
        }
        return {
            name: asyncio.run_coroutine_threadsafe(run(*job), LOOP.loop)
            for name, job in jobs.items()
            if job[1] > 0
        }

    def paper_vector_run(self, column, vector, n, filters) -> Run:
        rows = self._vector_search(self.papers_table, column, vector, n, filters, ["paper_id", "_distance"])
        return Run([(r["paper_id"], 1.0 - r["_distance"], r["paper_id"]) for r in rows])

    def passages(self, passage_ids) -> dict[str, dict]:
        ids = sorted(set(passage_ids))
        if not ids:
            return {}
        query = (
            self.passages_table.search()
            .where(sql_in("passage_id", ids))
            .select(PASSAGE_FIELDS)
            .limit(len(ids))
        )
        return {r["passage_id"]: r for r in _rows(query)}

    def paper_passage_rows(self, paper_ids) -> dict[str, list[dict]]:
        """Every passage of these papers (`CONTEXT_FIELDS` and vector): the rows contexts are built from."""
        ids = sorted(set(paper_ids))
        if not ids:
            return {}
        query = self.passages_table._table.query().where(sql_in("paper_id", ids))
        out: dict[str, list[dict]] = {}
        for row in _rows_on_loop(query.select([*CONTEXT_FIELDS, "vector"]).limit(1_000_000)):
            out.setdefault(row["paper_id"], []).append(row)
        return out

    def papers(self, paper_ids) -> dict[str, dict]:
        ids = sorted(set(paper_ids))
        if not ids:
            return {}
        query = self.papers_table.search().where(sql_in("paper_id", ids)).select(PAPER_FIELDS).limit(len(ids))
        return {r["paper_id"]: r for r in _rows(query)}

    def paper_vectors(self, paper_ids, column) -> np.ndarray:
        ids = list(paper_ids)
        if not ids:
            return np.zeros((0, self.dimension), dtype=np.float32)
        query = (
            self.papers_table.search()
            .where(sql_in("paper_id", ids))
            .select(["paper_id", column])
            .limit(len(ids))
        )
        by_id = {r["paper_id"]: r[column] for r in _rows(query)}
        return np.asarray([by_id[i] for i in ids if i in by_id], dtype=np.float32)

    def papers_by_author(self, last_names, limit) -> list[str]:
        if not last_names or "author_last_names" not in self.paper_columns:
            return []
        names = ",".join("'" + n.replace("'", "''") + "'" for n in last_names)
        query = (
            self.papers_table.search()
            .where(f"array_has_any(author_last_names, [{names}])")
            .select(["paper_id"])
        )
        return [r["paper_id"] for r in _rows(query.limit(limit))]

    def papers_by_venue(self, venues, limit) -> list[str]:
        """Papers whose venue contains any of `venues` (case-insensitive substring match)."""
        if not venues or "venue" not in self.paper_columns:
            return []
        clauses = " OR ".join(
            "strpos(lower(venue), '" + v.lower().replace("'", "''") + "') > 0" for v in venues if v
        )
        if not clauses:
            return []
        query = self.papers_table.search().where(f"venue IS NOT NULL AND ({clauses})").select(["paper_id"])
        return [r["paper_id"] for r in _rows(query.limit(limit))]

    def has_author(self, last_name) -> bool:
        return bool(last_name) and bool(self.papers_by_author([last_name], 1))

    def acronyms(self, shorts) -> dict[str, str]:
        if self.acronyms_table is None or not shorts:
            return {}
        query = (
            self.acronyms_table.search()
            .where(sql_in("short", sorted(set(shorts))))
            .select(["short", "long", "count"])
        )
        best: dict[str, tuple[int, str]] = {}
        for row in _rows(query.limit(10_000)):
            if row["count"] > best.get(row["short"], (0, ""))[0]:
                best[row["short"]] = (row["count"], row["long"])
        return {short: long for short, (_, long) in best.items()}


class MemoryStore(LanceStore):
    """Small corpora (below `SearchConfig.memory_max_passages`): passage vectors and display columns in memory
    (exact search by one matrix product, where LanceDB would scan every vector from disk per query; rows taken by
    position instead of a round trip per lookup), and both full-text searches answered by in-memory mirrors of
    LanceDB's full-text indexes (`fulltext_mirror`: same tokens, same BM25 scores), built in a background thread
    when the store opens; until they are ready LanceDB's own indexes answer, so a first query never waits."""

    def __init__(self, db, **kwargs) -> None:
        super().__init__(db, **kwargs)
        from lumina_assets.indexing.lancedb_tables import vectors_from_arrow

        table = self.passages_table.search().select([*PASSAGE_FIELDS, "search_text", "vector"])
        table = table.limit(max(self.passages_table.count_rows(), 1)).to_arrow().combine_chunks()
        passage_texts = table["search_text"]
        # Arrow columns in one chunk: compact, and a row is taken by position without a search across chunks
        self._rows = table.drop_columns(["vector", "search_text"])
        self._ids = table["passage_id"].to_pylist()
        self._paper_of = table["paper_id"].to_pylist()
        self._years = np.asarray(
            [y if y is not None else -1 for y in table["year"].to_pylist()], dtype=np.int32
        )
        self._vectors = vectors_from_arrow(table["vector"], self.dimension)
        self._position = {pid: i for i, pid in enumerate(self._ids)}
        self._by_paper: dict[str, list[int]] = {}
        for index, paper_id in enumerate(self._paper_of):
            self._by_paper.setdefault(paper_id, []).append(index)
        # what a context is built from, by position: a result page reads ~50 rows, and Arrow's take + conversion
        # of every column made 0.4 ms of a ~10 ms query. Neighbour ids as lists, title / DOI / URL once per paper,
        # the texts stay in Arrow.
        self._neighbours = self._rows.select(["prev_id", "next_id"]).to_pydict()
        firsts = [positions[0] for positions in self._by_paper.values()]
        paper_columns = self._rows.select(["title", "doi", "url"]).take(firsts).to_pydict()
        self._paper_display = {
            paper_id: dict(zip(paper_columns, values, strict=True))
            for paper_id, values in zip(
                self._by_paper, zip(*paper_columns.values(), strict=True), strict=True
            )
        }
        texts = self._rows["text"]
        self._texts = (
            texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
        )  # one chunk: no copy
        self.loaded_version = self.version()
        self._text_mirrors: tuple | None = None
        self.text_mirrors_ready = threading.Event()
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
            paper_years = np.asarray(
                [y if y is not None else -1 for y in papers["year"].to_pylist()], np.int32
            )
            self._text_mirrors = (
                FullTextMirror(passage_texts),
                FullTextMirror(papers["search_text"]),
                paper_ids,
                paper_years,
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
        """Boolean mask of the rows a filter lets through (None: no filter), as `Filters.admits` decides."""
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
        """The full-text runs from the in-memory mirrors (~0.3-1 ms each) once built, else from LanceDB."""
        if self._text_mirrors is None:
            return super().start_text_runs(text, passage_n, paper_n, filters)
        passage_index, paper_index, paper_ids, paper_years = self._text_mirrors
        words = fts_text(text)

        def passage_run() -> Run:
            admitted = self._admitted(filters, self._years, self._paper_of)
            hits = passage_index.top(words, passage_n, admitted) if words else []
            return Run([(self._ids[i], score, self._paper_of[i]) for i, score in hits])

        def paper_run() -> Run:
            admitted = self._admitted(filters, paper_years, paper_ids)
            hits = paper_index.top(words, paper_n, admitted) if words else []
            return Run([(paper_ids[i], score, paper_ids[i]) for i, score in hits])

        futures: dict[str, Future] = {}
        for name, n, run in (
            ("passage_fulltext", passage_n, passage_run),
            ("paper_fulltext", paper_n, paper_run),
        ):
            if n > 0:  # computed here: a hand-off to a thread costs as much as the search on 2 cores
                futures[name] = Future()
                futures[name].set_result(run())
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
) -> LanceStore:
    """The store for the current table versions: in memory up to `memory_max_passages` rows, else index-backed.
    A memory store is rebuilt when a table version changes (with `reload_in_background`, the loaded one keeps
    answering meanwhile); an index-backed one only re-checks out the tables."""
    from lumina_assets.indexing.lancedb_tables import PASSAGES_TABLE, open_table

    passages = open_table(db, PASSAGES_TABLE)
    if passages is None:
        raise IndexNotBuilt("the passage index has not been built yet")
    small = passages.count_rows() < memory_max_passages
    with _STORES_LOCK:
        key = (db_uri, small, nprobes, probe_share, refine_factor)
        store = _STORES.get(key)
        if store is not None:
            store.checkout_latest()
        stale_memory = not isinstance(store, MemoryStore) or store.loaded_version != store.version()
        options = {"nprobes": nprobes, "probe_share": probe_share, "refine_factor": refine_factor}
        if small and stale_memory and reload_in_background and isinstance(store, MemoryStore):
            _reload_in_background(key, db, options)
            return store  # the loaded version answers until the new one is in
        if small and stale_memory:
            store = MemoryStore(db, **options)
        elif store is None:
            store = LanceStore(db, nprobes=nprobes, probe_share=probe_share, refine_factor=refine_factor)
        for stale in [k for k in _STORES if k[0] == db_uri and k != key]:
            del _STORES[stale]
        _STORES[key] = store
    return store


def _reload_in_background(key: tuple, db, options: dict) -> None:
    """Load the new table version into a MemoryStore in a daemon thread and swap it in (called under
    _STORES_LOCK). Why: a server would otherwise stall the query that notices a new ingest batch while it loads
    (100k passages: 1-1.8 s); this way the new papers appear ~1 s later instead. Until its full-text mirrors are
    built the new store answers full text from LanceDB, as at start-up."""
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
