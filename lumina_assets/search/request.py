"""What a search request may ask, validated and bounded before it reaches the engine: every entry point builds a
`SearchRequest` through `from_mapping`, so all refuse the same inputs with the same message (`BadRequest`). Types
are strict: JSON integers and booleans in a body; digits and true / false / 1 / 0 in a query string."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lumina_assets.search.query_parser import year_syntax

MAX_QUERY_CHARS = 1000
MAX_K = 50
MAX_PAGE = 20
MAX_FIELD_CHARS = 200
MAX_DEPTH = 200  # k × page: how deep one request may page into the ranking
SORTS = ("relevance", "date")
# the UI filters; tag and collection are a reference library's labels
FILTER_FIELDS = ("year_min", "year_max", "author", "venue", "tag", "collection")
FIELDS = frozenset({"query", "q", "k", "page", "overview", "widen", "sort", *FILTER_FIELDS})
DIGITS = re.compile(r"-?[0-9]{1,12}")
FLAG_WORDS = {"true": True, "1": True, "false": False, "0": False}
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def index_key(db_uri: str) -> str:
    """A short hash of the index a server answers from (in `/api/health`): `lumina search` compares it with its
    own index's before asking the server, and the path itself stays out of the response."""
    import hashlib

    return hashlib.sha256(str(db_uri).encode("utf-8", "surrogateescape")).hexdigest()[:16]


class BadRequest(ValueError):
    """A request the API refuses, with the message the client sees."""


