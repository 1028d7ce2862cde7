"""Pooled, graded judging: every distinct (question, paper) of every provider's top p is asked once, whoever
returned it (counted through a stand-in LLM behind the real judge), graded nDCG@p is trec_eval's, and Kendall's
tau between provider rankings matches a hand computation."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from types import SimpleNamespace

import polars as pl
import pytest

from evals import pooled, runner
from evals.judge import JudgeParseError, LLMJudge
from lumina_assets.core.schemas import Context

GRADES = {"P1": 3, "P2": 2, "P3": 0, "P4": 1, "P5": 0, "P6": 3, "P7": 0}


class StandInLLM:
    """Answers the judge's three prompts from the paper named in the context's title, and counts every prompt."""

    label = "stand-in:judge"
    is_offline = False

    def __init__(self):
        self.asked: Counter = Counter()

    def complete(self, prompt: str, *, temperature: float = 0.0, system: str | None = None):
        title = re.search(r'"title": "(P\d)"', prompt).group(1)
        question = re.search(r"Question: (q\d)", prompt).group(1)
        relevant = GRADES[title] >= 2
        if "##final score" in prompt:
            kind, text = "graded", f"reasoning ...\n##final score: {GRADES[title]}"
        elif "Sentences:" in prompt:
            count = len(re.findall(r"(?:^|\s)(\d+)\. ", prompt.split("Sentences:", 1)[1]))
            tag = "<critical>" if relevant else "<not_critical>"
            kind, text = "precision", "\n".join(f"{i}. {tag}" for i in range(1, count + 1))
        else:
            kind, text = "relevance", "<highly_relevant>" if relevant else "<not_relevant>"
        self.asked[(kind, question, title)] += 1
        return SimpleNamespace(text=text)


def _context(paper: str) -> Context:
    return Context(title=paper, chunks=[f"Text of paper {paper[1]}."], paper_id=paper)


RANKED = {
    ("A", "q1"): ["P1", "P2", "P3"],
    ("B", "q1"): ["P2", "P1", "P4"],
    ("C", "q1"): ["P5", "P1", "P2"],
    ("A", "q2"): ["P1", "P6"],
    ("B", "q2"): ["P6", "P7"],
    ("C", "q2"): [],
}


@pytest.fixture
def recursive() -> pl.DataFrame:
    rows = [
        {
            "question_id": question,
            "provider": provider,
            "page_size": 3,
            "depth": 0,
            "contexts": runner._context_dicts([_context(p) for p in papers]),
            "error": None,
        }
        for (provider, question), papers in RANKED.items()
    ]
    return pl.DataFrame(rows, schema_overrides={"contexts": pl.List(runner.CONTEXT_STRUCT)})


QUESTIONS = pl.DataFrame({"question_id": ["q1", "q2"], "text": ["q1 claim", "q2 claim"]})


def test_each_distinct_question_paper_is_asked_once_across_providers(recursive):
    pool = pooled.build_pool(recursive, QUESTIONS, page_size=3)
    assert [(i.question_id, i.paper) for i in pool] == [
        ("q1", "P1"),
        ("q1", "P2"),
        ("q1", "P3"),
        ("q1", "P4"),
        ("q1", "P5"),
        ("q2", "P1"),
        ("q2", "P6"),
        ("q2", "P7"),
    ]
    assert dict((i.paper, i.providers) for i in pool if i.question_id == "q1")["P1"] == ("A", "B", "C")
    llm = StandInLLM()
    judged = pooled.judge_pool(pool, LLMJudge(llm, workers=1))
    distinct = {(q, p) for (p_, q), papers in RANKED.items() for p in papers}
    assert len(distinct) == 8 and judged.height == 8
    for kind in ("relevance", "precision", "graded"):
        asked = {(q, p): n for (k, q, p), n in llm.asked.items() if k == kind}
        assert asked == {pair: 1 for pair in distinct}, kind  # once each, never once per provider
    assert dict(zip(judged["paper"], judged["grade"], strict=True))["P4"] == 1


def test_pooled_scores_and_graded_ndcg_by_hand(recursive):
    pool = pooled.build_pool(recursive, QUESTIONS, page_size=3)
    judged = pooled.judge_pool(pool, LLMJudge(StandInLLM(), workers=1))
    scores = pooled.scores_of(pooled.provider_values(recursive, judged, page_size=3, qrels={"q1": {"P1": 1}}))
    # A: q1 P1 P2 P3 -> relevant 2 of 3; q2 P1 P6 -> 2 of 2
    assert scores["A"]["pooled_cr"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert scores["C"]["pooled_cr"] == pytest.approx((2 / 3 + 0.0) / 2)  # no contexts: 0, counted
    # graded nDCG@3 for A, linear gains, log2 discounts; q1's ideal is 3, 2, 1 from the pool's grades
    q1 = (3 + 2 / math.log2(3)) / (3 + 2 / math.log2(3) + 1 / 2)
    assert scores["A"]["graded_ndcg"] == pytest.approx((q1 + 1.0) / 2)
    assert scores["A"]["n_graded"] == 2 and scores["A"]["n_qrels"] == 1
    assert scores["B"]["qrels_ndcg"] == pytest.approx(1 / math.log2(3))  # P1 at rank 2


def test_a_failed_verdict_fails_the_question_for_every_provider_holding_the_paper(recursive):
    pool = pooled.build_pool(recursive, QUESTIONS, page_size=3)
    judged = pooled.judge_pool(pool, LLMJudge(StandInLLM(), workers=1)).with_columns(
        relevance_failure=pl.when(pl.col("paper") == "P6").then(pl.lit("unparseable")).otherwise(None)
    )
    scores = pooled.scores_of(pooled.provider_values(recursive, judged, page_size=3))
    assert (scores["A"]["failed"], scores["A"]["n_judged"]) == (1, 1)
    assert (scores["C"]["failed"], scores["C"]["n_judged"]) == (0, 2)


def test_kendall_tau_matches_a_hand_computation():
    scores = {
        "A": {"pooled_cr": 0.9, "graded_ndcg": 0.8, "qrels_ndcg": 0.7},
        "B": {"pooled_cr": 0.5, "graded_ndcg": 0.2, "qrels_ndcg": 0.6},
        "C": {"pooled_cr": 0.1, "graded_ndcg": 0.4, "qrels_ndcg": None},
        "D": {"pooled_cr": 0.3, "graded_ndcg": 0.6, "qrels_ndcg": 0.9},
    }
    by_pair = {(r["a"], r["b"]): r for r in pooled.ranking_agreement(scores)}
    # LLM judge A > B > D > C, graded A > D > C > B: of the 6 provider pairs, AB AC AD DC concordant, BC BD
    # discordant: (4 - 2) / 6
    judge_vs_graded = by_pair[("LLM judge (pooled CR)", "graded judge")]
    assert judge_vs_graded["tau"] == pytest.approx(2 / 6) and judge_vs_graded["providers"] == 4
    # qrels only where they exist (C has none): D > A > B vs LLM A > B > D: AB concordant, AD BD discordant
    assert by_pair[("LLM judge (pooled CR)", "qrels")]["tau"] == pytest.approx((1 - 2) / 3)
    assert by_pair[("LLM judge (pooled CR)", "qrels")]["providers"] == 3


def test_grade_parsing_is_strict():
    assert pooled.parse_grade("M=2 T=3\n##final score: 2") == 2
    for bad in ("score 2", "##final score: 5", "##final score: 1\n##final score: 3"):
        with pytest.raises(JudgeParseError):
            pooled.parse_grade(bad)
    prompt = pooled.graded_prompt("does it work?", _context("P1"))
    assert "does it work?" in prompt and json.dumps("P1") in prompt and "##final score" in prompt


def test_the_run_record_and_report_section(recursive):
    from evals.report_sections import pooled_section

    questions = QUESTIONS.with_columns(pl.Series("relevant_paper_ids", [["P1"], []]))
    llm = StandInLLM()
    record = pooled.pooled_run(recursive, questions, None, LLMJudge(llm, workers=1), page_size=3)
    assert record["pool_items"] == 8 and sum(llm.asked.values()) == 8 * 3
    assert record["providers"]["A"]["n_qrels"] == 1 and len(record["tau"]) == 3
    text = "\n".join(pooled_section({"pooled": json.loads(json.dumps(record))}))
    assert "8 pool items over 2 questions" in text and "| A | 4.0 | 0.833 |" in text
    assert record["providers"]["A"]["tokens_per_context"] == pytest.approx(4.0)  # "Text of paper N."
    assert "Kendall's tau" in text and pooled_section({}) == []


def test_an_unparseable_grade_is_retried_then_recorded_as_failed(recursive):
    class Stubborn(StandInLLM):
        def complete(self, prompt, *, temperature=0.0, system=None):
            if "##final score" in prompt:
                self.asked[("graded-bad", system)] += 1
                return SimpleNamespace(text="somewhat relevant")
            return super().complete(prompt, temperature=temperature, system=system)

    pool = pooled.build_pool(recursive, QUESTIONS, page_size=3)[:1]
    llm = Stubborn()
    judged = pooled.judge_pool(pool, LLMJudge(llm, workers=1, max_attempts=2))
    assert judged["grade"][0] is None and "unparseable" in judged["grade_failure"][0]
    assert sum(n for key, n in llm.asked.items() if key[0] == "graded-bad") == 2


def test_a_budget_reached_while_grading_stops_the_run_instead_of_failing_the_grade(recursive):
    from lumina_assets.core.llm import BudgetExhausted

    class Spent(StandInLLM):
        def complete(self, prompt, *, temperature=0.0, system=None):
            if "##final score" in prompt:
                raise BudgetExhausted("budget reached")
            return super().complete(prompt, temperature=temperature, system=system)

    pool = pooled.build_pool(recursive, QUESTIONS, page_size=3)[:1]
    with pytest.raises(BudgetExhausted):
        pooled.judge_pool(pool, LLMJudge(Spent(), workers=1, max_attempts=2))
