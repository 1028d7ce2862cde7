"""One context form for every provider: contexts are cut to one token budget by one rule that names no provider
(the provider's highest-ranked passage first, whole sentences), so a provider that orders its passages by score and
one that shows them in reading order both keep their best passage; the length-matched human-label row uses the
same rule, so it no longer measures chunk order."""

from __future__ import annotations

import polars as pl
import pytest

from evals import contexts, human_labels, runner, scoring
from evals.judge import JudgeInput
from lumina_assets.core.schemas import Context

INTRO = "Background sentences come first in the paper and say nothing about the claim at all here."
METHODS = "We recruited a cohort of two hundred adults and followed them for ten years in total."
BEST = "Vitamin D supplementation reduced hip fractures by a third in the treated group."


def _by_score() -> Context:
    """bm25's form: chunks best first."""
    return Context(title="T", chunks=[BEST, INTRO, METHODS], paper_id="p", passage_ids=["p#2", "p#0", "p#1"])


def _by_position() -> Context:
    """Lumina's form: chunks in reading order, its own ranking stated apart (best hit p#2, then p#0)."""
    return Context(
        title="T",
        chunks=[INTRO, METHODS, BEST],
        paper_id="p",
        passage_ids=["p#0", "p#1", "p#2"],
        ranked_passage_ids=["p#2", "p#0"],
    )


@pytest.mark.parametrize("make", [_by_score, _by_position])
def test_both_orderings_keep_their_best_passage(make):
    budget = human_labels.tokens(BEST) + 3  # room for the best passage only
    cut = contexts.cut(make(), budget)
    assert cut.chunks == [BEST] and cut.passage_ids == ["p#2"]
    assert cut.title == "T" and cut.paper_id == "p"


def test_next_passages_follow_the_providers_ranking_in_whole_sentences():
    budget = human_labels.tokens(BEST) + human_labels.tokens(INTRO)
    assert contexts.cut(_by_position(), budget).chunks == [
        BEST,
        INTRO,
    ]  # its second-ranked, not reading order
    assert contexts.cut(_by_score(), budget).chunks == [BEST, INTRO]
    two = Context(title="T", chunks=[f"{BEST} {METHODS}"])
    assert contexts.cut(two, human_labels.tokens(BEST) + 5).chunks == [
        BEST
    ]  # never half a sentence after one


def test_a_first_sentence_longer_than_the_budget_is_cut_to_it_and_a_short_snippet_is_judged_as_is():
    cut = contexts.cut(Context(title="T", chunks=[BEST]), 4)
    assert cut.chunks == [" ".join(BEST.split()[:4])]
    snippet = Context(title="S", chunks=["A short snippet about fractures."], doi="10.1/x")
    assert contexts.cut(snippet, 120) == snippet
    for budget in (5, 20, 40):
        for make in (_by_score, _by_position):
            assert sum(human_labels.tokens(c) for c in contexts.cut(make(), budget).chunks) <= budget


def test_the_judge_sees_the_equal_form_and_the_whitepaper_form_is_a_labelled_variant():
    row = {
        "question_id": "q1",
        "provider": "lumina",
        "page_size": 5,
        "depth": 0,
        "contexts": runner._context_dicts([_by_position()]),
        "error": None,
    }
    recursive = pl.DataFrame([row], schema_overrides={"contexts": pl.List(runner.CONTEXT_STRUCT)})
    questions = pl.DataFrame({"question_id": ["q1"], "text": ["does vitamin d prevent fractures?"]})
    equal = runner.judge_inputs(recursive, questions)
    assert [i.context.chunks for i in equal] == [contexts.cut(_by_position(), 120).chunks]
    assert BEST == equal[0].context.chunks[0]
    whitepaper = runner.judge_inputs(recursive, questions, form=contexts.WHITEPAPER)
    assert whitepaper[0].context.chunks == [INTRO, METHODS, BEST]
    assert "highest-ranked passage first" in contexts.describe() and "120" in contexts.describe()
    assert "whitepaper" in contexts.describe(contexts.WHITEPAPER)
    with pytest.raises(ValueError):
        contexts.judged_form(_by_score(), "shortest")
    assert equal[0].key == JudgeInput("q1", questions["text"][0], contexts.cut(_by_position(), 120)).key


