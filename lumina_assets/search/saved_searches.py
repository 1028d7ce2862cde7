"""Saved searches (the queries a researcher wants alerts for) and the hits recorded for them, over
`search.alerts_store`. A search is keyed by an `id` made when it is saved, so one removed and saved again under the
same name starts afresh."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator

from lumina_assets.search.alerts_store import (
    MAX_HITS_PER_SEARCH,
    MAX_SEARCHES,
    NAME,
    SEARCH_COLUMNS,
    SavedSearch,
    StoreUnreadable,  # noqa: F401 - re-exported for callers
    alerts_dir,  # noqa: F401 - re-exported for callers
    connect,
    database_path,  # noqa: F401 - re-exported for callers
    insert_hits,
    insert_search,
    locked,
    new_hits_count,
    now,
    put_state,
    search_from_row,
    states,
    stored_in,  # noqa: F401 - re-exported for callers
    trim,
)
from lumina_assets.search.request import FILTER_FIELDS, BadRequest


class DuplicateName(ValueError):
    """A saved search of that name exists already."""


class UnknownSearch(KeyError):
    """No saved search of that name."""


# ---------------------------------------------------------------- saved searches


def validate(name, query, filters, k) -> SavedSearch:
    """A SavedSearch from untrusted input, or BadRequest saying what is wrong: the name is a file-name-safe word
    (it is part of the feed's URL), the query and filters are what a search request accepts."""
    if not isinstance(name, str) or not NAME.match(name):
        raise BadRequest(
            "name must be 1-64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if filters is None:
        filters = {}
    if not isinstance(filters, dict):
        raise BadRequest("filters must be an object")
    unknown = set(filters) - set(FILTER_FIELDS)
    if unknown:
        raise BadRequest(
            f"unknown filter(s): {', '.join(sorted(map(str, unknown)))} (known: {', '.join(FILTER_FIELDS)})"
        )
    if isinstance(k, bool) or not isinstance(k, int):
        raise BadRequest("k must be an integer")
    search = SavedSearch(
        name=name, query=query if isinstance(query, str) else None, filters=dict(filters), k=k
    )
    request = search.request()  # raises BadRequest for a bad query, k or filter value
    search.query = request.query
    search.filters = {key: value for key, value in filters.items() if value not in (None, "")}
    return search


def name_from_query(query: str) -> str:
    """A default name: the query's first words, file-name safe."""
    words = re.findall(r"[A-Za-z0-9]+", query.lower())[:6]
    name = "-".join(words)[:64].strip("-")
    return name or "search-" + hashlib.sha256(query.encode()).hexdigest()[:8]


def load() -> list[SavedSearch]:
    with connect() as db:
        rows = db.execute(f"SELECT {SEARCH_COLUMNS} FROM searches ORDER BY position LIMIT ?", (MAX_SEARCHES,))
        return [search_from_row(row) for row in rows]


def get(name: str) -> SavedSearch:
    with connect() as db:
        row = db.execute(f"SELECT {SEARCH_COLUMNS} FROM searches WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise UnknownSearch(name)
    return search_from_row(row)


def add(search: SavedSearch) -> SavedSearch:
    """Save a validated search; DuplicateName when the name is taken."""
    with connect(write=True) as db:
        if db.execute("SELECT 1 FROM searches WHERE name = ?", (search.name,)).fetchone():
            raise DuplicateName(search.name)
        [(count,)] = db.execute("SELECT COUNT(*) FROM searches")
        if count >= MAX_SEARCHES:
            raise BadRequest(f"at most {MAX_SEARCHES} saved searches")
        search.created_at = now()
        search.id = hashlib.sha256(f"{search.name}|{search.created_at}".encode()).hexdigest()[:16]
        search.seen_at = search.created_at
        insert_search(db, search)
    return search


def remove(name: str) -> None:
    """Forget a saved search with its state and hits."""
    with connect(write=True) as db:
        row = db.execute("SELECT id FROM searches WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise UnknownSearch(name)
        for table, column in (("hits", "search_id"), ("search_state", "search_id"), ("searches", "id")):
            db.execute(f"DELETE FROM {table} WHERE {column} = ?", row)


def mark_seen(name: str) -> None:
    """The user has looked at the search's hits: its "new" count starts again from zero."""
    with connect(write=True) as db:
        if db.execute("UPDATE searches SET seen_at = ? WHERE name = ?", (now(), name)).rowcount == 0:
            raise UnknownSearch(name)


# ---------------------------------------------------------------- hits


def read_hits_state() -> dict:
    """Everything, as one dict: {"searches": {search id: {"known": [paper ids], "evaluated_at": ...}},
    "hits": [hit, ...]} (for tests and tools; the page and the CLI ask the database for what they show)."""
    with connect() as db:
        return {
            "searches": states(db),
            "hits": [json.loads(row[0]) for row in db.execute("SELECT hit FROM hits")],
        }


@contextlib.contextmanager
def updating_hits() -> Iterator[dict]:
    """The alert run's state to change in place: {"searches": every search's known papers, "hits": []}; the hits
    appended are stored when the block ends, in one short transaction. A file lock makes overlapping runs evaluate
    one after the other; saving or removing a search meanwhile is not held up."""
    with locked("hits"):
        with connect() as db:
            state = {"searches": states(db), "hits": []}
        yield state
        with connect(write=True) as db:
            live = {row[0] for row in db.execute("SELECT id FROM searches")}
            db.execute("DELETE FROM search_state")
            for search_id, entry in state["searches"].items():
                if search_id in live:
                    put_state(db, search_id, entry)
            insert_hits(db, [hit for hit in state["hits"] if hit["search_id"] in live])
            trim(db, {hit["search_id"] for hit in state["hits"]} & live)


def hits_for(search: SavedSearch, state: dict | None = None) -> list[dict]:
    """The search's hits, newest first (at most MAX_HITS_PER_SEARCH)."""
    if state is not None:
        found = [h for h in state["hits"] if h["search_id"] == search.id]
        return sorted(found, key=lambda h: (h["found_at"], -h.get("rank", 0)), reverse=True)
    with connect() as db:
        rows = db.execute(
            "SELECT hit FROM hits WHERE search_id = ? ORDER BY found_at DESC, rank ASC LIMIT ?",
            (search.id, MAX_HITS_PER_SEARCH),
        )
        return [json.loads(row[0]) for row in rows]


def new_count(search: SavedSearch, state: dict | None = None) -> int:
    """Hits found since the user last looked (counted on the (search, time) index)."""
    if state is not None:
        return sum(1 for h in hits_for(search, state) if not search.seen_at or h["found_at"] > search.seen_at)
    with connect() as db:
        return new_hits_count(db, search)


def summary(search: SavedSearch, state: dict | None = None, *, count: int | None = None) -> dict:
    """What `GET /api/alerts` and `lumina alerts list` show of a search."""
    return {
        "name": search.name,
        "query": search.query,
        "filters": search.filters,
        "k": search.k,
        "new_count": new_count(search, state) if count is None else count,
        "feed_url": search.feed_path(),
    }


def summaries() -> list[dict]:
    """Every saved search's summary, read in one connection: one indexed count per search."""
    with connect() as db:
        rows = db.execute(f"SELECT {SEARCH_COLUMNS} FROM searches ORDER BY position LIMIT ?", (MAX_SEARCHES,))
        searches = [search_from_row(row) for row in rows]
        return [summary(search, count=new_hits_count(db, search)) for search in searches]
