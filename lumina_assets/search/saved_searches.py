"""Saved searches and their hits in one SQLite database, `<data dir>/alerts/alerts.sqlite3` (WAL): `searches`,
`search_state` (each search's papers already seen) and `hits` (indexed by search and time). A search is keyed by an
`id` made when it is saved, so one removed and saved again under the same name starts afresh."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from lumina_assets.core import settings
from lumina_assets.search.request import FILTER_FIELDS, BadRequest, SearchRequest

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_SEARCHES = 200
MAX_HITS_PER_SEARCH = 500  # the oldest hits leave first; the feed shows the newest
DATABASE = "alerts.sqlite3"
VERSION = 1  # PRAGMA user_version of the store's shape
BUSY_TIMEOUT_S = 10.0
TABLES = (
    "CREATE TABLE IF NOT EXISTS searches (position INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
    "name TEXT NOT NULL UNIQUE, query TEXT NOT NULL, filters TEXT NOT NULL, k INTEGER NOT NULL, "
    "created_at TEXT NOT NULL, seen_at TEXT)",
    "CREATE TABLE IF NOT EXISTS search_state (search_id TEXT PRIMARY KEY, name TEXT, evaluated_at TEXT, "
    "known TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hits (search_id TEXT NOT NULL, paper_id TEXT NOT NULL, found_at TEXT NOT NULL, "
    "rank INTEGER NOT NULL DEFAULT 0, hit TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS hits_by_search ON hits (search_id, found_at)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
)


class StoreUnreadable(RuntimeError):
    """The alerts database cannot be read; the message names it and what to do."""


class DuplicateName(ValueError):
    """A saved search of that name exists already."""


class UnknownSearch(KeyError):
    """No saved search of that name."""


@dataclass
class SavedSearch:
    name: str
    query: str
    filters: dict = field(default_factory=dict)
    k: int = 10
    id: str = ""
    created_at: str = ""
    seen_at: str | None = None  # when the user last looked at its hits (POST .../seen); None: never

    def request(self) -> SearchRequest:
        """The search it runs (validated as the API validates a search)."""
        return SearchRequest.from_mapping(
            {"query": self.query, "k": self.k, "overview": False, **self.filters}
        )

    def feed_path(self) -> str:
        return f"/feeds/{self.name}.xml"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def alerts_dir() -> Path:
    return settings.data_dir() / "alerts"


def database_path() -> Path:
    return alerts_dir() / DATABASE


def locked(name: str) -> FileLock:
    """An exclusive lock across threads and processes (alert runs take it so two runs evaluate one by one)."""
    alerts_dir().mkdir(parents=True, exist_ok=True)
    return FileLock(alerts_dir() / f".{name}.lock")


def _unreadable(path: Path, error: BaseException) -> StoreUnreadable:
    return StoreUnreadable(
        f"the alerts store {path} cannot be read ({error}): move it away (saved searches and hits start "
        "afresh) or restore it from a backup"
    )


@contextlib.contextmanager
def connect(*, write: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection to the store (made on first use); `write`: one IMMEDIATE transaction. StoreUnreadable when the
    file is not a usable database (damaged, another shape, a newer version) or stays locked past BUSY_TIMEOUT_S."""
    path = database_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as error:
        raise _unreadable(path, error) from None
    try:
        _prepare(db)
        if write:
            db.execute("BEGIN IMMEDIATE")
        with db:  # commits a write transaction, or rolls it back on an error
            yield db
    except sqlite3.IntegrityError:
        raise
    except sqlite3.DatabaseError as error:
        if "locked" in str(error) or "busy" in str(error):
            raise StoreUnreadable(f"the alerts store {path} is busy in another process; try again") from None
        raise _unreadable(path, error) from None
    finally:
        db.close()


def _prepare(db: sqlite3.Connection) -> None:
    [(version,)] = db.execute("PRAGMA user_version")
    if version == VERSION:
        return
    if version > VERSION:
        raise sqlite3.DatabaseError(f"written by a newer Lumina (store version {version})")
    # one process makes the store at a time: switching to WAL answers "locked" at once, without the busy timeout
    with locked("store-setup"):
        [(version,)] = db.execute("PRAGMA user_version")  # another process may have made it meanwhile
        if version == VERSION:
            return
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("BEGIN IMMEDIATE")
        with db:
            for statement in TABLES:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {VERSION}")


SEARCH_COLUMNS = "id, name, query, filters, k, created_at, seen_at"