def test_length_matched_human_cp_keeps_the_rationale_whatever_the_chunk_order(monkeypatch):
    """The rationale is the best passage of both providers; the old cut (first sentences) kept it only for the
    provider that orders by score. Scores read the judged form (here cut to 30 tokens) beside the returned one."""
    from evals import defaults

    monkeypatch.setattr(defaults, "CONTEXT_TOKENS", 30)
    rows = [
        {
            "question_id": "q1",
            "provider": name,
            "page_size": 5,
            "depth": 0,
            "contexts": runner._context_dicts([make()]),
            "error": None,
        }
        for name, make in (("bm25", _by_score), ("lumina", _by_position))
    ]
    recursive = pl.DataFrame(rows, schema_overrides={"contexts": pl.List(runner.CONTEXT_STRUCT)})
    questions = pl.DataFrame(
        {"question_id": ["q1"], "text": ["claim"], "kind": ["beir"], "relevant_paper_ids": [["p"]]}
    )
    budget = human_labels.tokens(BEST) + 2
    per_question = scoring.question_scores(
        recursive, None, questions, rationales={"q1": [BEST]}, budget=budget
    )
    by_provider = {r["provider"]: r for r in per_question.iter_rows(named=True)}
    assert by_provider["lumina"]["cp_human_lm"] == by_provider["bm25"]["cp_human_lm"] == pytest.approx(1.0)
    # as returned, both carry three passages with one rationale among three sentences
    assert by_provider["lumina"]["cp_human_returned"] == pytest.approx(1 / 3)
    assert by_provider["lumina"]["tokens_returned"] > by_provider["lumina"]["tokens_per_context"] <= 30
    assert by_provider["lumina"]["cp_human"] == pytest.approx(by_provider["bm25"]["cp_human"])


def test_a_run_can_judge_and_score_the_whitepaper_form(monkeypatch):
    """The labelled variant end to end: judge inputs and scores in the form the run names."""
    from evals import defaults

    monkeypatch.setattr(defaults, "CONTEXT_TOKENS", 20)
    row = {
        "question_id": "q1",
        "provider": "lumina",
        "page_size": 5,
        "depth": 0,
        "contexts": runner._context_dicts([_by_position()]),
        "error": None,
    }
    recursive = pl.DataFrame([row], schema_overrides={"contexts": pl.List(runner.CONTEXT_STRUCT)})
    questions = pl.DataFrame(
        {"question_id": ["q1"], "text": ["claim"], "kind": ["beir"], "relevant_paper_ids": [["p"]]}
    )
    equal = scoring.question_scores(recursive, None, questions).row(0, named=True)
    paper = scoring.question_scores(recursive, None, questions, form=contexts.WHITEPAPER).row(0, named=True)
    assert equal["tokens_per_context"] <= 20 < paper["tokens_per_context"] == paper["tokens_returned"]
    whitepaper = scoring.token_counts(recursive, contexts.WHITEPAPER)
    assert scoring.budget_of(whitepaper) > scoring.budget_of(scoring.token_counts(recursive))


def test_a_failed_verdict_is_counted_beside_the_judged_figure():
    from evals.report import headline_table

    rows = [
        {
            "question_id": qid,
            "provider": "bm25",
            "page_size": 5,
            "depth": 0,
            "contexts": runner._context_dicts([_by_score()]),
            "error": None,
        }
        for qid in ("q1", "q2")
    ]
    recursive = pl.DataFrame(rows, schema_overrides={"contexts": pl.List(runner.CONTEXT_STRUCT)})
    questions = pl.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "text": ["a", "b"],
            "kind": ["beir"] * 2,
            "relevant_paper_ids": [[], []],
        }
    )
    verdicts = [
        {
            "key": item.key,
            "question_id": item.question_id,
            "provider": "bm25",
            "judge": "llm:stand-in",
            "relevant": None if item.question_id == "q2" else 1,
            "relevance_failure": "unparseable answer" if item.question_id == "q2" else None,
            "critical": 1,
            "sentences": 3,
            "precision_failure": None,
        }
        for item in runner.judge_inputs(recursive, questions)
    ]
    judgments = pl.DataFrame(verdicts, schema={k: runner.JUDGMENT_SCHEMA[k] for k in verdicts[0]})
    per_question = scoring.question_scores(recursive, judgments, questions)
    assert per_question["cr"].to_list() == [1.0, None] and per_question["cr_failures"].to_list() == [0, 1]
    scores = scoring.score(per_question, resamples=20)
    row = scores.filter(pl.col("question_set") == "beir").row(0, named=True)
    assert (row["n"], row["n_scored_cr"], row["cr_failed_questions"], row["cp_failed_questions"]) == (
        2,
        1,
        1,
        0,
    )
    assert "1 question failed" in headline_table(scores, "beir", offline=False)
