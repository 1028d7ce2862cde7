"""Highlighted evidence: which sentences inside a returned passage answer the query, as character offsets. Each
sentence's cosine to the query, query-term coverage and BM25, min-max normalized within its result and weighted by
`ScorerWeights`, plus a role prior; a table row is scored with its caption (docs/search.md#evidence-sentences)."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from lumina_assets.parsing.sentences import sentence_spans
from lumina_assets.search.bm25 import BM25
from lumina_assets.search.text import tokenize


@dataclass
class Highlight:
    """A sentence inside one passage's text: `text[start:end]`, with its score and that score's two parts."""

    start: int
    end: int
    score: float
    dense: float
    lexical: float
    prior: float = 0.0  # the sentence-role part of the score (finding / setup cues, position in an abstract)

    def to_dict(self) -> dict:
        return {
            key: (round(value, 4) if isinstance(value, float) else value)
            for key, value in asdict(self).items()
        }


@dataclass
class Sentence:
    passage: int  # index of the passage within its result
    start: int
    end: int
    text: str
    role: str = ""  # in a table passage: "caption" (its label, caption and header) or "row"; else ""


TABLE_LABEL = re.compile(r"^\s*(?:Table|Tab\.)\s*[\dIVX]+[a-z]?\b")
_ROW = re.compile(r" \| |; [^;]+: ")  # a rendered row: "a | b | c" or "name: value; name: value"
_FIGURE = re.compile(r"\d")
SENTENCE_CACHE_SIZE = 50_000  # sentence vectors kept by text


def table_sentences(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """A passage's sentence spans and each one's role: in a table with rows (the chunker's form), "caption" (label,
    caption, "Columns: ..." header) or "row", else "". A row cut at an abbreviation ("Avg.") is joined again: every
    row holds a figure."""
    spans = sentence_spans(text or "")
    if not TABLE_LABEL.match(text or ""):
        return spans, [""] * len(spans)
    pieces = [text[start:end] for start, end in spans]
    header = next((i for i, piece in enumerate(pieces) if "Columns: " in piece), None)
    first = (
        header + 1
        if header is not None
        else next((i for i, piece in enumerate(pieces) if i and _ROW.search(piece)), len(pieces))
    )
    if first >= len(pieces):
        return spans, [""] * len(spans)
    rows: list[tuple[int, int]] = []
    for start, end in spans[first:]:
        if rows and not _FIGURE.search(text[rows[-1][0] : rows[-1][1]]):
            rows[-1] = (rows[-1][0], end)
        else:
            rows.append((start, end))
    return spans[:first] + rows, ["caption"] * first + ["row"] * len(rows)


def table_caption(text: str) -> str:
    """A table passage's label and caption (the text before its header and rows), "" for any other passage."""
    spans, roles = table_sentences(text)
    return _caption_before(text, spans[roles.index("row")][0]) if "row" in roles else ""


def _caption_before(text: str, first_row: int) -> str:
    return text[:first_row].split("Columns: ", 1)[0].strip(" …")


