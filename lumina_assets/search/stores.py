"""Where the search pipeline gets its candidates, each method for a handful of ids or a top-n list: `LanceStore` asks
LanceDB (vector search, the native full-text index, lookups by id, filters pushed down as prefilters);
`memory_store.MemoryStore` is the small-corpus fast path behind the same interface."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from lumina_assets.indexing.index_rows import PASSAGE_DISPLAY_FIELDS as PASSAGE_FIELDS
from lumina_assets.indexing.table_ops import sql_in
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.fusion import Run

log = logging.getLogger(__name__)

PAPER_FIELDS = ["paper_id", "title", "doi", "url", "year", "authors"]
# what a context is built from: fewer columns than a passage shows, so building one converts less to Python
CONTEXT_FIELDS = ["passage_id", "paper_id", "text", "prev_id", "next_id", "title", "doi", "url"]
_FTS_WORD = re.compile(r"\w+", re.UNICODE)

# a filter admitting at most this many rows is searched exactly: an ANN index probing a few percent of its
# partitions would find only the admitted rows that lie in them
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


def _sql_strings(values) -> str:
    return ",".join("'" + str(v).replace("'", "''") + "'" for v in values)


def fts_text(text: str, limit: int = 1000) -> str:
    """Words only: LanceDB's query parser must never see operators or quotes from user input."""
    return " ".join(_FTS_WORD.findall(text))[:limit]


def arrow_rows(table) -> list[dict]:
    """An Arrow table as row dicts, column by column (faster than `Table.to_pylist`)."""
    columns = table.to_pydict()
    names = list(columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def query_rows(query) -> list[dict]:
    return arrow_rows(query.to_arrow())


def rows_by_id(table, key: str, ids, columns: list[str]) -> dict[str, dict]:
    """The rows whose `key` is one of `ids`, by key (a scalar-indexed lookup of those rows only)."""
    ids = sorted(set(ids))
    if not ids:
        return {}
    query = table.search().where(sql_in(key, ids)).select(columns).limit(len(ids))
    return {r[key]: r for r in query_rows(query)}


def _rows_on_loop(query) -> list[dict]:
    """Rows of an async LanceDB query (a sync table's async handle, `table._table`; lancedb pinned), run on LanceDB's
    own event loop: faster per lookup than the sync API."""
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
        preload: bool = True,
    ) -> None:
        from lumina_assets.indexing import model_identity
        from lumina_assets.indexing.lancedb_tables import PAPERS_TABLE, PASSAGES_TABLE
        from lumina_assets.indexing.table_ops import open_table

        self.passages_table = open_table(db, PASSAGES_TABLE)
        self.papers_table = open_table(db, PAPERS_TABLE)
        if self.passages_table is None or self.papers_table is None:
            raise IndexNotBuilt("the passage index has not been built yet")
        self.min_probes, self.probe_share, self.refine_factor = nprobes, probe_share, refine_factor
        self.nprobes = self._probes()
        self.preload = preload  # search.index_cache: False under a cache bound the indexes would not fit in
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
        """After each search: the first starts `prewarm_in_background` (at open it would slow the first query)."""
        if not self._prewarm_started:
            self._prewarm_started = True
            if self.preload:  # else a cache bound the indexes do not fit in: queries load what they touch
                self._prewarm_threads = self.prewarm_in_background()

    def prewarm_in_background(self) -> list[threading.Thread]:
        """Loads the vector and full-text indexes in daemon threads, one per index; a query never waits for them."""

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
        """Block until the prewarm a first query started has finished (for measurements); False on timeout."""
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
        from lumina_assets.indexing.table_ops import ann_probes

        return ann_probes(self.passages_table, "vector", self.min_probes, self.probe_share)

    def checkout_latest(self) -> None:
        """See rows another process added since this one opened the tables."""
        for table in (self.passages_table, self.papers_table):
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
        """Rows a filter admits (scalar indexes answer it), counted once per filter and table version."""
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
        """The passage and paper full-text searches (those with n > 0), each started now as a coroutine on LanceDB's
        event loop; each future gives a Run."""
        from lancedb.background_loop import LOOP

        words, where = fts_text(text), filters.sql()

        async def run(table, n: int, fields: list[str], passage_level: bool) -> Run:
            if not words or n <= 0:
                return Run([])
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

    def passages(self, passage_ids) -> dict[str, dict]:
        return rows_by_id(self.passages_table, "passage_id", passage_ids, PASSAGE_FIELDS)

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
        return rows_by_id(self.papers_table, "paper_id", paper_ids, PAPER_FIELDS)

    def papers_by_author(self, last_names, limit) -> list[str]:
        if not last_names or "author_last_names" not in self.paper_columns:
            return []
        return self._paper_ids(f"array_has_any(author_last_names, [{_sql_strings(last_names)}])", limit)

    def papers_by_venue(self, venues, limit) -> list[str]:
        """Papers whose venue is any of `venues`, by whole words or a known name of the venue (search.venues)."""
        from lumina_assets.search.venues import prefilter_terms, venue_matches

        terms = sorted({t for v in venues or [] for t in prefilter_terms(v)})
        if not terms or "venue" not in self.paper_columns:
            return []
        clauses = " OR ".join(f"strpos(lower(venue), {_sql_strings([t])}) > 0" for t in terms)
        query = (
            self.papers_table.search()
            .where(f"venue IS NOT NULL AND ({clauses})")
            .select(["paper_id", "venue"])
        )
        rows = query_rows(query.limit(max(limit, 1) * 20))
        found = [r["paper_id"] for r in rows if any(venue_matches(r["venue"], v) for v in venues)]
        return found[:limit]

    def papers_with_labels(self, labels, limit) -> list[str]:
        """Papers carrying every one of `labels` (`tag:x`, `collection:a/b`: indexing's library_labels)."""
        if not labels or "library_labels" not in self.paper_columns:
            return []
        return self._paper_ids(f"array_has_all(library_labels, [{_sql_strings(labels)}])", limit)

    def _paper_ids(self, where: str, limit: int) -> list[str]:
        query = self.papers_table.search().where(where).select(["paper_id"]).limit(limit)
        return [r["paper_id"] for r in query_rows(query)]

    def has_author(self, last_name) -> bool:
        return bool(last_name) and bool(self.papers_by_author([last_name], 1))
