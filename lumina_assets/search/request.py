"""What a search request may ask, validated and bounded before it reaches the engine: the API, the CLI and the
web page build a `SearchRequest` through `from_mapping`, so every entry point refuses the same inputs with the same
message (`BadRequest`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_QUERY_CHARS = 1000
MAX_K = 50
MAX_PAGE = 20
MAX_FIELD_CHARS = 200
MAX_DEPTH = 200  # k × page: how deep one request may page into the ranking
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class BadRequest(ValueError):
    """A request the API refuses, with the message the client sees."""


def decode_json_body(body: bytes) -> Any:
    """The JSON value of a request body, or BadRequest saying what is wrong with it: bytes that are not UTF-8,
    malformed JSON, nesting too deep for the parser, the non-standard constants NaN / Infinity, and escaped lone
    surrogates (`"\\ud800"`, valid JSON but not Unicode text). Every decoding problem is the client's, never the
    engine's: none of these may reach the search and come back as a 5xx."""
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
    """Whether any string (key or value) in a decoded JSON value holds a lone surrogate; iterative, so a deep
    value cannot exhaust the stack here either."""
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

    @classmethod
    def from_mapping(cls, data: dict) -> SearchRequest:
        """Validated and bounded; BadRequest with a message otherwise."""
        if not isinstance(data, dict):
            raise BadRequest("the request must be a JSON object")
        unknown = set(data) - {
            "query",
            "q",
            "k",
            "page",
            "year_min",
            "year_max",
            "author",
            "venue",
            "overview",
            "widen",
        }
        if unknown:
            raise BadRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
        query = data.get("query", data.get("q"))
        if not isinstance(query, str):
            raise BadRequest("query is required and must be a string")
        if len(query) > MAX_QUERY_CHARS:
            raise BadRequest(f"query is too long ({len(query)} characters; at most {MAX_QUERY_CHARS})")
        if CONTROL.search(query):
            raise BadRequest("query contains control characters")
        query = re.sub(r"\s+", " ", query).strip()
        if not query:
            raise BadRequest("query is empty")
        k = _int(data.get("k", 10), "k", 1, MAX_K)
        page = _int(data.get("page", 1), "page", 1, MAX_PAGE)
        if k * page > MAX_DEPTH:
            raise BadRequest(f"k × page must be at most {MAX_DEPTH} (got {k} × {page})")
        year_min = _int(data.get("year_min"), "year_min", 1000, 2999, optional=True)
        year_max = _int(data.get("year_max"), "year_max", 1000, 2999, optional=True)
        if year_min is not None and year_max is not None and year_min > year_max:
            raise BadRequest("year_min is after year_max")
        author = _text(data.get("author"), "author")
        venue = _text(data.get("venue"), "venue")
        overview, widen = _flag(data.get("overview", True)), _flag(data.get("widen", False))
        return cls(query, k, page, year_min, year_max, author, venue, overview, widen)

    def engine_query(self) -> str:
        """The query with UI filters written as explicit (strict) syntax."""
        parts = [self.query]
        if self.year_min is not None and self.year_max is not None:
            parts.append(f"year:{self.year_min}..{self.year_max}")
        elif self.year_min is not None:
            parts.append(f"year>={self.year_min}")
        elif self.year_max is not None:
            parts.append(f"year<={self.year_max}")
        if self.author:
            parts.append(f'author:"{self.author}"')
        if self.venue:
            parts.append(f'venue:"{self.venue}"')
        return " ".join(parts)


def _flag(value) -> bool:
    if isinstance(value, str):
        return value.lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def _int(value, name: str, low: int, high: int, *, optional: bool = False) -> int | None:
    if value is None or value == "":
        if optional:
            return None
        raise BadRequest(f"{name} is required")
    if isinstance(value, bool):
        raise BadRequest(f"{name} must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):  # 1e400 is valid JSON and reads as infinity
        raise BadRequest(f"{name} must be an integer") from None
    if isinstance(value, float) and value != number:
        raise BadRequest(f"{name} must be an integer")
    if not low <= number <= high:
        raise BadRequest(f"{name} must be between {low} and {high} (got {number})")
    return number


def _text(value, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    if len(value) > MAX_FIELD_CHARS:
        raise BadRequest(f"{name} is too long (at most {MAX_FIELD_CHARS} characters)")
    if CONTROL.search(value) or '"' in value:
        raise BadRequest(f"{name} contains control characters or quotes")
    value = re.sub(r"\s+", " ", value).strip()
    return value or None
