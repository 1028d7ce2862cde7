"""CR / CP exactly per the paper's formulas on hand-checked cases, bootstrap CIs, ranking metrics, judge agreement."""

from __future__ import annotations

import math

import pytest

from evals.metrics import (
    ContextVerdict,
    agreement,
    bootstrap_ci,
    question_cp,
    question_cr,
    ranking_metrics,
)


def test_cr_is_fraction_of_relevant_contexts_and_mean_over_questions():
    q1 = [ContextVerdict(1), ContextVerdict(0), ContextVerdict(1), ContextVerdict(1)]  # 3/4
    q2 = [ContextVerdict(0), ContextVerdict(1)]  # 1/2
    q3: list[ContextVerdict] = []  # no contexts: scores 0 and is counted
    per_question = [question_cr(q) for q in (q1, q2, q3)]
    assert per_question == [0.75, 0.5, 0.0]
    estimate = bootstrap_ci(per_question, resamples=200)
    assert estimate.n == 3
    assert estimate.mean == pytest.approx((0.75 + 0.5 + 0.0) / 3)


def test_cp_is_mean_of_critical_sentence_fractions():
    # context 1: 2 of 4 sentences critical, context 2: 1 of 3, context 3: 0 of 2 -> (0.5 + 1/3 + 0) / 3
    verdicts = [ContextVerdict(1, 2, 4), ContextVerdict(1, 1, 3), ContextVerdict(0, 0, 2)]
    assert question_cp(verdicts) == pytest.approx((0.5 + 1 / 3 + 0.0) / 3)
    assert question_cp([]) == 0.0
    # a context with no sentences contributes 0 (nothing critical), it is not dropped
    assert question_cp([ContextVerdict(1, 1, 1), ContextVerdict(0, 0, 0)]) == pytest.approx(0.5)


def test_a_failed_verdict_fails_the_question_never_shrinks_n_j():
    mixed = [ContextVerdict(1, 1, 2), ContextVerdict(None, None, None), ContextVerdict(0, 0, 2)]
    assert question_cr(mixed) is None  # not 1 of the 2 judged: the question is counted as failed
    assert question_cp(mixed) is None
    precision_failed = [ContextVerdict(1, 1, 2), ContextVerdict(1, None, None)]
    assert question_cr(precision_failed) == pytest.approx(1.0) and question_cp(precision_failed) is None
    all_failed = [ContextVerdict(None, None, None)]
    assert question_cr(all_failed) is None
    assert question_cp(all_failed) is None
    assert bootstrap_ci([None, 1.0, 0.0], resamples=100).n == 2


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    values = [0.0, 0.2, 0.4, 0.9, 1.0, 0.5, 0.3]
    first = bootstrap_ci(values, resamples=500, seed=3)
    again = bootstrap_ci(values, resamples=500, seed=3)
    assert first == again
    assert first.low <= first.mean <= first.high
    assert first.low > 0.0 and first.high < 1.0
    assert bootstrap_ci([]).n == 0 and math.isnan(bootstrap_ci([]).mean)


def test_ranking_metrics_match_hand_computation():
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d9": 1}}
    run = {"q1": ["d3", "d2", "d1"], "q2": []}  # q2 retrieved nothing: counts as 0
    metrics = ranking_metrics(qrels, run)
    # q1: RR = 1; AP@10 = (1/1 + 2/3) / 2; nDCG@10 = (1 + 1/log2(4)) / (1 + 1/log2(3))
    ndcg_q1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert metrics["RR"] == pytest.approx(0.5)
    assert metrics["AP@10"] == pytest.approx(((1 + 2 / 3) / 2) / 2)
    assert metrics["nDCG@10"] == pytest.approx(ndcg_q1 / 2)
    assert metrics["R@10"] == pytest.approx(0.5)


def test_agreement_kappa_precision_recall():
    judge = [1, 1, 0, 0, 1, 0, 0, 0, 1, 0]
    human = [1, 0, 0, 0, 1, 1, 0, 0, 1, 0]
    result = agreement(judge, human)
    # tp=3 fp=1 fn=1 tn=5: po=0.8, pe=0.4*0.4+0.6*0.6=0.52, kappa=(0.8-0.52)/0.48
    assert result.kappa == pytest.approx((0.8 - 0.52) / 0.48)
    assert result.precision == pytest.approx(0.75)
    assert result.recall == pytest.approx(0.75)
    assert result.n == 10 and result.positives == 4
    with pytest.raises(ValueError):
        agreement([1], [1, 0])
