"""The alerts store: one SQLite database, `<data dir>/alerts/alerts.sqlite3` (WAL journal), holding `searches` (what
the user saved and when they last looked), `search_state` (per search, the papers already seen in its top k) and
`hits` (papers that newly entered a search's top k, indexed by search and time). Writes are transactions; alert runs
also take a file lock. Earlier versions' JSON files are migrated on first use and renamed (`.migrated`, a damaged
one `.unreadable`), so nothing is lost. The saved-search logic over it is `search.saved_searches`."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lumina_assets.core import settings
from lumina_assets.search.request import FILTER_FIELDS, SearchRequest

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_SEARCHES = 200
MAX_HITS_PER_SEARCH = 500  # the oldest hits leave first; the feed shows the newest
DATABASE = "alerts.sqlite3"
VERSION = 1  # PRAGMA user_version of the store's shape
BUSY_TIMEOUT_S = 10.0
MAX_OLD_FILE_BYTES = 256 * 1024 * 1024  # hits.json at the caps is about 75 MB
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


_FOLDER: list[Path] = []  # set by `stored_in` (benches and tools); empty: under the data folder


def alerts_dir() -> Path:
    return _FOLDER[-1] if _FOLDER else settings.data_dir() / "alerts"


@contextlib.contextmanager
def stored_in(folder: Path) -> Iterator[None]:
    """Use the alerts store in `folder` for the block (a bench's scratch store, never the user's)."""
    _FOLDER.append(Path(folder))
    try:
        yield
    finally:
        _FOLDER.pop()


def database_path() -> Path:
    return alerts_dir() / DATABASE


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive lock across threads and processes (alert runs take it so two runs evaluate one by one)."""
    folder = alerts_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _unreadable(path: Path, error: BaseException) -> StoreUnreadable:
    return StoreUnreadable(
        f"the alerts store {path} cannot be read ({error}): move it away (saved searches and hits start "
        "afresh) or restore it from a backup"
    )


