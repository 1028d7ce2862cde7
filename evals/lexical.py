"""Lexical retrieval for the benchmark: the project's one BM25 over `lumina_assets.search.text.tokenize`, so the
bm25 baseline and the judge's hard negatives read text exactly as Lumina's own index does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from lumina_assets.search.bm25 import BM25
from lumina_assets.search.text import tokenize


def query_terms(text: str) -> dict[str, float]:
    """Query term -> weight (its count in the query), in the index's vocabulary."""
    return {term: float(count) for term, count in Counter(tokenize(text)).items()}


class LexicalIndex:
    """BM25 over a list of texts; `search` gives (text index, score) best first, ties in input order."""

    def __init__(self, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75):
        self.bm25 = BM25([tokenize(text) for text in texts], k1=k1, b=b)

    def scores(self, query: str) -> np.ndarray | None:
        """Every text's score for the query (None for a query with no indexed term)."""
        terms = query_terms(query)
        return self.bm25.scores(terms) if terms else None

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        scores = self.scores(query)
        if scores is None or k <= 0:
            return []
        top = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in top]
