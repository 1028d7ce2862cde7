"""Fusion over candidate sets: each retriever returns a ranked run of (id, score, paper id); runs are fused by
reciprocal rank or by weighted, normalized scores over each run's top candidates. Nothing here is sized by the
corpus: a run holds what its index returned."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class Run:
    """One retriever's ranked candidates, best first: (id, score, paper id). `floor`, when set, is the score at
    the retriever's own cut (its last passage, for a run aggregated to papers): min-max normalization starts
    there, so which of several passages tied at the cut an index returned changes no fused score (a paper whose
    only hit sits at the cut gets 0 from the run either way)."""

    hits: list[tuple[str, float, str]]
    floor: float | None = None

    def by_paper(self, aggregation: str = "max") -> Run:
        """Passage hits to paper hits: a paper scores its best passage (or best + half the second, `sum2`)."""
        if aggregation == "max":  # best first: a paper's first hit is its best, and the papers are in order
            first: dict[str, float] = {}
            previous = float("inf")
            for _, score, paper_id in self.hits:
                if score > previous:
                    break  # not best first after all: the general path below sorts
                previous = score
                if paper_id not in first:
                    first[paper_id] = score
            else:
                floor = self.hits[-1][1] if self.hits else None
                return Run([(paper_id, score, paper_id) for paper_id, score in first.items()], floor)
        best: dict[str, list[float]] = {}
        for _, score, paper_id in self.hits:
            scores = best.setdefault(paper_id, [])
            if len(scores) < 2:
                scores.append(score)
        if aggregation == "sum2":
            merged = {p: s[0] + (0.5 * max(s[1], 0.0) if len(s) > 1 else 0.0) for p, s in best.items()}
            floor = None
        else:
            merged = {p: s[0] for p, s in best.items()}
            floor = min((score for _, score, _ in self.hits), default=None)
        ranked = sorted(merged.items(), key=lambda item: -item[1])
        return Run([(paper_id, score, paper_id) for paper_id, score in ranked], floor)

    def top(self, n: int) -> list[tuple[str, float, str]]:
        return self.hits[:n]


def fuse(
    runs: dict[str, Run],
    weights: dict[str, float],
    *,
    method: str,
    candidates: int,
    rrf_k: int,
    normalization: str = "minmax",
    papers: set[str] | None = None,
) -> dict[str, float]:
    """Fused score per id (ids no retriever put in its top `candidates` are absent). With `papers`, only the hits of
    those papers are scored; each run is still normalized over all its top candidates, so their scores do not
    change."""
    fused: dict[str, float] = {}
    for name, run in runs.items():
        weight = weights.get(name, 1.0)
        top = run.top(candidates)
        if weight <= 0 or not top:
            continue
        if method == "rrf":
            for rank, (key, _, paper_id) in enumerate(top, start=1):
                if papers is None or paper_id in papers:
                    fused[key] = fused.get(key, 0.0) + weight / (rrf_k + rank)
            continue
        values = [score for _, score, _ in top]
        whole = run.floor is not None and len(top) == len(run.hits)
        high, low = values[0], (min(run.floor, values[-1]) if whole else values[-1])
        if high <= 0 and name.endswith("fulltext"):
            continue
        get = fused.get
        if normalization == "minmax" and high - low > 1e-9:  # the default, inline: ~400 hits per query
            scale = weight / (high - low)
            for key, score, paper_id in top:
                if papers is None or paper_id in papers:
                    fused[key] = get(key, 0.0) + (score - low) * scale
            continue
        for (key, _score, paper_id), normalized in zip(
            top, _normalize(values, normalization, high, low), strict=True
        ):
            if papers is None or paper_id in papers:
                fused[key] = get(key, 0.0) + weight * normalized
    return fused


def _normalize(values: list[float], method: str, high: float, low: float) -> Iterable[float]:
    if method == "zscore":
        mean = sum(values) / len(values)
        std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        return [((v - mean) / std if std > 1e-9 else 0.0) + 3.0 for v in values]
    if method == "max":
        return [v / high if high > 1e-9 else 1.0 for v in values]
    span = high - low
    return [(v - low) / span if span > 1e-9 else 1.0 for v in values]


def ranked(scores: dict[str, float], n: int | None = None) -> list[tuple[str, float]]:
    """Ids by descending score (ties by id, so every store gives the same order)."""
    items = scores.items()
    if n is not None and 0 < n * 4 < len(scores):  # a few of many: sort only those at or above the n-th score
        cut = heapq.nlargest(n, scores.values())[-1]
        items = [(key, score) for key, score in items if score >= cut]
    order = sorted(items, key=lambda item: (-item[1], item[0]))
    return order if n is None else order[:n]
