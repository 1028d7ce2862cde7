"""Score math, kept apart from any LLM call: CR and CP as the Lumina paper defines them, bootstrap CIs, ranking
metrics through ir_measures, and judge-vs-human agreement.

CR_j = (1/n_j) sum_i R_ij,   R_ij in {0, 1}                      CR = mean_j CR_j
CP_j = (1/n_j) sum_i s_ij / t_ij  (critical of total sentences)  CP = mean_j CP_j
A question with no contexts scores 0; a question with a failed verdict is counted as failed, not scored."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean

import numpy as np

CP_DEFINITION = (
    "CP = mean over questions of the mean over contexts of (critical sentences / sentences), the Lumina paper's "
    "Context Precision (what ragas once called context_relevancy); not ragas' rank-weighted context_precision."
)


@dataclass(frozen=True)
class ContextVerdict:
    """One judged context: relevance R in {0,1} and s critical of t sentences; None where the judge failed."""

    relevant: int | None
    critical: int | None = None
    sentences: int | None = None


def question_cr(verdicts: Sequence[ContextVerdict]) -> float | None:
    """CR_j over all n_j contexts; 0.0 for no contexts; None (a failed question) when a relevance verdict failed."""
    if not verdicts:
        return 0.0
    if any(v.relevant is None for v in verdicts):
        return None
    return sum(v.relevant for v in verdicts) / len(verdicts)


def question_cp(verdicts: Sequence[ContextVerdict]) -> float | None:
    """CP_j over all n_j contexts; 0.0 for no contexts; None (a failed question) when a precision verdict failed."""
    if not verdicts:
        return 0.0
    if any(v.critical is None or v.sentences is None for v in verdicts):
        return None
    # a context without sentences has nothing critical in it
    return sum(v.critical / v.sentences if v.sentences > 0 else 0.0 for v in verdicts) / len(verdicts)


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float
    n: int


RESAMPLE_CELLS = 2_000_000  # draws held at once by a bootstrap or permutation test


def _blocks(resamples: int, n: int) -> list[int]:
    """Resamples drawn a block of rows at a time, so memory stays flat. Blocks have an even number of rows, so the
    generator draws exactly what one call would (numpy draws small integers two per 64-bit word)."""
    rows = max(2, RESAMPLE_CELLS // max(n, 1) // 2 * 2)
    return [min(rows, resamples - start) for start in range(0, resamples, rows)]


def bootstrap_ci(values: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> Estimate:
    """Mean with a 95% percentile bootstrap CI over questions, None values (failed questions) left out; seeded, so
    a rerun prints the same interval."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    if data.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    if data.size == 1:
        return Estimate(float(data[0]), float(data[0]), float(data[0]), 1)
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [
            rng.choice(data, size=(rows, data.size), replace=True).mean(axis=1)
            for rows in _blocks(resamples, data.size)
        ]
    )
    alpha = (1 - 0.95) / 2  # computed as before, so archived runs replay to the same bits
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Estimate(float(data.mean()), float(low), float(high), int(data.size))


# ---------------------------------------------------------------- ranking metrics (qrels)

RANKING_MEASURES = ("nDCG@10", "AP@10", "R@10", "R@1000", "RR")  # R@1000: recall of every merged context

# a run: question id -> ranked document ids (best first), or -> {document id: score} as a retriever scored them
Ranking = Sequence[str] | Mapping[str, float]


def per_query_ranking(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Ranking],
    measures: Iterable[str] = RANKING_MEASURES,
) -> dict[str, dict[str, float]]:
    """question id -> {measure: value} via ir_measures for every question with a relevant document (0 where the run
    has nothing): the one place ranking metrics are computed."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    judged = {
        q: {d: int(r) for d, r in docs.items()}
        for q, docs in qrels.items()
        if any(r > 0 for r in docs.values())
    }
    out = {q: {str(m): 0.0 for m in parsed} for q in judged}
    scored: dict[str, dict[str, float]] = {}
    for qid in judged:
        ranking = run.get(qid) or {}
        if not isinstance(ranking, Mapping):  # ranked ids: the first occurrence keeps its rank
            ranked = list(dict.fromkeys(ranking))
            ranking = {doc: float(len(ranked) - rank) for rank, doc in enumerate(ranked)}
        if ranking:
            scored[qid] = dict(ranking)
    for metric in ir_measures.iter_calc(parsed, judged, scored):
        out[metric.query_id][str(metric.measure)] = float(metric.value)
    return out


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values present; None when there are none."""
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def ranking_metrics(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Ranking],
    measures: Iterable[str] = RANKING_MEASURES,
) -> dict[str, float]:
    """Each measure's mean over the questions with a relevant document; {} when no question has one."""
    measures = list(measures)
    per_query = per_query_ranking(qrels, run, measures)
    if not per_query:
        return {}
    names = next(iter(per_query.values()))
    return {name: sum(values[name] for values in per_query.values()) / len(per_query) for name in names}


