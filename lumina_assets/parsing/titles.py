"""Title hygiene for PDFs: which first-page lines can be part of a title (not a letter-spaced logo, not the rotated
arXiv stamp), and what to strip from one."""

from __future__ import annotations

import re

ARXIV_STAMP = re.compile(
    r"\barXiv:\s*\d{4}\.\d{4,5}(?:v\d+)?(?:\s*\[[^\]]{1,30}\])?(?:\s*\d{1,2}\s+[A-Z][a-z]{2}\s+\d{4})?", re.I
)


def is_letter_spaced(spans: list[str]) -> bool:
    """Many spans of a few characters each: text set letter by letter (logos, spaced-out headings)."""
    pieces = [s.strip() for s in spans if s.strip()]
    if len(pieces) < 4:
        return False
    return sum(len(p) for p in pieces) / len(pieces) < 3.5


def collapse_letter_spacing(text: str) -> str:
    """ "T I T L E  O F  I T" -> "TITLE OF IT" when every token is one letter (words split by wider gaps)."""
    tokens = text.split()
    if len(tokens) >= 4 and all(len(t) == 1 for t in tokens):
        words = re.split(r"\s{2,}", text.strip())
        return " ".join(w.replace(" ", "") for w in words)
    return text


# Small capitals set as a full-size initial plus smaller capitals read "L ONG E VAL : Guidelines".
_SMALL_CAPS_WORD = re.compile(r"\b([A-Z]) ([A-Z]{2,})\b")


def repair_small_caps(text: str) -> str:
    """ "L ONG E VAL : Guidelines for ..." -> "LONGEVAL: Guidelines for ...". Only in a title that also has lower-case
    words (an all-caps title keeps "A NEW ...") and where the split shows twice or before a detached colon."""
    if not re.search(r"[a-z]", text):
        return text
    found = _SMALL_CAPS_WORD.findall(text)
    if len(found) >= 2 or re.search(r"\b[A-Z] [A-Z]{2,} :", text):
        text = _SMALL_CAPS_WORD.sub(r"\1\2", text)
        text = re.sub(r"\b([A-Z]{2,}) ([A-Z]{2,}) :", r"\1\2:", text)  # "LONG EVAL :" -> "LONGEVAL:"
        text = re.sub(r"(?<=[A-Z]) :", ":", text)
    return text


def usable_title_line(text: str, spans: list[str] | None = None, direction=(1.0, 0.0)) -> bool:
    """Horizontal, not an arXiv stamp, not letter-spaced."""
    if direction is not None and (abs(direction[0] - 1.0) > 0.01 or abs(direction[1]) > 0.01):
        return False
    if ARXIV_STAMP.search(text) and len(ARXIV_STAMP.sub("", text).strip()) < 5:
        return False
    return not (spans is not None and is_letter_spaced(spans))


def clean_title(text: str) -> str:
    """Without arXiv stamps, with letter spacing collapsed and whitespace normalized."""
    text = ARXIV_STAMP.sub(" ", text or "")
    text = repair_small_caps(collapse_letter_spacing(text))
    return re.sub(r"\s+", " ", text).strip(" ,;")
