"""Measures that can move and comparisons a skeptic accepts: CR@p divides by p, nDCG@p and AP@p grade by rank and
are not capped at 1/p, Holm's correction on a known family and on the declared primary family, human Context
Precision from SciFact's rationale sentences, the length-matched budget, and the held-out split of SciFact train."""

from __future__ import annotations

import json

import polars as pl
import pytest

from evals import contexts, human_labels, runner, scoring
from evals.comparison import Primary, holm, paired_comparisons, primary_row
from evals.judge import context_sentences
from evals.questions import load_beir_queries
from evals.recursive import Refinement
from evals.scored_run import question_rationales
from lumina_assets.core.schemas import Context
from lumina_assets.corpus import splits
from lumina_assets.corpus.collections import read_corpus, read_qrels


class Scripted:
    """Returns the given contexts for every query."""

    name = "scripted"

    def __init__(self, contexts):
        self.contexts = contexts

    def search(self, query, k):
        return list(self.contexts)[:k]


class NoRefiner:
    method = "none"

    def refine(self, question, previous, contexts):
        return Refinement(None, self.method, failure="unused")


def one_question(relevant=("P1",)):
    from evals.questions import questions_frame

    return questions_frame(
        [
            {
                "question_id": "q",
                "text": "q",
                "kind": "beir",
                "set_name": "t",
                "relevant_paper_ids": list(relevant),
                "held_out": True,
            }
        ]
    )


def scores_for(contexts, page_size):
    frame = runner.run_recursive(
        Scripted(contexts),
        one_question(),
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[page_size],
        max_depth=0,
        refiner=NoRefiner(),
    )
    return scoring.question_scores(frame, None, one_question()).row(0, named=True)


def test_cr_at_p_divides_by_p_and_graded_measures_reach_one():
    relevant_only = [Context("P1", ["the relevant passage"], paper_id="P1")]
    row = scores_for(relevant_only, page_size=5)
    # one relevant context returned of p = 5 asked: 1/5, not 1/1 (a provider returning less scores less)
    assert row["cr_qrels"] == pytest.approx(0.2) and row["contexts"] == 1
    # rank-graded: the one relevant paper at rank 1 scores 1.0, which CR@p can never reach with one relevant paper
    assert row["ndcg_p"] == pytest.approx(1.0) and row["ap_p"] == pytest.approx(1.0) and row["rr"] == 1.0
    second = [Context("N1", ["other"], paper_id="N1"), *relevant_only]
    row = scores_for(second, page_size=5)
    assert row["cr_qrels"] == pytest.approx(0.2)  # CR@p cannot tell rank 1 from rank 2 ...
    assert row["ap_p"] == pytest.approx(0.5) and row["ndcg_p"] == pytest.approx(1 / 1.5849625, rel=1e-6)
    # the same paper twice fills one slot only (contexts are per paper)
    twice = [Context("P1", ["a"], paper_id="P1"), Context("P1", ["b"], paper_id="P1")]
    assert scores_for(twice, page_size=2)["cr_qrels"] == pytest.approx(0.5)


def test_holm_on_a_known_family():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx(
        [1.0, 1.0]
    )  # 0.5 x 2 capped at 1; 0.9 x 1 raised to it (monotone)
    assert holm([]) == []


def per_question_frame(values: dict[str, list[float]], *, held_out=True):
    rows = []
    for provider, scores in values.items():
        for i, value in enumerate(scores):
            for page in (5, 10):
                rows.append(
                    {
                        "provider": provider,
                        "page_size": page,
                        "depth": 0,
                        "question_id": f"q{i}",
                        "kind": "beir",
                        "held_out": held_out,
                        "error": None,
                        "ndcg10": value,
                        "recall_p": value,
                    }
                )
    return pl.DataFrame(rows)


def test_declared_family_is_holm_corrected_and_the_rest_exploratory():
    n = 20
    lumina = [1.0] * n
    frame = per_question_frame(
        {"lumina": lumina, "bm25": [0.0] * 3 + [1.0] * 17, "dense": [0.0] * 10 + [1.0] * 10}
    )
    table = paired_comparisons(frame, {"ndcg10": "nDCG@10", "recall_p": "R@p"}, resamples=4000)
    family = table.filter(pl.col("role") != "exploratory")
    assert family.height == 2 and set(family["b"]) == {"bm25 d=0", "dense d=0"}
    assert family["page_size"].to_list() == [10, 10] and set(family["measure"]) == {"nDCG@10"}
    assert family["family_size"].to_list() == [2, 2]
    assert family.sort("b")["p_holm"].to_list() == pytest.approx(holm(family.sort("b")["p_value"].to_list()))
    primary = primary_row(table)
    assert primary["b"] == "bm25 d=0"  # the best baseline (mean 0.85 vs 0.5)
    assert "Holm p" in primary["verdict"]
    others = table.filter(pl.col("role") == "exploratory")
    assert (
        others.height == 6 and others["p_holm"].null_count() == 6
    )  # p = 5 and R@p: exploratory, uncorrected
    assert all(v.startswith("exploratory: ") for v in others["verdict"])
    # a set that is not held out of tuning has no family at all
    tuned = paired_comparisons(
        per_question_frame({"lumina": lumina, "bm25": [0.0] * n}, held_out=False),
        {"ndcg10": "nDCG@10"},
        resamples=200,
    )
    assert set(tuned["role"]) == {"exploratory"} and primary_row(tuned) is None
    assert Primary().describe().startswith("lumina vs the best baseline, nDCG@10 at p = 10, depth 0")