# What a sentence does in an abstract, from its wording: findings state what the paper shows; aims and methods set it up
FINDING = re.compile(
    r"^(results?|findings|conclusions?|interpretation)\b|\b(we (found|find|show|observed|demonstrate|report|identified)"
    r"|results? (show|indicate|suggest|demonstrate|reveal)|(these|our) (data|findings|results)|in conclusion"
    r"|was associated|were associated|is associated|are associated|significantly|odds ratio|hazard ratio"
    r"|relative risk|confidence interval|more likely|less likely|compared with|showed|shown|reveals?"
    r"|increased|decreased|reduced|improved|higher|lower|greater|fewer|correlat\w*|suggest\w*|indicat\w*)\b"
    r"|\bp\s*[<=>]\s*0?\.\d",  # or a p-value
    re.IGNORECASE,
)
SETUP = re.compile(
    r"^(background|objectives?|aims?|purpose|methods?|design|setting|participants|introduction|context)\b"
    r"|\b(we (aimed|sought|investigated|examined|evaluated|assessed|studied|used|performed|conducted|analy[sz]ed"
    r"|measured|enrolled|recruited|hypothesi[sz]ed)|(this|the present|our) study (was|aimed|examined|investigated)"
    r"|to (investigate|determine|examine|assess|evaluate|explore|test whether)|remains? (unclear|unknown|poorly)"
    r"|is unknown|little is known|were (randomly )?(assigned|randomi[sz]ed|enrolled|recruited|included)"
    r"|we (call|name|dub|term|coin) (it|this|them|these|our|the)|(hereafter|henceforth) (called|referred to as))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ScorerWeights:
    """The relevance part's weights (dense cosine, coverage, BM25) and the role prior's (finding, setup, position in
    an abstract); chosen on half of the SciFact train rationale pairs (docs/search.md)."""

    dense: float = 0.5
    coverage: float = 0.5
    lexical: float = 0.0
    finding: float = 0.2
    setup: float = 0.4
    position: float = 0.3


def _minmax(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return np.full_like(values, 1.0 if high > 0 else 0.0)
    return (values - low) / (high - low)


class EvidenceScorer:
    """`highlight(query, results)`: for each result (a list of passage texts), per passage the highlighted
    sentences. `embedder` is the search engine's; sentence vectors are cached by text."""

    def __init__(
        self,
        embedder,
        *,
        max_highlights: int = 2,
        weights: ScorerWeights | None = None,
        relative_floor: float = 0.75,
        passage_floor: float = 0.6,
        stored=None,
    ):
        self.embedder = embedder
        self.stored = stored  # SentenceVectors (index-time sentence vectors) or None: encode per request
        self.weights = weights or ScorerWeights()
        self.max_highlights = max_highlights
        self.relative_floor = relative_floor
        self.passage_floor = passage_floor
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()

    def _encode_sentences(self, texts: list[str]):
        """The embedder's request-time path for short texts where it has one (ONNX, no torch), else `encode`."""
        return getattr(self.embedder, "encode_sentences", self.embedder.encode)(texts)

    def _query_vector(self, query: str) -> np.ndarray:
        encode = getattr(self.embedder, "encode_queries", self.embedder.encode)
        return self._normalize(np.asarray(encode([query]), dtype=np.float32)[0])

    @staticmethod
    def _normalize(vector: np.ndarray) -> np.ndarray:
        return vector / max(float(np.linalg.norm(vector)), 1e-12)

    def sentence_vectors(
        self, texts: Sequence[str], known: dict[str, np.ndarray] | None = None
    ) -> np.ndarray:
        """Unit vectors of `texts`: from `known` (stored at index time), else the cache, else the model."""
        known = known or {}
        if known and all(t in known for t in texts):
            dim = len(next(iter(known.values())))
            return np.asarray([known[t] for t in texts], dtype=np.float32).reshape(len(texts), dim)
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache and t not in known))
        if missing:
            with self._encode_lock:  # one model call at a time: concurrent calls only oversubscribe the cores
                encoded = np.asarray(self._encode_sentences(missing), dtype=np.float32)
            with self._lock:
                for text, vector in zip(missing, encoded, strict=True):
                    self._cache[text] = self._normalize(vector)
                while len(self._cache) > SENTENCE_CACHE_SIZE:
                    self._cache.popitem(last=False)
        with self._lock:
            vectors = [known[t] if t in known else self._cache.get(t) for t in texts]
        if any(v is None for v in vectors):  # evicted meanwhile by another thread: encode those again
            vectors = [
                v
                if v is not None
                else self._normalize(np.asarray(self._encode_sentences([t]), dtype=np.float32)[0])
                for v, t in zip(vectors, texts, strict=True)
            ]
        dim = len(vectors[0]) if vectors else 0
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), dim)

    def score_sentences(
        self,
        query: str,
        results: Sequence[Sequence[str]],
        query_vector: np.ndarray | None = None,
        dense_results: set[int] | None = None,
        passage_ids: Sequence[Sequence[str]] | None = None,
    ) -> list[list[tuple[Sentence, float, float, float, float]]]:
        """Per result, every sentence with (combined, dense, lexical, prior) scores. Only the results in `dense_results`
        (all when None) get dense scores; with `passage_ids` and a `stored` source, index-time sentence vectors are
        used and only sentences without one are encoded."""
        sentences: list[list[Sentence]] = []
        for passages in results:
            found = []
            for index, text in enumerate(passages):
                spans, roles = table_sentences(text)
                for (start, end), role in zip(spans, roles, strict=True):
                    found.append(Sentence(index, start, end, text[start:end], role))
            sentences.append(found)
        flat = [s.text for group in sentences for s in group]
        if not flat:
            return [[] for _ in results]
        wanted = [
            i
            for i, group in enumerate(sentences)
            for _ in group
            if dense_results is None or i in dense_results
        ]
        dense_all = np.zeros(len(flat), dtype=np.float32)
        mask = np.asarray(
            [dense_results is None or i in dense_results for i, group in enumerate(sentences) for _ in group]
        )
        if wanted and self.weights.dense > 0:
            qvec = self._query_vector(query) if query_vector is None else self._normalize(query_vector)
            known = self._stored_vectors(results, passage_ids, dense_results)
            chosen = [t for t, m in zip(flat, mask, strict=True) if m]
            dense_all[mask] = self.sentence_vectors(chosen, known) @ qvec
        rows = _table_context(sentences, results)
        dense_all = _with_caption_cosine(rows, dense_all)
        lexical_all, coverage_all = self._lexical(query, _with_caption_words(rows, flat))
        out = []
        offset = 0
        w = self.weights
        for number, group in enumerate(sentences):
            n = len(group)
            dense = dense_all[offset : offset + n]
            lexical = lexical_all[offset : offset + n]
            coverage = coverage_all[offset : offset + n]
            offset += n
            dense_on = w.dense if dense_results is None or number in dense_results else 0.0
            relevance = (
                dense_on * _minmax(dense) + w.coverage * _minmax(coverage) + w.lexical * _minmax(lexical)
            ) / max(dense_on + w.coverage + w.lexical, 1e-9)
            abstract = passage_ids is not None and _is_abstract(passage_ids[number])
            prior = self._prior(group, abstract)
            combined = relevance + prior
            combined[[s.role == "caption" for s in group]] = -1.0  # a table's rows answer, not its caption
            out.append(
                [
                    (s, float(c), float(d), float(x), float(r))
                    for s, c, d, x, r in zip(group, combined, dense, lexical, prior, strict=True)
                ]
            )
        return out

    def _prior(self, group: list[Sentence], abstract: bool) -> np.ndarray:
        """Role prior per sentence: + finding cue, − setup cue, + relative position (abstracts only: their
        findings and conclusions come last)."""
        w = self.weights
        n = len(group)
        finding = np.asarray([bool(FINDING.search(s.text)) for s in group], dtype=np.float32)
        setup = np.asarray([bool(SETUP.search(s.text)) for s in group], dtype=np.float32)
        position = (
            np.arange(n, dtype=np.float32) / max(n - 1, 1) if abstract else np.zeros(n, dtype=np.float32)
        )
        return w.finding * finding - w.setup * setup + w.position * position

    def _stored_vectors(self, results, passage_ids, dense_results) -> dict[str, np.ndarray]:
        if self.stored is None or passage_ids is None:
            return {}
        wanted = {
            pid: text
            for i, (texts, ids) in enumerate(zip(results, passage_ids, strict=True))
            if dense_results is None or i in dense_results
            for pid, text in zip(ids, texts, strict=True)
        }
        return self.stored.lookup(wanted)

    def _lexical(self, query: str, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(BM25, coverage) of the query's terms per sentence; coverage is the IDF-weighted share of the query's
        terms a sentence contains. Document frequencies come from the sentences of the whole result set."""
        terms = set(tokenize(query))
        zeros = np.zeros(len(sentences), dtype=np.float32)
        if not terms:
            return zeros, zeros.copy()
        tokens = [tokenize(s) for s in sentences]
        n = len(tokens)
        df = Counter(term for toks in tokens for term in set(toks) & terms)
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
        total = sum(idf.values()) or 1.0
        coverage = np.asarray([sum(idf[t] for t in set(toks) & terms) / total for toks in tokens], np.float32)
        bm25 = BM25(tokens).scores(dict.fromkeys(terms, 1.0))
        return bm25, coverage

    def highlight(
        self,
        query: str,
        results: Sequence[Sequence[str]],
        query_vector: np.ndarray | None = None,
        dense_results: set[int] | None = None,
        passage_ids: Sequence[Sequence[str]] | None = None,
    ) -> list[list[list[Highlight]]]:
        """Per result, per passage, its highlighted sentences (best first across the result: the result's first
        highlight is its best sentence)."""
        scored = self.score_sentences(query, results, query_vector, dense_results, passage_ids)
        out: list[list[list[Highlight]]] = []
        for passages, group in zip(results, scored, strict=True):
            per_passage: list[list[Highlight]] = [[] for _ in passages]
            ranked = sorted(group, key=lambda item: (-item[1], item[0].passage, item[0].start))
            if ranked:
                best = max(ranked[0][1], 0.0)
                for sentence, combined, dense, lexical, prior in ranked[: self.max_highlights]:
                    if sentence is not ranked[0][0] and combined < self.relative_floor * best:
                        break
                    per_passage[sentence.passage].append(
                        Highlight(sentence.start, sentence.end, combined, dense, lexical, prior)
                    )
                # a passage without a highlight gets its own best sentence when it is close to the result's best
                for sentence, combined, dense, lexical, prior in ranked:
                    if combined < self.passage_floor * best:
                        break
                    if not per_passage[sentence.passage]:
                        per_passage[sentence.passage].append(
                            Highlight(sentence.start, sentence.end, combined, dense, lexical, prior)
                        )
            out.append(per_passage)
        return out


def _table_context(groups: list[list[Sentence]], results) -> dict[int, tuple[list[int], str]]:
    """Flat index of each table row -> (flat indexes of its caption sentences, its caption's text)."""
    out: dict[int, tuple[list[int], str]] = {}
    offset = 0
    for group, passages in zip(groups, results, strict=True):
        captions: dict[int, list[int]] = {}
        # the spans are already split: the caption is the text before the first row
        texts: dict[int, str] = {}
        for i, sentence in enumerate(group, offset):
            if sentence.role == "caption" and not sentence.text.startswith("Columns: "):
                captions.setdefault(sentence.passage, []).append(i)
            elif sentence.role == "row" and sentence.passage not in texts:
                texts[sentence.passage] = _caption_before(passages[sentence.passage], sentence.start)
        for i, sentence in enumerate(group, offset):
            if sentence.role == "row" and sentence.passage in captions:
                out[i] = (captions[sentence.passage], texts[sentence.passage])
        offset += len(group)
    return out


def _with_caption_cosine(rows: dict[int, tuple[list[int], str]], dense: np.ndarray) -> np.ndarray:
    """Each table row's cosine averaged with its caption's best: rows of the table the query names rise."""
    out = dense.copy()
    for i, (caption, _) in rows.items():
        out[i] = (dense[i] + max(dense[j] for j in caption)) / 2
    return out


def _with_caption_words(rows: dict[int, tuple[list[int], str]], texts: list[str]) -> list[str]:
    """The sentences' texts for lexical scoring, each table row followed by its caption."""
    out = list(texts)
    for i, (_, caption) in rows.items():
        out[i] = f"{texts[i]} {caption}"
    return out


def _is_abstract(passage_ids: Sequence[str]) -> bool:
    """A result made of abstract passages (ids `<paper>#abstract:<n>`): the position prior applies."""
    return bool(passage_ids) and all("#abstract" in p for p in passage_ids)


def first_highlight(per_passage: list[list[Highlight]]) -> tuple[int, Highlight] | None:
    """(passage index, highlight) of the best highlight of one result."""
    best = None
    for index, highlights in enumerate(per_passage):
        for highlight in highlights:
            if best is None or highlight.score > best[1].score:
                best = (index, highlight)
    return best


_SPACE = re.compile(r"\s+")


def normalize_space(text: str) -> str:
    return _SPACE.sub(" ", text or "").strip()
