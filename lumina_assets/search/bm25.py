"""Okapi BM25 for texts held in memory (the bm25 baseline, `evals.lexical`, `search.fulltext_mirror`); our own since
queries carry per-term weights and scores must match LanceDB's float32 ones."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


class BM25:
    """Okapi BM25 over a sparse (document x term) matrix of per-posting contributions, in float32 the way
    LanceDB's full-text index scores (idf = ln(1 + (N - n + 0.5) / (n + 0.5)), k1 1.2, b 0.75)."""

    def __init__(self, documents: Sequence[list[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        vocab: dict[str, int] = {}
        token_ids = [vocab.setdefault(token, len(vocab)) for tokens in documents for token in tokens]
        doc_of_token = [doc_index for doc_index, tokens in enumerate(documents) for _ in tokens]
        arrays = np.asarray(doc_of_token, dtype=np.int64), np.asarray(token_ids, dtype=np.int64)
        self._index(*arrays, vocab, len(documents), k1, b)

    @classmethod
    def from_token_ids(
        cls,
        doc_of_token: np.ndarray,
        token_ids: np.ndarray,
        vocab: dict[str, int],
        num_docs: int,
        *,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> BM25:
        """From parallel arrays (document index, token id) of every token occurrence: no per-document Python."""
        bm25 = cls.__new__(cls)
        bm25._index(doc_of_token, token_ids, vocab, num_docs, k1, b)
        return bm25

    def _index(
        self, doc_of_token, token_ids, vocab: dict[str, int], num_docs: int, k1: float, b: float
    ) -> None:
        self.vocab = vocab
        self.num_docs = num_docs
        shape = (num_docs, max(len(vocab), 1))
        lengths = np.bincount(doc_of_token, minlength=num_docs).astype(np.float32)
        postings = sp.csc_matrix(
            (np.ones(len(token_ids), dtype=np.float32), (doc_of_token, token_ids)), shape=shape
        )
        postings.sum_duplicates()  # data: term frequencies
        k1, b = np.float32(k1), np.float32(b)
        average = np.float32(lengths.sum() / num_docs) if num_docs else np.float32(1)
        norms = k1 * (np.float32(1) - b + b * lengths / max(average, np.float32(1e-9)))
        frequencies = postings.data
        document_weights = (k1 + np.float32(1)) * frequencies / (frequencies + norms[postings.indices])
        counts = np.diff(postings.indptr)
        idf = np.log((num_docs - counts + 0.5) / (counts + 0.5) + 1.0).astype(np.float32)
        postings.data = np.repeat(idf, counts) * document_weights  # a posting: its term's share of the score
        self.weights = postings

    def scores(self, terms: dict[str, float]) -> np.ndarray:
        """Score of every document for weighted query terms (a query word twice: weight 2); 0 where none occurs."""
        scores = np.zeros(self.num_docs, dtype=np.float32)
        weights = self.weights
        for term, weight in terms.items():
            column = self.vocab.get(term)
            if column is not None and weight > 0:
                start, end = weights.indptr[column], weights.indptr[column + 1]
                contribution = weights.data[start:end]
                scores[weights.indices[start:end]] += (
                    contribution if weight == 1 else np.float32(weight) * contribution
                )
        return scores
