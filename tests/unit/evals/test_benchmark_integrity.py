"""Issue 14: a provider error is a failure (not an empty result) and only at the depths it affects; n counts scored
questions; the paired test gives known answers on constructed data; BEIR folders with only a test split work."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from evals import runner, scoring
from evals.comparison import paired_comparisons
from evals.matching import PaperMatcher
from evals.metrics import paired_test
from evals.questions import gather_user_queries, load_beir_queries, questions_frame
from evals.recursive import Refinement
from lumina_assets.core.schemas import Context
from lumina_assets.corpus.collections import CollectionError, pick_split


class Provider:
    """Question "good" finds its relevant paper P1 first at every depth; the refined query of "flaky" fails."""

    name = "flaky"

    def search(self, query, k):
        if query == "flaky refined 2":
            raise RuntimeError("HTTP 429 at depth 2")
        head = [Context(title="P1", chunks=[f"{query} relevant"], paper_id="P1")]
        return head + [
            Context(title=f"N{i}", chunks=[f"{query} n{i}"], paper_id=f"N{i}") for i in range(k + 2)
        ]


class Refiner:
    method = "scripted"

    def refine(self, question, previous, contexts):
        depth = int(previous.rsplit(" ", 1)[1]) + 1 if "refined" in previous else 1
        return Refinement(f"{question} refined {depth}", self.method)


def questions():
    return questions_frame(
        [
            {"question_id": q, "text": q, "kind": "beir", "set_name": "t", "relevant_paper_ids": ["P1"]}
            for q in ("good", "flaky")
        ]
    )


def test_provider_error_at_depth_two_is_counted_and_leaves_other_depths_scored():
    frame = runner.run_recursive(
        Provider(),
        questions(),
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[3],
        max_depth=3,
        refiner=Refiner(),
    )
    assert frame.filter(pl.col("error").is_null())["contexts"].list.len().to_list() == [3] * 6
    per_question = scoring.question_scores(frame, None, questions())
    scores = scoring.score(per_question, resamples=50)
    table = scores.filter(pl.col("question_set") == "all").sort("depth")
    assert table["n"].to_list() == [2, 2, 1, 1]  # n = scored questions
    assert table["failed"].to_list() == [0, 0, 1, 1]
    assert table["failure_rate"].to_list() == [0.0, 0.0, 0.5, 0.5]
    # the failure is left out, not scored 0: the scored question still finds its paper at depths 2 and 3
    assert table["R@p"].to_list() == [1.0, 1.0, 1.0, 1.0]
    # each level's first context is a passage of P1: one paper, so it fills one of the p slots at every depth
    # (fused by paper, never two slots), and CR@p stays 1/p
    assert table["P@p (qrels, distinct papers)"].to_list() == pytest.approx([1 / 3] * 4)


def test_qrels_match_external_contexts_by_doi():
    frame = runner.run_recursive(
        type("P", (), {"name": "ext", "search": lambda self, q, k: [Context("x", ["t"], doi="10.1/ABC")]})(),
        questions().head(1),
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[1],
        max_depth=0,
        refiner=Refiner(),
    )
    matcher = PaperMatcher.from_papers(pl.DataFrame([{"paper_id": "P1", "title": "t", "doi": "10.1/abc"}]))
    scored = scoring.question_scores(frame, None, questions(), matcher=matcher)
    assert scored["recall_p"].to_list() == [1.0] and scored["cr_qrels"].to_list() == [1.0]


def test_paired_test_known_answers():
    # every one of 10 questions better by 1: only the all-plus and all-minus sign patterns reach |mean| = 1
    test = paired_test([1.0] * 10, [0.0] * 10)
    assert test.exact and test.p_value == pytest.approx(2 / 1024) and test.diff == 1.0
    assert math.isinf(test.effect_size) and test.p_value < 0.05
    # differences 1, 1, 1, -1: 10 of the 16 sign patterns have |mean| >= 0.5
    test = paired_test([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    assert test.p_value == pytest.approx(10 / 16)
    assert test.effect_size == pytest.approx(0.5 / 1.0)  # mean 0.5, sample SD 1.0
    assert paired_test([0.3] * 5, [0.3] * 5).p_value == 1.0
    # Monte Carlo beyond 16 pairs agrees with the exact answer's order of magnitude
    assert paired_test([1.0] * 30, [0.0] * 30, resamples=2000).p_value == pytest.approx(1 / 2001)


def test_comparisons_say_not_significant():
    rows = []
    for i in range(12):
        for provider, value in (("lumina", 1.0 if i < 11 else 0.0), ("bm25", 0.0 if i < 11 else 1.0)):
            rows.append(
                {
                    "provider": provider,
                    "page_size": 5,
                    "depth": 0,
                    "question_id": f"q{i}",
                    "kind": "beir",
                    "error": None,
                    "ndcg10": value,
                    "recall_p": 0.5,
                }
            )
    frame = pl.DataFrame(rows)
    table = paired_comparisons(frame, {"ndcg10": "nDCG@10", "recall_p": "R@p"})
    ndcg = table.filter(pl.col("measure") == "nDCG@10").row(0, named=True)
    assert ndcg["a"] == "lumina d=0" and ndcg["n"] == 12
    # no held-out flag on these questions: nothing is confirmatory, every comparison is labelled exploratory
    assert ndcg["role"] == "exploratory" and ndcg["verdict"].startswith("exploratory: lumina d=0 higher")
    recall = table.filter(pl.col("measure") == "R@p").row(0, named=True)
    assert recall["p_value"] == 1.0 and recall["verdict"].startswith("exploratory: not significant")


@pytest.fixture
def test_only_beir(tmp_path):
    folder = tmp_path / "trec-covid-mini"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": f"T{i}", "text": f"text {i}"} for i in range(3)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(3)]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t2\nq2\td2\t0\n"
    )
    return folder


def test_beir_folder_with_only_test_qrels(test_only_beir):
    assert pick_split(test_only_beir) == "test"
    frame = gather_user_queries([], test_only_beir, beir_queries=5, seed=1, split="", papers=None)
    # q2's only judgment is 0 (not relevant): a query without a relevant document is no BEIR question
    assert frame.height == 2 and set(frame["set_name"]) == {"trec-covid-mini-test"}
    assert frame["held_out"].to_list() == [True, True]  # a test split is held out whole
    assert set(frame["generator"]) == {"beir:trec-covid-mini/test"}
    assert load_beir_queries(test_only_beir, n=5, split="train,test").height == 2
    with pytest.raises(CollectionError, match="available: test"):
        load_beir_queries(test_only_beir, n=5, split="train")


def test_runs_are_stored_apart_and_compared_explicitly(data_dir):
    from evals import runs

    def stored(run_id, ndcg, providers):
        scores = pl.DataFrame(
            [
                {"question_set": "beir", "provider": p, "page_size": 5, "depth": 0, "n": 4, "nDCG@10": ndcg}
                for p in providers
            ]
        )
        manifest = {"run_id": run_id, "questions": "qf", "providers": providers, "created": run_id}
        runs.write_run(manifest, scores, pl.DataFrame({"question_id": ["q"]}))

    stored("a1", 0.5, ["lumina", "bm25"])
    stored("b2", 0.75, ["bm25"])
    assert [m["run_id"] for m in runs.list_runs()] == ["a1", "b2"]
    assert runs.read_run("a1")[1]["provider"].to_list() == ["lumina", "bm25"]  # the earlier run is intact
    table = runs.compare_runs("a1", "b2")
    assert table["provider"].to_list() == ["bm25"]  # only rows present in both runs
    assert table["nDCG@10 Δ"].to_list() == [0.25] and table["same_questions"].to_list() == [True]
