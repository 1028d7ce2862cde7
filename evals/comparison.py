"""Paired comparisons over questions, with one declared primary comparison and a Holm correction over its family
(lumina against every baseline at the primary measure, page size and depth; `evals.defaults`). Every other
comparison is exploratory with its uncorrected p-value; only questions scored on both sides are paired."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from evals import defaults
from evals.metrics import paired_test

ALPHA = defaults.ALPHA


@dataclass(frozen=True)
class Primary:
    """The declared primary comparison: `provider` against the best other provider by `measure` at `page_size`,
    `depth`, on the `question_set` questions."""

    measure: str = defaults.PRIMARY_MEASURE
    label: str = defaults.PRIMARY_LABEL
    page_size: int = defaults.PRIMARY_PAGE_SIZE
    depth: int = defaults.PRIMARY_DEPTH
    provider: str = defaults.PRIMARY_PROVIDER
    question_set: str = defaults.PRIMARY_QUESTION_SET
    alpha: float = ALPHA

    def describe(self) -> str:
        return (
            f"{self.provider} vs the best baseline, {self.label} at p = {self.page_size}, depth {self.depth}, "
            f"held-out {self.question_set} questions"
        )


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
    "role": pl.String,  # primary | family | exploratory
    "p_holm": pl.Float64,
    "family_size": pl.Int32,
    "verdict": pl.String,
}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values in the input order: the i-th smallest times (m - i), made monotone, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _values(frame: pl.DataFrame, provider: str, page_size: int, depth: int, column: str) -> dict[str, float]:
    rows = frame.filter(
        (pl.col("provider") == provider)
        & (pl.col("page_size") == page_size)
        & (pl.col("depth") == depth)
        & pl.col("error").is_null()
        & pl.col(column).is_not_null()
    )
    return dict(zip(rows["question_id"].to_list(), rows[column].to_list(), strict=True))


def verdict(row: dict[str, Any], p: float, label: str, alpha: float = ALPHA) -> str:
    """What a comparison row shows at `alpha` by its p-value `p` (`label` names it)."""
    if row["n"] < 2:
        return "too few paired questions"
    shown = f"{label} = {p:.4f}" if p >= 0.0001 else f"{label} < 0.0001"
    if not p < alpha:
        return f"not significant ({shown})"
    better = row["a"] if row["diff"] > 0 else row["b"]
    return f"{better} higher ({shown})"


def paired_comparisons(
    per_question: pl.DataFrame,
    measures: dict[str, str],
    *,
    baseline: str = defaults.PRIMARY_PROVIDER,
    alpha: float = ALPHA,
    resamples: int = 10000,
    primary: Primary | None = None,
) -> pl.DataFrame:
    """One row per (question set, page size, measure, pair): `baseline` against every other provider at depth 0,
    and every provider's deepest level against its depth 0; the primary family Holm-corrected."""
    primary = primary or Primary(alpha=alpha)
    rows: list[dict[str, Any]] = []
    if per_question.height == 0:
        return pl.DataFrame(schema=COMPARISON_SCHEMA)
    providers = sorted(set(per_question["provider"].to_list()))
    first = baseline if baseline in providers else providers[0]
    for question_set in sorted(set(per_question["kind"].to_list())):
        frame = per_question.filter(pl.col("kind") == question_set)
        # the family needs every question of the set held out of Lumina's tuning
        held_out = "held_out" in frame.columns and bool(frame["held_out"].fill_null(False).all())
        confirmatory = question_set == primary.question_set and held_out and first == primary.provider
        for page_size in sorted(set(frame["page_size"].to_list())):
            depths = sorted(set(frame.filter(pl.col("page_size") == page_size)["depth"].to_list()))
            deepest = depths[-1] if depths else 0
            pairs = [((first, 0), (other, 0)) for other in providers if other != first]
            pairs += [((p, deepest), (p, 0)) for p in providers] if deepest > 0 else []
            for column, label in measures.items():
                if label == "nDCG@p" and page_size == 10 and "ndcg10" in measures:
                    continue  # nDCG@p at p = 10 is nDCG@10, already compared
                for (pa, da), (pb, db) in pairs:
                    a = _values(frame, pa, page_size, da, column)
                    b = _values(frame, pb, page_size, db, column)
                    shared = sorted(set(a) & set(b))
                    if not shared:
                        continue
                    test = paired_test([a[q] for q in shared], [b[q] for q in shared], resamples=resamples)
                    in_family = (
                        confirmatory
                        and column == primary.measure
                        and page_size == primary.page_size
                        and da == db == primary.depth
                        and pa == first
                        and pb != first
                    )
                    rows.append(
                        {
                            "question_set": question_set,
                            "page_size": page_size,
                            "measure": label,
                            "a": f"{pa} d={da}",
                            "b": f"{pb} d={db}",
                            "n": test.n,
                            "mean_a": test.mean_a,
                            "mean_b": test.mean_b,
                            "diff": test.diff,
                            "diff_low": test.low,
                            "diff_high": test.high,
                            "p_value": test.p_value,
                            "effect_size": test.effect_size,
                            "test": "paired sign-flip permutation" + (" (exact)" if test.exact else ""),
                            "role": "family" if in_family else "exploratory",
                        }
                    )
    _correct(rows, alpha)
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA)


def _correct(rows: list[dict[str, Any]], alpha: float) -> None:
    """Holm over the family, the best baseline's row marked primary, verdicts for every row."""
    family = [r for r in rows if r["role"] == "family"]
    for row, adjusted in zip(family, holm([r["p_value"] for r in family]), strict=True):
        row["p_holm"] = adjusted
        row["family_size"] = len(family)
    if family:
        max(family, key=lambda r: (r["mean_b"], r["b"]))["role"] = "primary"
    for row in rows:
        if row["role"] == "exploratory":
            row["verdict"] = "exploratory: " + verdict(row, row["p_value"], "uncorrected p", alpha)
        else:
            row["verdict"] = verdict(row, row["p_holm"], "Holm p", alpha)


def primary_row(comparisons: pl.DataFrame | None) -> dict[str, Any] | None:
    """The primary comparison of a run, None when the run has none (no held-out set, no baseline)."""
    if comparisons is None or "role" not in comparisons.columns:
        return None
    rows = comparisons.filter(pl.col("role") == "primary")
    return rows.row(0, named=True) if rows.height else None
