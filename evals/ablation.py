"""`lumina eval beir --ablation`: the defaults, plain RRF (k = 60) of passage BM25 + passage vectors, each
retriever alone, then each stage switched off, each row with a paired test against plain RRF."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evals.metrics import PairedTest, paired_test, per_query_ranking

BASELINE = "plain RRF (BM25 + MiniLM, k=60)"
DEFAULTS = "defaults"
_RRF_WEIGHTS = {"passage_vectors": 1.0, "passage_fulltext": 1.0}
_UNSMOOTHED = {"neighbour_smoothing": 0.0}  # a retriever alone, or plain RRF, is just that: no corpus graph

COMPARISONS: dict[str, dict] = {
    DEFAULTS: {},
    BASELINE: {**_UNSMOOTHED, "fusion": "rrf", "rrf_k": 60, "paper_fulltext": False, "weights": _RRF_WEIGHTS},
    "BM25 alone (passages)": {**_UNSMOOTHED, "passage_vectors": False, "paper_fulltext": False},
    "MiniLM alone (passage vectors)": {**_UNSMOOTHED, "passage_fulltext": False, "paper_fulltext": False},
}

STAGES: dict[str, dict] = {
    "- query parsing": {"parse_query": False},
    "- paper full text": {"paper_fulltext": False},
    # on by default (k = 3, 0.2, chosen on the SciFact train and CISI qrels): the row shows what it is worth
    "- neighbour smoothing": dict(_UNSMOOTHED),
    "index store (no in-memory fast path)": {"store": "index"},
}


def ablation_rows() -> dict[str, dict]:
    """Configuration changes per row, in print order (the defaults first: they are what search runs)."""
    return {**COMPARISONS, **STAGES}


@dataclass(frozen=True)
class Comparison:
    name: str
    ndcg: float
    versus_baseline: PairedTest | None  # None for the baseline itself


def per_query_ndcg(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    return {q: values["nDCG@10"] for q, values in per_query_ranking(qrels, run, ["nDCG@10"]).items()}


def compare_to_baseline(
    per_query: Mapping[str, Mapping[str, float]], baseline: str = BASELINE
) -> list[Comparison]:
    """Each row's mean nDCG@10 and its paired test against the baseline row over the same queries."""
    base = per_query[baseline]
    queries = sorted(base)
    out = []
    for name, values in per_query.items():
        mean = sum(values.values()) / len(values) if values else 0.0
        test = None
        if name != baseline:
            test = paired_test([values.get(q, 0.0) for q in queries], [base[q] for q in queries])
        out.append(Comparison(name, mean, test))
    return out


def paired_column(comparison: Comparison) -> str:
    """'+0.021 [+0.010, +0.032] p=0.001' (difference from the baseline, its 95 % CI, permutation p)."""
    test = comparison.versus_baseline
    if test is None:
        return "(baseline)"
    return f"{test.diff:+.4f} [{test.low:+.4f}, {test.high:+.4f}] p={test.p_value:.3f}"


def table_lines(
    rows: Sequence[tuple[str, dict, float, float]], comparisons: Sequence[Comparison]
) -> list[str]:
    """Markdown rows: configuration, nDCG@10, MAP@10, Recall@100, MRR@10, vs plain RRF, p50 / p95 ms."""
    paired = {c.name: paired_column(c) for c in comparisons}
    lines = [
        "| configuration | nDCG@10 | MAP@10 | Recall@100 | MRR@10 | nDCG@10 vs plain RRF [95% CI] | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, metrics, p50, p95 in rows:
        lines.append(
            f"| {name} | {metrics['ndcg@10']:.4f} | {metrics['map@10']:.4f} | {metrics['recall@100']:.4f} | "
            f"{metrics['mrr@10']:.4f} | {paired.get(name, '')} | {p50:.1f} | {p95:.1f} |"
        )
    return lines
