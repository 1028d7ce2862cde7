"""An in-memory mirror of LanceDB's native full-text index for small corpora: the same tokens as its tokenizer and
the same float32 BM25, from sparse arrays (docs/search-at-scale.md; tested against LanceDB itself). Ties go by row
position (LanceDB's order among ties is unspecified)."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lumina_assets.search.bm25 import BM25
from lumina_assets.search.stopwords import lancedb_english
from lumina_assets.search.text import stemmer

MAX_TOKEN_BYTES = 40  # LanceDB's default max_token_length: a word this long or longer is dropped

# LanceDB's English stop words are NLTK's list, compared with the *stemmed* token ("hers" -> "her" is dropped)
STOP_TOKENS = lancedb_english()

# Compatibility characters LanceDB's ASCII folding maps that canonical decomposition (NFD) leaves alone.
_FOLD_EXTRA = str.maketrans(
    {
        **{"ß": "ss", "æ": "ae", "œ": "oe", "þ": "th", "ø": "o", "ł": "l", "đ": "d", "ı": "i"},  # letters
        **{"ﬁ": "fi", "ﬂ": "fl", "ﬀ": "ff"},  # ligatures
        **{"¼": "14", "½": "12", "¾": "34", "¹": "1", "²": "2", "³": "3"},  # fractions, superscripts
        **{chr(0x2070 + i): str(i) for i in (0, 4, 5, 6, 7, 8, 9)},  # the other superscript digits
        **{chr(0x2080 + i): str(i) for i in range(10)},  # subscript digits
    }
)
_WORD = re.compile(r"[^\W_]+")
_NOT_WORD = r"[^\p{L}\p{N}]+"  # RE2 (pyarrow): the same split as _WORD, vectorized


def fold_to_ascii(token: str) -> str:
    if token.isascii():
        return token
    decomposed = unicodedata.normalize("NFD", token.translate(_FOLD_EXTRA))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@functools.lru_cache(maxsize=200_000)
def analyze_word(word: str) -> str | None:
    """One word (a run of letters and digits) as the index stores it, or None when the index drops it."""
    if not word or len(word.encode("utf-8")) >= MAX_TOKEN_BYTES:  # "" is what a split leaves at either end
        return None
    stemmed = stemmer().stemWord(word.lower())
    return None if stemmed in STOP_TOKENS else fold_to_ascii(stemmed)


def analyze(text: str) -> list[str]:
    """The index tokens of a text, in order, repeats kept."""
    return [t for t in map(analyze_word, _WORD.findall(text or "")) if t is not None]


@functools.lru_cache(maxsize=64)
def analyze_query(text: str) -> tuple[str, ...]:
    """`analyze` for a query, remembered: the passage and paper mirrors read the same query."""
    return tuple(analyze(text))


class FullTextMirror:
    """A column of texts read the way LanceDB's tokenizer reads them, scored by `bm25.BM25`, with top-n."""

    def __init__(self, texts: pa.ChunkedArray | pa.Array | Sequence[str | None]) -> None:
        texts = texts if isinstance(texts, pa.ChunkedArray | pa.Array) else pa.array(texts, pa.string())
        texts = pc.fill_null(texts, "")
        self.size = len(texts)
        # split every text in one vectorized pass, then analyze each distinct word once
        words = pc.split_pattern_regex(texts, _NOT_WORD)
        if isinstance(words, pa.ChunkedArray):
            words = words.combine_chunks()
        doc_of_word = np.repeat(
            np.arange(self.size, dtype=np.int64), np.diff(words.offsets.to_numpy(zero_copy_only=False))
        )
        encoded = pc.dictionary_encode(words.flatten())
        vocabulary: dict[str, int] = {}
        token_of_word = np.fromiter(
            (
                -1 if token is None else vocabulary.setdefault(token, len(vocabulary))
                for token in map(analyze_word, encoded.dictionary.to_pylist())
            ),
            dtype=np.int64,
            count=len(encoded.dictionary),
        )
        tokens = token_of_word[encoded.indices.to_numpy(zero_copy_only=False)] if len(encoded) else encoded
        tokens = np.asarray(tokens, dtype=np.int64)
        kept = tokens >= 0
        self._bm25 = BM25.from_token_ids(doc_of_word[kept], tokens[kept], vocabulary, self.size)

    def scores(self, text: str) -> np.ndarray:
        """BM25 score of every document (0 where no query token occurs); a repeated query word counts twice."""
        return self._bm25.scores(Counter(analyze_query(text)))

    def top(self, text: str, n: int, admitted: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(row position, score) of the n best-scoring documents with a positive score, best first (ties by
        position); `admitted` is an optional boolean mask of the rows a filter lets through."""
        if n <= 0:
            return []
        scores = self.scores(text)
        if admitted is not None:
            scores[~admitted] = 0
        matched = np.flatnonzero(scores > 0)
        if len(matched) > n:
            matched = matched[np.argpartition(-scores[matched], n - 1)[:n]]
            # the partition cut may split a tie: take every row tied with the n-th score, then order and cut
            cutoff = scores[matched].min()
            matched = np.flatnonzero(scores >= cutoff)
        order = matched[np.lexsort((matched, -scores[matched]))][:n]
        return list(zip(order.tolist(), scores[order].tolist(), strict=True))