# ---------------------------------------------------------------- judge agreement


@dataclass(frozen=True)
class Agreement:
    kappa: float
    precision: float
    recall: float
    accuracy: float
    n: int
    positives: int

    def fmt(self) -> str:
        return (
            f"Cohen's kappa {self.kappa:.3f}, precision {self.precision:.3f}, recall {self.recall:.3f}, "
            f"accuracy {self.accuracy:.3f} (n={self.n}, {self.positives} human-relevant)"
        )


def agreement(judge: Sequence[int], human: Sequence[int]) -> Agreement:
    """Judge verdicts vs human labels (1 = relevant), both as 0/1 lists of equal length."""
    if len(judge) != len(human):
        raise ValueError("judge and human label lists differ in length")
    n = len(judge)
    if n == 0:
        return Agreement(float("nan"), float("nan"), float("nan"), float("nan"), 0, 0)
    tp = sum(1 for j, h in zip(judge, human, strict=True) if j and h)
    fp = sum(1 for j, h in zip(judge, human, strict=True) if j and not h)
    fn = sum(1 for j, h in zip(judge, human, strict=True) if not j and h)
    tn = n - tp - fp - fn
    observed = (tp + tn) / n
    p_judge_yes = (tp + fp) / n
    p_human_yes = (tp + fn) / n
    expected = p_judge_yes * p_human_yes + (1 - p_judge_yes) * (1 - p_human_yes)
    kappa = (observed - expected) / (1 - expected) if expected < 1 else (1.0 if observed == 1 else 0.0)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return Agreement(kappa, precision, recall, observed, n, tp + fn)


# ---------------------------------------------------------------- paired comparison


@dataclass(frozen=True)
class PairedTest:
    """A paired sign-flip permutation test: mean difference a - b with a bootstrap CI, p-value, Cohen's d_z."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    low: float
    high: float
    p_value: float
    effect_size: float
    exact: bool


def paired_test(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10000, seed: int = 0, exact_up_to: int = 16
) -> PairedTest:
    """Sign-flip permutation test of mean(a - b) = 0 over paired questions. Exact (all 2^n sign patterns) up to
    `exact_up_to` questions, else `resamples` random flips (p counts the observed one, so it is never 0)."""
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = int(diffs.size)
    if n == 0:
        nan = float("nan")
        return PairedTest(0, nan, nan, nan, nan, nan, nan, nan, True)
    observed = abs(diffs.mean())
    tolerance = 1e-12
    if n <= exact_up_to:
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        means = np.abs((patterns * diffs).mean(axis=1))
        p_value = float((means >= observed - tolerance).mean())
        exact = True
    else:
        rng = np.random.default_rng(seed)
        means = np.concatenate(
            [
                np.abs((rng.choice([-1.0, 1.0], size=(rows, n)) * diffs).mean(axis=1))
                for rows in _blocks(resamples, n)
            ]
        )
        p_value = float(((means >= observed - tolerance).sum() + 1) / (resamples + 1))
        exact = False
    sd = float(diffs.std(ddof=1)) if n > 1 else 0.0
    if sd > 0:
        effect = float(diffs.mean() / sd)
    else:
        effect = 0.0 if diffs.mean() == 0 else math.copysign(math.inf, diffs.mean())
    ci = bootstrap_ci(diffs.tolist(), resamples=2000, seed=seed)
    return PairedTest(
        n, float(np.mean(a)), float(np.mean(b)), float(diffs.mean()), ci.low, ci.high, p_value, effect, exact
    )
