"""The two English stop-word lists search reads, vendored as data (search/data/)."""

from __future__ import annotations

import functools
from importlib.resources import files


@functools.cache
def _read(name: str) -> frozenset[str]:
    text = files("lumina_assets.search").joinpath("data", name).read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def english() -> frozenset[str]:
    """The search vocabulary's stop words (dropped before stemming)."""
    return _read("stopwords_en.txt")


def lancedb_english() -> frozenset[str]:
    """NLTK's English list, the one LanceDB's full-text index drops (compared with the stemmed token)."""
    return _read("stopwords_nltk_en.txt")
