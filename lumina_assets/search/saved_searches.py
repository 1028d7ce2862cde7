"""Saved searches (the queries a researcher wants alerts for) and the hits the `alert_hits` asset recorded for them.

Two JSON files under `<data dir>/alerts/`, each with one writer so no write can undo another's:
- `saved_searches.json`: what the user saved (`lumina alerts`, the API, the page) and when they last looked;
- `hits.json`: written only by the `alert_hits` asset: per search, the papers already seen in its top k and the
  hits (papers that newly entered it), each with the ingest batch that brought the paper in.

A search is keyed by an `id` made when it is saved, so a search removed and saved again under the same name starts
afresh instead of inheriting the old one's hits. Every write is atomic (temp file, then rename) and read-modify-write
runs under a file lock, so the API's threads, the CLI and a Dagster run can share the files."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lumina_assets.core import settings, tables
from lumina_assets.search.request import BadRequest, SearchRequest

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
FILTER_FIELDS = ("year_min", "year_max", "author", "venue", "tag", "collection")
MAX_SEARCHES = 200
MAX_HITS_PER_SEARCH = 500  # the oldest hits leave first; the feed shows the newest


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


def _searches_path() -> Path:
    return alerts_dir() / "saved_searches.json"


def _hits_path() -> Path:
    return alerts_dir() / "hits.json"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """An exclusive lock for one file's read-modify-write, across threads and processes."""
    folder = alerts_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f".{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as error:
        raise RuntimeError(f"{path} is unreadable ({error}); move it away to start afresh") from None


def _write_json(path: Path, value) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)
    tables.atomic_replace(path, lambda temp: temp.write_text(text, encoding="utf-8"))


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
    raw = _read_json(_searches_path(), {"searches": []})
    return [SavedSearch(**entry) for entry in raw.get("searches", [])]


def _store(searches: list[SavedSearch]) -> None:
    _write_json(_searches_path(), {"searches": [asdict(s) for s in searches]})


def get(name: str) -> SavedSearch:
    for search in load():
        if search.name == name:
            return search
    raise UnknownSearch(name)


def add(search: SavedSearch) -> SavedSearch:
    """Save a validated search; DuplicateName when the name is taken."""
    with _locked("searches"):
        searches = load()
        if any(s.name == search.name for s in searches):
            raise DuplicateName(search.name)
        if len(searches) >= MAX_SEARCHES:
            raise BadRequest(f"at most {MAX_SEARCHES} saved searches")
        search.created_at = now()
        search.id = hashlib.sha256(f"{search.name}|{search.created_at}".encode()).hexdigest()[:16]
        search.seen_at = search.created_at
        _store([*searches, search])
    return search


def remove(name: str) -> None:
    with _locked("searches"):
        searches = load()
        kept = [s for s in searches if s.name != name]
        if len(kept) == len(searches):
            raise UnknownSearch(name)
        _store(kept)


def mark_seen(name: str) -> None:
    """The user has looked at the search's hits: its "new" count starts again from zero."""
    with _locked("searches"):
        searches = load()
        for search in searches:
            if search.name == name:
                search.seen_at = now()
                _store(searches)
                return
    raise UnknownSearch(name)


# ---------------------------------------------------------------- hits


def read_hits_state() -> dict:
    """{"searches": {search id: {"known": [paper ids], "evaluated_at": ...}}, "hits": [hit, ...]}."""
    state = _read_json(_hits_path(), {})
    state.setdefault("searches", {})
    state.setdefault("hits", [])
    return state


@contextlib.contextmanager
def updating_hits() -> Iterator[dict]:
    """The hits state to change in place, written back when the block ends, all under the hits lock: two alert runs
    that overlap (two index runs in quick succession) evaluate one after the other, never from the same state."""
    with _locked("hits"):
        state = read_hits_state()
        yield state
        _write_hits(state)


def write_hits_state(state: dict) -> None:
    with _locked("hits"):
        _write_hits(state)


def _write_hits(state: dict) -> None:
    by_search: dict[str, list[dict]] = {}
    for hit in state["hits"]:
        by_search.setdefault(hit["search_id"], []).append(hit)
    state["hits"] = [
        hit
        for hits in by_search.values()
        for hit in sorted(hits, key=lambda h: h["found_at"])[-MAX_HITS_PER_SEARCH:]
    ]
    _write_json(_hits_path(), state)


def hits_for(search: SavedSearch, state: dict | None = None) -> list[dict]:
    """The search's hits, newest first."""
    state = read_hits_state() if state is None else state
    found = [h for h in state["hits"] if h["search_id"] == search.id]
    return sorted(found, key=lambda h: (h["found_at"], -h.get("rank", 0)), reverse=True)


def new_count(search: SavedSearch, state: dict | None = None) -> int:
    """Hits found since the user last looked."""
    return sum(1 for h in hits_for(search, state) if not search.seen_at or h["found_at"] > search.seen_at)


def summary(search: SavedSearch, state: dict | None = None) -> dict:
    """What `GET /api/alerts` and `lumina alerts list` show of a search."""
    return {
        "name": search.name,
        "query": search.query,
        "filters": search.filters,
        "k": search.k,
        "new_count": new_count(search, state),
        "feed_url": search.feed_path(),
    }
