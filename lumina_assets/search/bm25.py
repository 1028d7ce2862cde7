"""Okapi BM25 over a sparse term-weight matrix, for ranking a list of texts held in memory: the bm25 baseline
provider and the judge's hard negatives (`evals.lexical`). Search itself reads LanceDB's on-disk full-text index.

Why our own rather than bm25s: queries may carry per-term weights, and the texts are tokenized with `text.tokenize`
(stemming, the stopwords bm25s ships), the same vocabulary as search's query parsing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


class BM25:
    """Okapi BM25 over a sparse matrix of precomputed term weights; supports weighted queries (for RM3)."""

    def __init__(self, documents: Sequence[list[str]], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        vocab: dict[str, int] = {}
        rows, cols, counts = [], [], []
        lengths = np.zeros(len(documents), dtype=np.float32)
        for doc_index, tokens in enumerate(documents):
            lengths[doc_index] = len(tokens)
            for term, count in Counter(tokens).items():
                term_id = vocab.setdefault(term, len(vocab))
                rows.append(doc_index)
                cols.append(term_id)
                counts.append(count)
        self.vocab = vocab
        self.num_docs = len(documents)
        shape = (len(documents), max(len(vocab), 1))
        tf = sp.csr_matrix(
            (
                np.asarray(counts, dtype=np.float32),
                (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)),
            ),
            shape=shape,
        )
        self.term_counts = tf  # raw tf, rows = documents (for feedback-term statistics)
        self.doc_lengths = lengths
        df = np.bincount(np.asarray(cols, dtype=np.int64), minlength=shape[1]).astype(np.float32)
        self.idf = np.log(1.0 + (self.num_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        avg = float(lengths.mean()) if len(documents) else 1.0
        coo = tf.tocoo()
        norm = k1 * (1.0 - b + b * lengths[coo.row] / max(avg, 1e-9))
        weights = self.idf[coo.col] * coo.data * (k1 + 1.0) / (coo.data + norm)
        self.weights = sp.csc_matrix((weights.astype(np.float32), (coo.row, coo.col)), shape=shape)
        self.id_to_term = {i: t for t, i in vocab.items()}

    def term_ids(self, terms: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        ids, weights = [], []
        for term, weight in terms.items():
            term_id = self.vocab.get(term)
            if term_id is not None and weight > 0:
                ids.append(term_id)
                weights.append(weight)
        return np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float32)

    def scores(self, terms: dict[str, float]) -> np.ndarray:
        ids, weights = self.term_ids(terms)
        if len(ids) == 0:
            return np.zeros(self.num_docs, dtype=np.float32)
        return np.asarray(self.weights[:, ids] @ weights, dtype=np.float32).reshape(-1)
