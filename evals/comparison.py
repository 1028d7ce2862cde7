"""Headline comparisons with a paired test over questions: each provider against the baseline at the same page size
and depth, and each provider's deepest recursion level against its own zero-shot, per question set. Only questions
scored on both sides are paired; a difference whose p-value is not below alpha is printed as not significant."""

from __future__ import annotations

from typing import Any

import polars as pl

from evals.metrics import paired_test

ALPHA = 0.05

COMPARISON_SCHEMA = {
    "question_set": pl.String,
    "page_size": pl.Int32,
    "measure": pl.String,
    "a": pl.String,
    "b": pl.String,
    "n": pl.Int32,
    "mean_a": pl.Float64,
    "mean_b": pl.Float64,
    "diff": pl.Float64,
    "diff_low": pl.Float64,
    "diff_high": pl.Float64,
    "p_value": pl.Float64,
    "effect_size": pl.Float64,
    "test": pl.String,
    "verdict": pl.String,
}


def _values(frame: pl.DataFrame, provider: str, page_size: int, depth: int, column: str) -> dict[str, float]:
    rows = frame.filter(
        (pl.col("provider") == provider)
        & (pl.col("page_size") == page_size)
        & (pl.col("depth") == depth)
        & pl.col("error").is_null()
        & pl.col(column).is_not_null()
    )
    return dict(zip(rows["question_id"].to_list(), rows[column].to_list(), strict=True))


def verdict(test, a: str, b: str, alpha: float = ALPHA) -> str:
    if test.n < 2:
        return "too few paired questions"
    if not test.significant(alpha):
        return f"not significant (p = {test.p_value:.3f})"
    better = a if test.diff > 0 else b
    return f"{better} higher (p = {test.p_value:.3f})"


def paired_comparisons(
    per_question: pl.DataFrame,
    measures: dict[str, str],
    *,
    baseline: str = "lumina",
    alpha: float = ALPHA,
    resamples: int = 10000,
) -> pl.DataFrame:
    """One row per (question set, page size, measure, pair). `measures` maps a per-question column to its label."""
    rows: list[dict[str, Any]] = []
    if per_question.height == 0:
        return pl.DataFrame(schema=COMPARISON_SCHEMA)
    providers = sorted(set(per_question["provider"].to_list()))
    first = baseline if baseline in providers else providers[0]
    for question_set in sorted(set(per_question["kind"].to_list())):
        frame = per_question.filter(pl.col("kind") == question_set)
        for page_size in sorted(set(frame["page_size"].to_list())):
            depths = sorted(set(frame.filter(pl.col("page_size") == page_size)["depth"].to_list()))
            deepest = depths[-1] if depths else 0
            pairs = [((first, 0), (other, 0)) for other in providers if other != first]
            pairs += [((p, deepest), (p, 0)) for p in providers] if deepest > 0 else []
            for column, label in measures.items():
                for (pa, da), (pb, db) in pairs:
                    a = _values(frame, pa, page_size, da, column)
                    b = _values(frame, pb, page_size, db, column)
                    shared = sorted(set(a) & set(b))
                    if not shared:
                        continue
                    test = paired_test([a[q] for q in shared], [b[q] for q in shared], resamples=resamples)
                    name_a, name_b = f"{pa} d={da}", f"{pb} d={db}"
                    rows.append(
                        {
                            "question_set": question_set,
                            "page_size": page_size,
                            "measure": label,
                            "a": name_a,
                            "b": name_b,
                            "n": test.n,
                            "mean_a": test.mean_a,
                            "mean_b": test.mean_b,
                            "diff": test.diff,
                            "diff_low": test.low,
                            "diff_high": test.high,
                            "p_value": test.p_value,
                            "effect_size": test.effect_size,
                            "test": "paired sign-flip permutation" + (" (exact)" if test.exact else ""),
                            "verdict": verdict(test, name_a, name_b, alpha),
                        }
                    )
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA) if rows else pl.DataFrame(schema=COMPARISON_SCHEMA)
