"""The search vocabulary: lower-cased, stopword-free, Snowball-stemmed word tokens (shared by every BM25 and by
query parsing, so an index and its queries always read text the same way)."""

from __future__ import annotations

import functools
import re

from lumina_assets.search.stopwords import english as english_stopwords


def stopwords() -> frozenset[str]:
    return english_stopwords()


@functools.cache
def stemmer():
    """Snowball English (PyStemmer), the algorithm LanceDB's full-text index stems with too."""
    import Stemmer

    return Stemmer.Stemmer("english")


WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stopwords, Snowball-stemmed (the BM25 vocabulary)."""
    stop = stopwords()
    words = [w for w in WORD.findall(text.lower()) if w not in stop and (len(w) > 1 or w.isdigit())]
    return stemmer().stemWords(words) if words else words
