"""Recall@100 among the qrels measures: the providers on Lumina's index are asked once more for the top 100 papers
(apart from the scored pages), and R@100 is the share of a question's relevant papers in that ranking."""

from __future__ import annotations

import polars as pl
import pytest

from evals import deep_recall, runner, scoring
from lumina_assets.core.schemas import Context


class Ranked:
    """A provider with a fixed ranking of 150 papers: relevant papers at ranks 3 and 120."""

    name = "lumina"

    def __init__(self):
        self.asked: list[int] = []

    def search(self, query: str, k: int) -> list[Context]:
        self.asked.append(k)
        return [Context(title=f"paper {i}", chunks=[], paper_id=f"p{i}") for i in range(150)][:k]


def test_recall_at_100_from_a_separate_deep_search(data_dir):
    questions = pl.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "text": ["claim one", "claim two"],
            "kind": ["beir", "beir"],
            "relevant_paper_ids": [["p2", "p119"], []],
        }
    )
    provider = Ranked()
    deep_recall.write("lumina", deep_recall.collect(provider, questions))
    assert provider.asked == [100]  # only the question with qrels, once, at depth 100
    deep = deep_recall.read(["lumina", "bm25"])
    assert list(deep) == [("lumina", "q1")] and len(deep[("lumina", "q1")]) == 100

    page = runner.query_provider(provider, questions.head(1), 10)
    recursive = page.with_columns(page_size=pl.lit(10, pl.Int32), depth=pl.lit(0, pl.Int32)).select(
        "question_id", "provider", "page_size", "depth", "contexts", "error"
    )
    row = scoring.question_scores(recursive, None, questions, deep=deep).row(0, named=True)
    assert row["recall_100"] == pytest.approx(0.5)  # p2 within the top 100, p119 not
    assert row["recall_p"] == pytest.approx(0.5)  # the page of 10 holds p2 alone
    table = scoring.score(scoring.question_scores(recursive, None, questions, deep=deep), resamples=20)
    assert table.filter(pl.col("question_set") == "all")["R@100"][0] == pytest.approx(0.5)