def decode_json_body(body: bytes) -> Any:
    """The JSON value of a request body, or BadRequest saying what is wrong with it (not UTF-8, malformed, nested
    too deep, NaN / Infinity, escaped lone surrogates): a decoding problem is the client's, never a 5xx."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body is not UTF-8") from None
    try:
        value = json.loads(text or "null", parse_constant=_refuse_constant)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest("the body is not valid JSON (nested too deeply)") from None
    except ValueError:
        raise BadRequest("the body is not valid JSON") from None
    if _holds_lone_surrogate(value):
        raise BadRequest("the body holds a lone surrogate escape (\\ud800-\\udfff): not valid Unicode text")
    return value


def _refuse_constant(name: str):
    raise BadRequest(f"the body is not valid JSON ({name} is not a JSON number)")


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether any string (key or value) in a decoded JSON value holds a lone surrogate (iterative: a deep value
    cannot exhaust the stack)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


@dataclass
class SearchRequest:
    query: str
    k: int = 10
    page: int = 1
    year_min: int | None = None
    year_max: int | None = None
    author: str | None = None
    venue: str | None = None
    overview: bool = True
    widen: bool = False  # also list in-corpus papers the top results cite or are cited by
    sort: str = "relevance"  # or "date": the most relevant papers (results.DATE_SORT_POOL), newest first
    tag: str | None = None  # only papers with this tag in the user's reference library
    collection: str | None = None  # only papers in this library collection (or its sub-collections)

    @classmethod
    def from_mapping(cls, data: dict, *, from_query: bool = False) -> SearchRequest:
        """Validated and bounded; BadRequest with a message otherwise. `from_query`: the values come from a URL's
        query string (all strings), so integers and flags are read from their text, strictly."""
        if not isinstance(data, dict):
            raise BadRequest("the request must be a JSON object")
        unknown = set(data) - FIELDS
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
        query = data.get("query", data.get("q"))
        if not isinstance(query, str):
            raise BadRequest("query is required and must be a string")
        if len(query) > MAX_QUERY_CHARS:
            raise BadRequest(f"query is too long ({len(query)} characters; at most {MAX_QUERY_CHARS})")
        if CONTROL.search(query):
            raise BadRequest("query contains control characters")
        if LONE_SURROGATE.search(query):  # e.g. a command-line argument that was not UTF-8
            raise BadRequest("query holds a lone surrogate (\\ud800-\\udfff): not valid Unicode text")
        query = re.sub(r"\s+", " ", query).strip()
        if not query:
            raise BadRequest("query is empty")
        k = _int(data.get("k", 10), "k", 1, MAX_K, from_query=from_query)
        page = _int(data.get("page", 1), "page", 1, MAX_PAGE, from_query=from_query)
        if k * page > MAX_DEPTH:
            raise BadRequest(f"k × page must be at most {MAX_DEPTH} (got {k} × {page})")
        year_min = _int(data.get("year_min"), "year_min", 1000, 2999, optional=True, from_query=from_query)
        year_max = _int(data.get("year_max"), "year_max", 1000, 2999, optional=True, from_query=from_query)
        if year_min is not None and year_max is not None and year_min > year_max:
            raise BadRequest("year_min is after year_max")
        author = _text(data.get("author"), "author")
        venue = _text(data.get("venue"), "venue")
        overview = flag(data.get("overview", True), "overview", from_query=from_query)
        widen = flag(data.get("widen", False), "widen", from_query=from_query)
        sort = data.get("sort") or "relevance"
        if sort not in SORTS:
            raise BadRequest(f"sort must be one of {', '.join(SORTS)}")
        tag, collection = _text(data.get("tag"), "tag"), _text(data.get("collection"), "collection")
        return cls(query, k, page, year_min, year_max, author, venue, overview, widen, sort, tag, collection)

    def constrain(self, parsed):
        """`parsed` with the filter fields applied as given: a field that is set replaces what the text said for that
        kind of filter (the year range as a whole). The fields never pass through the parser."""
        from dataclasses import replace

        changes: dict = {}
        if self.year_min is not None or self.year_max is not None:
            changes.update(year_min=self.year_min, year_max=self.year_max, year_explicit=True)
        if self.author:
            changes.update(
                explicit_authors=[self.author],
                authors=[a for a in parsed.authors if a not in parsed.explicit_authors] + [self.author],
            )
        for name in ("venue", "tag", "collection"):
            if getattr(self, name):
                changes[f"explicit_{name}s"] = [getattr(self, name)]
        return replace(parsed, **changes) if changes else parsed

    def engine_query(self) -> str:
        """The query with UI filters written as explicit syntax: how the search reads to a person (the engine
        gets the fields themselves through `constrain`)."""
        years = year_syntax(self.year_min, self.year_max)
        parts = [self.query, *([years] if years else [])]
        parts += [f'{name}:"{getattr(self, name)}"' for name in FILTER_FIELDS[2:] if getattr(self, name)]
        return " ".join(parts)


def flag(value, name: str, *, from_query: bool) -> bool:
    """A boolean field: a JSON boolean, or from a query string true / false / 1 / 0."""
    if isinstance(value, bool):
        return value
    if from_query and isinstance(value, str) and value.lower() in FLAG_WORDS:
        return FLAG_WORDS[value.lower()]
    raise BadRequest(f"{name} must be a boolean (true or false)")


def _int(
    value, name: str, low: int, high: int, *, optional: bool = False, from_query: bool = False
) -> int | None:
    if value is None or (from_query and value == ""):
        if optional:
            return None
        raise BadRequest(f"{name} is required")
    if from_query and isinstance(value, str) and DIGITS.fullmatch(value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):  # "5", 5.0, 2.5, 1e400 (inf) are not integers
        raise BadRequest(f"{name} must be an integer")
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high} (got {value})")
    return value


def _text(value, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    if len(value) > MAX_FIELD_CHARS:
        raise BadRequest(f"{name} is too long (at most {MAX_FIELD_CHARS} characters)")
    if LONE_SURROGATE.search(value):
        raise BadRequest(f"{name} holds a lone surrogate (\\ud800-\\udfff): not valid Unicode text")
    if CONTROL.search(value) or '"' in value:
        raise BadRequest(f"{name} contains control characters or quotes")
    value = re.sub(r"\s+", " ", value).strip()
    return value or None
