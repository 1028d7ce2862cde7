"""Acronyms mined from the corpus ("long form (LF)"), used to expand a query's acronyms."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

_PAREN_ACRONYM = re.compile(r"\(([A-Z][A-Za-z0-9\-]{1,9})\)")


def _long_form(words: list[str], short: str) -> str | None:
    """Schwartz & Hearst (2003), simplified: the shortest word run before "(SF)" whose letters cover SF in order."""
    letters = [c.lower() for c in short if c.isalnum()]
    if not letters or not words:
        return None
    for size in range(1, min(len(words), len(letters) + 2) + 1):
        candidate = words[-size:]
        if candidate[0][:1].lower() != letters[0]:
            continue
        joined = " ".join(candidate).lower()
        position = 0
        ok = True
        for letter in letters:
            position = joined.find(letter, position)
            if position < 0:
                ok = False
                break
            position += 1
        if ok:
            return " ".join(candidate)
    return None


def count_acronyms(texts: Sequence[str]) -> dict[str, Counter]:
    """{acronym (lower): Counter of its long forms} found as "long form (LF)" in the texts (the index stores these
    counts per batch, so search looks acronyms up instead of mining the corpus)."""
    found: dict[str, Counter] = {}
    for text in texts:
        for match in _PAREN_ACRONYM.finditer(text):
            short = match.group(1)
            if sum(c.isupper() for c in short) < 2:
                continue
            before = re.findall(r"[\w\-]+", text[max(0, match.start() - 120) : match.start()])
            long = _long_form(before[-12:], short)
            if long and len(long) > len(short):
                found.setdefault(short.lower(), Counter())[long.lower()] += 1
    return found


def mine_acronyms(texts: Sequence[str], min_count: int = 1) -> dict[str, str]:
    """{acronym (lower): its most frequent long form} found as "long form (LF)" in the texts."""
    found = count_acronyms(texts)
    return {
        short: counts.most_common(1)[0][0]
        for short, counts in found.items()
        if counts.most_common(1)[0][1] >= min_count
    }
