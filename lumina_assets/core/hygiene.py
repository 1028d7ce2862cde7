"""Valid UTF-8 at the edge: strings from PDFs, JSON, feeds and file names may hold lone surrogates (a JSON
`"\\ud800"`, a PDF `/Title` in broken UTF-16, a file name that is not UTF-8) that fail the Parquet writer much later
and far from their cause. They are repaired where they enter, and the repair is recorded, never a crash."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATES_AND_NUL = re.compile("[\ud800-\udfff\x00]")


def clean_text(value: str) -> str:
    """`value` with lone surrogates replaced by U+FFFD and NUL bytes dropped; ASCII passes untouched."""
    if value.isascii() and "\x00" not in value:
        return value
    return _SURROGATES_AND_NUL.sub(lambda m: "" if m.group() == "\x00" else REPLACEMENT, value)


def needs_cleaning(value: str) -> bool:
    return not (value.isascii() and "\x00" not in value) and bool(_SURROGATES_AND_NUL.search(value))


def clean_strings(value: Any) -> tuple[Any, int]:
    """(value with every string inside repaired, number of strings that needed it); dicts, lists, tuples."""
    if isinstance(value, str):
        cleaned = clean_text(value)
        return cleaned, int(cleaned != value)
    if isinstance(value, dict):
        out, repaired = {}, 0
        for key, item in value.items():
            new_key, key_fixes = clean_strings(key) if isinstance(key, str) else (key, 0)
            out[new_key], fixes = clean_strings(item)
            repaired += key_fixes + fixes
        return out, repaired
    if isinstance(value, list | tuple):
        items = [clean_strings(item) for item in value]
        return type(value)(v for v, _ in items), sum(n for _, n in items)
    return value, 0


def display_name(path: Path | str | bytes) -> str:
    """A file name as valid UTF-8 for messages and tables: bytes that are not UTF-8 become U+FFFD."""
    raw = path if isinstance(path, bytes) else os.fsencode(str(path))
    return raw.decode("utf-8", errors="replace")


def path_text(path: Path | str | bytes) -> str:
    """A path as valid UTF-8 that still tells paths apart, for ids, origins and table cells: bytes that are not
    UTF-8 are written as `\\xNN` escapes (display_name's U+FFFD would make two such folders one)."""
    raw = path if isinstance(path, bytes) else os.fsencode(str(path))
    return raw.decode("utf-8", errors="backslashreplace")


# Caps on free-text metadata (a PDF's /Title, an API's venue, an author list), which lands in every passage
# row of its paper; real values are far shorter.
MAX_TITLE_CHARS = 512
MAX_VENUE_CHARS = 512
MAX_NAME_CHARS = 256  # one author, one keyword, one tag
MAX_PATH_CHARS = 512  # one collection path ("Thesis/Chapter 2/Related work")
MAX_LIST_ITEMS = 500  # authors, keywords, tags, collections
ELLIPSIS = "\u2026"


def cap_text(value: str | None, limit: int) -> tuple[str | None, bool]:
    """(value cut to `limit` characters with an ellipsis, whether it was cut)."""
    if value is None or len(value) <= limit:
        return value, False
    return value[: limit - 1].rstrip() + ELLIPSIS, True


def cap_metadata(paper: Any) -> list[str]:
    """Cap a Paper's free-text metadata in place (title, venue, each author, keyword, tag and collection
    path, and how many); returns the fields cut, each also recorded in `paper.metadata_sources` as
    "<field>:truncated"."""
    cut: list[str] = []
    for name, limit in (("title", MAX_TITLE_CHARS), ("venue", MAX_VENUE_CHARS)):
        value, was_cut = cap_text(getattr(paper, name), limit)
        if was_cut:
            setattr(paper, name, value)
            cut.append(name)
    for name, limit in (
        ("authors", MAX_NAME_CHARS),
        ("keywords", MAX_NAME_CHARS),
        ("tags", MAX_NAME_CHARS),
        ("collections", MAX_PATH_CHARS),
    ):
        items = list(getattr(paper, name, None) or [])
        capped = [cap_text(item, limit) for item in items[:MAX_LIST_ITEMS]]
        if len(items) > MAX_LIST_ITEMS or any(was_cut for _, was_cut in capped):
            setattr(paper, name, [item for item, _ in capped])
            cut.append(name)
    for name in cut:
        if f"{name}:truncated" not in paper.metadata_sources:
            paper.metadata_sources.append(f"{name}:truncated")
    return cut


def is_utf8_path(path: Path | str) -> bool:
    """Whether the path's bytes are UTF-8 (a name decoded with surrogateescape is not)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def usable_identifier(value: Any) -> str | None:
    """An id from JSON as a non-empty string: strings and integers only. None, booleans, lists, NaN and
    non-integral floats (`2501.10120` read as a number has already lost its trailing zero) are unusable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        text = clean_text(value).strip()
        return text or None
    return None


def usable_text(value: Any) -> tuple[str | None, bool]:
    """(text, ok) for a free-text field from JSON: a string (or missing / null -> ""); anything else (a list,
    a number, NaN) is not ok."""
    if value is None:
        return "", True
    if isinstance(value, str):
        return clean_text(value), True
    return None, False


# Text from libraries and BEIR keeps whatever bytes its source held: control characters must not reach a
# terminal, and most C0 controls and U+FFFE / U+FFFF are not allowed in XML 1.0.
_TERMINAL_UNSAFE = re.compile(
    "\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
_COLOR = re.compile(r"\x1b\[[0-9;]{0,32}m")  # SGR: colours and bold, what `--color` itself prints
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def terminal_safe(text: str, *, keep_colors: bool = False) -> str:
    """`text` for a terminal: C0 controls but tab and newline (a carriage return only before a newline),
    DEL, C1 controls, bidirectional overrides and non-characters become U+FFFD, so nothing printed can move
    the cursor, retitle the window or reorder what is shown. `keep_colors` keeps SGR colour sequences
    (`ESC[1;31m`)."""
    if text.isascii() and text.isprintable():
        return text
    if not keep_colors:
        return _TERMINAL_UNSAFE.sub(REPLACEMENT, text)
    pieces, last = [], 0
    for match in _COLOR.finditer(text):
        pieces += [_TERMINAL_UNSAFE.sub(REPLACEMENT, text[last : match.start()]), match.group()]
        last = match.end()
    pieces.append(_TERMINAL_UNSAFE.sub(REPLACEMENT, text[last:]))
    return "".join(pieces)


def xml_safe(text: str) -> str:
    """`text` with the characters XML 1.0 does not allow (C0 controls but tab, newline and carriage return; lone
    surrogates; U+FFFE, U+FFFF) replaced by U+FFFD, so a document holding it stays well-formed."""
    return _XML_UNSAFE.sub(REPLACEMENT, text)
