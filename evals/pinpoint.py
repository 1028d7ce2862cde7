"""The pinpoint metric: on claim / evidence-abstract pairs with rationale sentences (SciFact's format), is the
evidence abstract in the top k, and is the first sentence Lumina highlights in it a rationale sentence (spans
overlapping by more than half of the shorter one)?

Rationales file, JSON lines: {"query_id", "claim", "doc_id", "sentence_indices", "sentences": [...]}."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from evals.latency import percentile_ms
from lumina_assets.search.evidence import EvidenceScorer, first_highlight, normalize_space


@dataclass
class RationalePair:
    query_id: str
    claim: str
    doc_id: str
    sentences: list[str]


def load_rationales(path: str | Path) -> list[RationalePair]:
    pairs = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            pairs.append(
                RationalePair(
                    str(row["query_id"]),
                    str(row["claim"]),
                    str(row["doc_id"]),
                    [str(s) for s in row["sentences"]],
                )
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}:{number}: not a rationale record ({error})") from error
    return pairs


def rationale_spans(text: str, sentences: Iterable[str]) -> list[tuple[int, int]]:
    """Where each rationale sentence occurs in `text` (whitespace-insensitive; missing ones are skipped)."""
    import re

    spans = []
    for sentence in sentences:
        words = normalize_space(sentence).split(" ")
        if not words or not words[0]:
            continue
        pattern = r"\s+".join(re.escape(w) for w in words)
        match = re.search(pattern, text)
        if match:
            spans.append((match.start(), match.end()))
    return spans


def is_rationale(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    for a, b in spans:
        overlap = min(end, b) - max(start, a)
        if overlap > 0.5 * min(end - start, b - a):
            return True
    return False


@dataclass
class PinpointResult:
    pairs: int = 0
    found_at_10: int = 0
    rationale_in_chunks: int = 0
    highlight_top1: int = 0
    latencies: list[float] = field(default_factory=list)
    details: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        found = max(self.found_at_10, 1)
        return {
            "pairs": self.pairs,
            "found_at_10": round(self.found_at_10 / max(self.pairs, 1), 4),
            "rationale_in_chunks": round(self.rationale_in_chunks / found, 4),
            "highlight_top1": round(self.highlight_top1 / found, 4),
            "found_pairs": self.found_at_10,
            "p50_ms": round(percentile_ms(self.latencies, 50), 1),
            "p95_ms": round(percentile_ms(self.latencies, 95), 1),
        }


def evaluate_pinpoint(
    search: Callable[[str, int], list],
    scorer: EvidenceScorer,
    pairs: list[RationalePair],
    paper_id_for_doc: Callable[[str], str],
    *,
    k: int = 10,
    progress: Callable[[int, int], None] | None = None,
) -> PinpointResult:
    """`search(claim, k) -> contexts`; highlights from `scorer` over all k contexts, as the API computes them.
    Latencies include search and highlighting."""
    result = PinpointResult()
    cache: dict[str, list] = {}
    for number, pair in enumerate(pairs, 1):
        result.pairs += 1
        started = time.perf_counter()
        if pair.claim not in cache:
            cache[pair.claim] = search(pair.claim, k)
        contexts = cache[pair.claim]
        target = paper_id_for_doc(pair.doc_id)
        index = next((i for i, c in enumerate(contexts) if c.paper_id == target), None)
        match = None
        # dense sentence scores for the evidence result only (the others: lexical, for df)
        if index is not None:
            highlights = scorer.highlight(
                pair.claim,
                [c.chunks for c in contexts],
                dense_results={index},
                passage_ids=[c.passage_ids for c in contexts],
            )
            match = (contexts[index], highlights[index])
        result.latencies.append(time.perf_counter() - started)
        detail = {"query_id": pair.query_id, "doc_id": pair.doc_id, "found": match is not None, "top1": False}
        if match is not None:
            context, per_passage = match
            result.found_at_10 += 1
            spans = [rationale_spans(chunk, pair.sentences) for chunk in context.chunks]
            if any(spans):
                result.rationale_in_chunks += 1
            best = first_highlight(per_passage)
            if best is not None and is_rationale(best[1].start, best[1].end, spans[best[0]]):
                result.highlight_top1 += 1
                detail["top1"] = True
        result.details.append(detail)
        if progress is not None:
            progress(number, len(pairs))
    return result


def claim_half(query_id: str) -> str:
    """'even' or 'odd' by numeric id parity (else a stable hash); the even half chose the scorer's weights."""
    import hashlib

    number = int(query_id) if query_id.isdigit() else int(hashlib.sha256(query_id.encode()).hexdigest(), 16)
    return "even" if number % 2 == 0 else "odd"
