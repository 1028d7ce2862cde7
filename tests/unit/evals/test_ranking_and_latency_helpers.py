"""The one ir_measures helper takes a run as ranked ids or as retriever scores, averages over the questions that
have a relevant document, and `eval beir`'s evaluate_run is that average under its own keys; the one latency
percentile turns seconds into milliseconds."""

from __future__ import annotations

import math

import pytest

from evals.collection_eval import evaluate_run
from evals.latency import percentile_ms
from evals.metrics import per_query_ranking, ranking_metrics


def test_scored_run_is_ranked_by_score_like_the_same_ranking_given_as_ids():
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d9": 1}}
    as_ids = {"q1": ["d3", "d2", "d1"], "q2": ["d8"]}
    as_scores = {"q1": {"d1": 0.1, "d3": 0.9, "d2": 0.5}, "q2": {"d8": 2.0}}
    assert ranking_metrics(qrels, as_scores) == ranking_metrics(qrels, as_ids)
    per_query = per_query_ranking(qrels, as_scores, ("nDCG@10", "RR"))
    assert per_query["q1"]["RR"] == 1.0 and per_query["q2"] == {"nDCG@10": 0.0, "RR": 0.0}
    assert per_query["q1"]["nDCG@10"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))


def test_questions_without_a_relevant_document_are_not_averaged():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 0}}  # q2 is judged, but nothing is relevant to it
    run = {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}
    assert set(per_query_ranking(qrels, run)) == {"q1"}
    assert ranking_metrics(qrels, run)["nDCG@10"] == 1.0
    assert ranking_metrics({"q2": {"d2": 0}}, run) == {}


def test_evaluate_run_is_the_shared_average_under_eval_beir_keys():
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d9": 1}, "q3": {"d4": 1}}
    run = {"q1": {"d3": 3.0, "d2": 2.0, "d1": 1.0}, "q2": {}}  # q2 empty, q3 missing: both count as 0
    result = evaluate_run(run, qrels)
    shared = ranking_metrics(qrels, run, ("nDCG@10", "AP@10", "R@100", "RR@10"))
    assert result == {
        "ndcg@10": shared["nDCG@10"],
        "map@10": shared["AP@10"],
        "recall@100": shared["R@100"],
        "mrr@10": shared["RR@10"],
    }
    assert result["mrr@10"] == pytest.approx(1 / 3) and result["recall@100"] == pytest.approx(1 / 3)
    assert evaluate_run({}, {}) == {"ndcg@10": 0.0, "map@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}


def test_percentile_ms_is_numpy_linear_in_milliseconds():
    seconds = [0.010, 0.020, 0.030, 0.040, 0.100]
    assert percentile_ms(seconds, 50) == pytest.approx(30.0)
    assert percentile_ms(seconds, 95) == pytest.approx(40.0 + 0.8 * 60.0)  # between the 4th and 5th sample
    assert percentile_ms(seconds, 100) == pytest.approx(100.0)
    assert percentile_ms([], 50) == 0.0
