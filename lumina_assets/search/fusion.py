"""Fusion over candidate sets: each retriever returns a ranked run of (id, score, paper id); runs are fused by
reciprocal rank or by weighted, normalized scores over each run's top candidates."""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass
class Run:
    """One retriever's ranked candidates, best first: (id, score, paper id). `floor`, when set, is the score at the
    retriever's own cut, where min-max normalization starts (so ties at the cut change no fused score)."""

    hits: list[tuple[str, float, str]]
    floor: float | None = None

    def by_paper(self) -> Run:
        """Passage hits to paper hits: a paper scores its first hit (its best, in a run ranked best first)."""
        first: dict[str, float] = {}
        for _, score, paper_id in self.hits:
            first.setdefault(paper_id, score)
        floor = min((score for _, score, _ in self.hits), default=None)
        ranked = sorted(first.items(), key=lambda item: -item[1])
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
    papers: set[str] | None = None,
) -> dict[str, float]:
    """Fused score per id in any run's top `candidates`: reciprocal rank (`rrf`) or weighted min-max normalized
    scores. With `papers`, only their hits are scored (each run still normalized over all its top candidates)."""
    fused: dict[str, float] = {}
    get = fused.get
    for name, run in runs.items():
        weight = weights.get(name, 1.0)
        top = run.top(candidates)
        if weight <= 0 or not top:
            continue
        if method == "rrf":
            for rank, (key, _, paper_id) in enumerate(top, start=1):
                if papers is None or paper_id in papers:
                    fused[key] = get(key, 0.0) + weight / (rrf_k + rank)
            continue
        whole = run.floor is not None and len(top) == len(run.hits)
        high, low = top[0][1], (min(run.floor, top[-1][1]) if whole else top[-1][1])
        if high <= 0 and name.endswith("fulltext"):
            continue
        scale = weight / (high - low) if high - low > 1e-9 else 0.0  # all tied: each gets the whole weight
        for key, score, paper_id in top:
            if papers is None or paper_id in papers:
                fused[key] = get(key, 0.0) + ((score - low) * scale if scale else weight)
    return fused


def ranked(scores: dict[str, float], n: int | None = None) -> list[tuple[str, float]]:
    """Ids by descending score (ties by id, so every store gives the same order)."""
    items = scores.items()
    if n is not None and 0 < n * 4 < len(scores):  # a few of many: sort only those at or above the n-th score
        cut = heapq.nlargest(n, scores.values())[-1]
        items = [(key, score) for key, score in items if score >= cut]
    order = sorted(items, key=lambda item: (-item[1], item[0]))
    return order if n is None else order[:n]