@contextlib.contextmanager
def connect(*, write: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection to the store (made and migrated on first use); `write`: one IMMEDIATE transaction, committed
    when the block ends. StoreUnreadable when the file is not a usable database (damaged, another shape, written
    by a newer version) or stays locked past BUSY_TIMEOUT_S."""
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
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        else:
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
        try:
            for statement in TABLES:
                db.execute(statement)
            _migrate_json(db)
            db.execute(f"PRAGMA user_version = {VERSION}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


# ---------------------------------------------------------------- the JSON files of earlier versions


def _read_old(path: Path):
    """A JSON file of an earlier version, or None; bytes that are not UTF-8 (Latin-1) are replaced. A file far past
    what the caps let an earlier version write is set aside unread (reading it would hold up the first request)."""
    try:
        size = path.stat().st_size
        if size > MAX_OLD_FILE_BYTES:
            log.warning("%s holds %d bytes, past the caps: renamed to %s.unreadable", path, size, path.name)
            return _set_aside(path, "unreadable")
        return json.loads(path.read_bytes().decode("utf-8", errors="replace"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as error:
        log.warning("%s is unreadable (%s): renamed to %s.unreadable", path, error, path.name)
        return _set_aside(path, "unreadable")


def _set_aside(path: Path, suffix: str) -> None:
    with contextlib.suppress(OSError):
        path.replace(path.with_name(f"{path.name}.{suffix}"))
    return None


def _old_search(entry) -> SavedSearch | None:
    """A saved search of the JSON file, its known fields only (a newer version may have written more)."""
    if not isinstance(entry, dict):
        return None
    name, query, k = entry.get("name"), entry.get("query"), entry.get("k", 10)
    filters = entry.get("filters") or {}
    if not (isinstance(name, str) and NAME.match(name) and isinstance(query, str) and query.strip()):
        return None
    if isinstance(k, bool) or not isinstance(k, int) or not isinstance(filters, dict):
        return None
    created = entry.get("created_at") if isinstance(entry.get("created_at"), str) else now()
    seen = entry.get("seen_at") if isinstance(entry.get("seen_at"), str) else None
    search_id = entry.get("id") if isinstance(entry.get("id"), str) and entry.get("id") else None
    return SavedSearch(
        name=name,
        query=query,
        filters={key: value for key, value in filters.items() if key in FILTER_FIELDS},
        k=k,
        id=search_id or hashlib.sha256(f"{name}|{created}".encode()).hexdigest()[:16],
        created_at=created,
        seen_at=seen,
    )


def _migrate_json(db: sqlite3.Connection) -> None:
    """Move what is usable of saved_searches.json and hits.json into the database; entries that are not usable
    are logged and the files renamed, so nothing is lost."""
    folder = alerts_dir()
    searches_file, hits_file = folder / "saved_searches.json", folder / "hits.json"
    raw = _read_old(searches_file)
    if raw is not None:
        entries = raw.get("searches") if isinstance(raw, dict) else None
        if not isinstance(entries, list):
            log.warning("%s holds no list of searches: renamed to .unreadable", searches_file)
            _set_aside(searches_file, "unreadable")
            entries = []
        kept = 0
        for entry in entries[:MAX_SEARCHES]:
            search = _old_search(entry)
            if search is None:
                log.warning("%s: an unusable saved search left out: %.200r", searches_file, entry)
                continue
            with contextlib.suppress(sqlite3.IntegrityError):  # a repeated name or id: the first is kept
                insert_search(db, search)
                kept += 1
        if searches_file.exists():
            _set_aside(searches_file, "migrated")
        log.info("%d saved search(es) moved from %s into %s", kept, searches_file.name, DATABASE)
    state = _read_old(hits_file)
    if state is None:
        return
    if not isinstance(state, dict):
        log.warning("%s is not a hits file: renamed to .unreadable", hits_file)
        _set_aside(hits_file, "unreadable")
        return
    known = {row[0] for row in db.execute("SELECT id FROM searches")}
    entries = state.get("searches") if isinstance(state.get("searches"), dict) else {}
    for search_id, entry in entries.items():
        if search_id in known and isinstance(entry, dict) and isinstance(entry.get("known"), list):
            put_state(db, search_id, entry)
    hits = state.get("hits") if isinstance(state.get("hits"), list) else []
    usable = [
        hit
        for hit in hits
        if isinstance(hit, dict)
        and hit.get("search_id") in known
        and isinstance(hit.get("paper_id"), str)
        and isinstance(hit.get("found_at"), str)
    ]
    insert_hits(db, usable)
    trim(db)
    if len(usable) < len(hits):
        log.warning(
            "%s: %d hit(s) left out (unusable, or of a search that was not moved)",
            hits_file,
            len(hits) - len(usable),
        )
    _set_aside(hits_file, "migrated")


# ---------------------------------------------------------------- rows


def insert_search(db: sqlite3.Connection, search: SavedSearch) -> None:
    db.execute(
        "INSERT INTO searches (id, name, query, filters, k, created_at, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            search.id,
            search.name,
            search.query,
            json.dumps(search.filters, ensure_ascii=False, sort_keys=True),
            search.k,
            search.created_at,
            search.seen_at,
        ),
    )


def search_from_row(row) -> SavedSearch:
    search_id, name, query, filters, k, created_at, seen_at = row
    return SavedSearch(
        name=name,
        query=query,
        filters=json.loads(filters),
        k=k,
        id=search_id,
        created_at=created_at,
        seen_at=seen_at,
    )


SEARCH_COLUMNS = "id, name, query, filters, k, created_at, seen_at"


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


def trim(db: sqlite3.Connection, search_ids=None) -> None:
    """Each search keeps its MAX_HITS_PER_SEARCH newest hits; hits of searches no longer saved go."""
    db.execute("DELETE FROM hits WHERE search_id NOT IN (SELECT id FROM searches)")
    ids = search_ids if search_ids is not None else [row[0] for row in db.execute("SELECT id FROM searches")]
    for search_id in ids:
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


def new_hits_count(db: sqlite3.Connection, search: SavedSearch) -> int:
    """Hits found since the user last looked, counted on the (search, time) index."""
    [(count,)] = db.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM hits WHERE search_id = ? AND found_at > ? LIMIT ?)",
        (search.id, search.seen_at or "", MAX_HITS_PER_SEARCH),
    )
    return count
