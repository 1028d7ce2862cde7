"""Fitting the relevance line on judged collections (`lumina bench relevance-line`): each judged query's returned
papers with their fused score, cosine and judgment, the shares a line keeps, and the highest line keeping a share of
the relevant ones."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lumina_assets.search.relevance import relevance_scores

KEEP_RELEVANT = 0.95  # the share of judged-relevant results the fitted line keeps


@dataclass(frozen=True)
class Judged:
    """One returned paper of one judged query."""

    query_id: str
    paper_id: str
    rank: int
    fused: float
    cosine: float
    relevant: bool


def judged_results(
    engine,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]] | None,
    depth: int = 20,
    doc_id=lambda paper_id: paper_id,
):
    """Every paper of the top `depth` of each judged query, with its fused score, its cosine and its judgment
    (`doc_id(paper_id)` is the id the qrels use). `qrels=None`: queries from another collection, so every result
    is off topic (judged not relevant)."""
    out: list[Judged] = []
    for query_id, text in queries.items():
        judged = {} if qrels is None else qrels.get(query_id)
        if judged is None or (qrels is not None and not judged):
            continue
        contexts = engine.search(text, k=depth)
        cosines = relevance_scores(engine, contexts)
        for rank, context in enumerate(contexts, start=1):
            out.append(
                Judged(
                    query_id,
                    context.paper_id,
                    rank,
                    float(context.score),
                    cosines.get(context.paper_id, float("-inf")),
                    judged.get(doc_id(context.paper_id), 0) > 0,
                )
            )
    return out


def kept_shares(results: Iterable[Judged], line: float, score=lambda r: r.cosine) -> tuple[float, float]:
    """(share of the relevant results kept at or above `line`, share of the non-relevant ones kept)."""
    relevant = kept_relevant = other = kept_other = 0
    for result in results:
        kept = score(result) >= line
        if result.relevant:
            relevant, kept_relevant = relevant + 1, kept_relevant + kept
        else:
            other, kept_other = other + 1, kept_other + kept
    return kept_relevant / max(relevant, 1), kept_other / max(other, 1)


def fit_line(
    results: Sequence[Judged], keep_relevant: float = KEEP_RELEVANT, score=lambda r: r.cosine
) -> float:
    """The highest line (to 0.01) that keeps at least `keep_relevant` of the relevant results."""
    values = sorted((score(r) for r in results if r.relevant), reverse=True)
    if not values:
        return 0.0
    cut = values[min(len(values) - 1, max(0, int(np.ceil(keep_relevant * len(values))) - 1))]
    return float(np.floor(cut * 100) / 100)