@pytest.fixture(scope="module")
def scifact(shared_data):
    folder = shared_data / "scifact"
    return folder, read_corpus(folder)


def test_human_cp_from_rationale_pairs(scifact, shared_data):
    folder, corpus = scifact
    rationale = json.loads(next(line for line in (folder / "rationales_train.jsonl").open() if line.strip()))
    claim, doc = rationale["query_id"], rationale["doc_id"]
    labels = human_labels.load_rationales(folder, "train")[claim]
    abstract = Context(corpus[doc]["title"], [corpus[doc]["text"]], paper_id=f"beir-scifact:{doc}")
    marks = human_labels.sentence_labels(abstract, labels)
    assert sum(marks) == len(rationale["sentence_indices"])  # the annotated sentences, found by text
    assert human_labels.human_cp([abstract], labels) == pytest.approx(sum(marks) / len(marks))
    other = next(d for d in corpus if d != doc)
    unrelated = Context(corpus[other]["title"], [corpus[other]["text"]])
    assert human_labels.human_cp([unrelated], labels) == 0.0
    assert human_labels.human_cp([abstract, unrelated], labels) == pytest.approx(sum(marks) / len(marks) / 2)
    assert human_labels.human_cp([], labels) == 0.0  # no contexts: 0, counted
    # a snippet cut from the rationale sentence (an external provider's chunk) still counts
    cut = Context("t", [labels[0][: max(40, len(labels[0]) // 2)]])
    assert human_labels.human_cp([cut], labels) == 1.0

    # end to end: a BEIR question's rationales come from its folder, its CP (human) from its contexts
    questions = load_beir_queries(folder, n=0, subset=splits.WHOLE).filter(pl.col("beir_query_id") == claim)
    rationales = question_rationales(questions)
    qid = questions["question_id"][0]
    assert rationales == {qid: labels}
    frame = runner.run_recursive(
        Scripted([abstract, unrelated]),
        questions,
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[2],
        max_depth=0,
        refiner=NoRefiner(),
    )
    budget = scoring.budget_of(scoring.token_counts(frame))
    row = scoring.question_scores(frame, None, questions, rationales=rationales, budget=budget).row(
        0, named=True
    )
    assert row["cp_human_returned"] == pytest.approx(sum(marks) / len(marks) / 2)  # the whitepaper's form
    judged = [contexts.judged_form(c) for c in (abstract, unrelated)]  # the equal form the judge sees
    assert row["cp_human"] == pytest.approx(human_labels.human_cp(judged, labels))
    assert row["cp_human_lm"] is not None and row["tokens_per_context"] > budget * 0.5


def test_length_budget_cuts_at_sentences():
    context = Context("t", ["One two three. Four five six seven. Eight nine."])
    assert human_labels.length([context]) == (3, 9)
    assert contexts.cut(context, 7).chunks == ["One two three. Four five six seven."]
    assert contexts.cut(context, 2).chunks == ["One two"]  # the first sentence cut when nothing fits
    assert context_sentences(contexts.cut(context, 5)) == ["One two three."]


def test_held_out_half_of_scifact_train_is_fixed_by_id(shared_data):
    qrels = read_qrels(shared_data / "scifact" / "qrels" / "train.tsv")
    held, tuning = splits.held_out_ids(qrels), splits.tuning_ids(qrels)
    assert (len(held), len(tuning)) == (388, 421) and not set(held) & set(tuning)
    assert splits.is_held_out("2") and not splits.is_held_out("0")  # by id alone, whatever the set
    assert splits.select(["0", "2"], "test") == (["0", "2"], True)  # a test split is held out whole
    assert splits.select(["0", "2"], "train") == (["2"], True)
    assert splits.select(["0", "2"], "train", splits.WHOLE) == (["0", "2"], False)
    questions = load_beir_queries(shared_data / "scifact", n=0)
    assert questions.height == 388 and questions["held_out"].all()
    assert set(questions["set_name"]) == {"scifact-train-heldout"}
    assert load_beir_queries(shared_data / "scifact", n=25).height == 25  # the cap