def insert_search(db: sqlite3.Connection, search: SavedSearch) -> None:
    db.execute(
        f"INSERT INTO searches ({SEARCH_COLUMNS}) VALUES (:id, :name, :query, :filters, :k, :created_at, :seen_at)",
        {**asdict(search), "filters": json.dumps(search.filters, ensure_ascii=False, sort_keys=True)},
    )


def search_from_row(row) -> SavedSearch:
    values = dict(zip(SEARCH_COLUMNS.split(", "), row, strict=True))
    return SavedSearch(**{**values, "filters": json.loads(values["filters"])})


def put_state(db: sqlite3.Connection, search_id: str, entry: dict) -> None:
    db.execute(
        "INSERT OR REPLACE INTO search_state (search_id, name, evaluated_at, known) VALUES (?, ?, ?, ?)",
        (
            search_id,
            entry.get("name"),
            entry.get("evaluated_at"),
            json.dumps([str(p) for p in entry.get("known") or []]),
        ),
    )


def insert_hits(db: sqlite3.Connection, hits: list[dict]) -> None:
    db.executemany(
        "INSERT INTO hits (search_id, paper_id, found_at, rank, hit) VALUES (?, ?, ?, ?, ?)",
        [
            (
                hit["search_id"],
                hit["paper_id"],
                hit["found_at"],
                hit.get("rank") if isinstance(hit.get("rank"), int) else 0,
                json.dumps(hit, ensure_ascii=False, sort_keys=True),
            )
            for hit in hits
        ],
    )


def trim(db: sqlite3.Connection, search_ids) -> None:
    """Each of `search_ids` keeps its MAX_HITS_PER_SEARCH newest hits; hits of searches no longer saved go."""
    db.execute("DELETE FROM hits WHERE search_id NOT IN (SELECT id FROM searches)")
    for search_id in search_ids:
        db.execute(
            "DELETE FROM hits WHERE search_id = ? AND rowid NOT IN (SELECT rowid FROM hits WHERE search_id = ? "
            "ORDER BY found_at DESC, rank ASC LIMIT ?)",
            (search_id, search_id, MAX_HITS_PER_SEARCH),
        )


def states(db: sqlite3.Connection) -> dict:
    """Every search's state by search id: its known papers, name and when it was last evaluated."""
    return {
        search_id: {"known": json.loads(known), "name": name, "evaluated_at": evaluated_at}
        for search_id, name, evaluated_at, known in db.execute(
            "SELECT search_id, name, evaluated_at, known FROM search_state"
        )
    }


def _new_hits(db: sqlite3.Connection, search: SavedSearch) -> int:
    """Hits found since the user last looked, counted on the (search, time) index."""
    [(count,)] = db.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM hits WHERE search_id = ? AND found_at > ? LIMIT ?)",
        (search.id, search.seen_at or "", MAX_HITS_PER_SEARCH),
    )
    return count


def _saved(db: sqlite3.Connection) -> list[SavedSearch]:
    rows = db.execute(f"SELECT {SEARCH_COLUMNS} FROM searches ORDER BY position LIMIT ?", (MAX_SEARCHES,))
    return [search_from_row(row) for row in rows]


def validate(name, query, filters, k) -> SavedSearch:
    """A SavedSearch from untrusted input, or BadRequest saying what is wrong: the name is a file-name-safe word
    (it is part of the feed's URL), the query and filters are what a search request accepts."""
    if not isinstance(name, str) or not NAME.match(name):
        raise BadRequest(
            "name must be 1-64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    filters = {} if filters is None else filters
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
        return _saved(db)


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


@contextlib.contextmanager
def updating_hits() -> Iterator[dict]:
    """The alert run's state to change in place, {"searches": each search's known papers, "hits": []}, stored when
    the block ends in one short transaction; a file lock serialises overlapping runs."""
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


def hits_for(search: SavedSearch) -> list[dict]:
    """The search's hits, newest first (at most MAX_HITS_PER_SEARCH)."""
    with connect() as db:
        rows = db.execute(
            "SELECT hit FROM hits WHERE search_id = ? ORDER BY found_at DESC, rank ASC LIMIT ?",
            (search.id, MAX_HITS_PER_SEARCH),
        )
        return [json.loads(row[0]) for row in rows]


def summaries() -> list[dict]:
    """What `GET /api/alerts` and `lumina alerts list` show of every saved search, read in one connection: one
    indexed count per search."""
    with connect() as db:
        return [
            {
                "name": search.name,
                "query": search.query,
                "filters": search.filters,
                "k": search.k,
                "new_count": _new_hits(db, search),
                "feed_url": search.feed_path(),
            }
            for search in _saved(db)
        ]
