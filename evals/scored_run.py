"""One benchmark run scored end to end, for `benchmark_scores`: match every provider's results to the collection's
papers, leave out of the qrels measures a provider none of whose results matched, read the human rationale labels
of the BEIR questions, pick the length-matched token budget, score every question, aggregate with CIs, measure the
judge against qrels and human labels, and run the paired comparisons (primary family Holm-corrected)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from evals import contexts, human_labels, scoring
from evals.comparison import Primary, paired_comparisons
from evals.matching import PaperMatcher, match_counts, qrels_exclusions

OFFLINE_MEASURES = {
    "ndcg10": "nDCG@10",
    "ndcg_p": "nDCG@p",
    "ap_p": "AP@p",
    "cr_qrels": "P@p (qrels, distinct papers)",
    "recall_p": "R@p",
    "cp_human": "CP (human)",
    "cp_human_lm": "CP (human, length-matched)",
}
JUDGED_MEASURES = {"cr": "CR", "cp": "CP"}


@dataclass
class ScoredRun:
    per_question: pl.DataFrame
    scores: pl.DataFrame
    comparisons: pl.DataFrame
    matching: list[dict[str, Any]] = field(default_factory=list)
    qrels_excluded: dict[str, str] = field(default_factory=dict)
    token_budget: int | None = None
    rationale_questions: int = 0


def question_rationales(questions: pl.DataFrame) -> dict[str, list[str]]:
    """Question id -> its claim's human rationale sentences, for BEIR questions whose folder ships them."""
    if "beir_folder" not in questions.columns:
        return {}
    beir = questions.filter(pl.col("beir_folder").is_not_null())
    out: dict[str, list[str]] = {}
    for (folder, split), group in beir.group_by("beir_folder", "beir_split"):
        ids = dict(zip(group["question_id"].to_list(), group["beir_query_id"].to_list(), strict=True))
        out.update(human_labels.rationales_for_questions(Path(folder), split, ids))
    return out


def score_run(
    recursive: pl.DataFrame,
    verdicts: pl.DataFrame | None,
    questions: pl.DataFrame,
    papers: pl.DataFrame | None,
    *,
    judged: bool,
    bootstrap_resamples: int = 2000,
    permutation_resamples: int = 10000,
    proxy_exclude: set[str] | frozenset[str] = frozenset(),
    primary: Primary | None = None,
    deep: dict | None = None,
    form: str = contexts.EQUAL,
) -> ScoredRun:
    matcher = PaperMatcher.from_papers(papers)
    counts = match_counts(recursive, matcher)
    excluded = qrels_exclusions(counts)
    rationales = question_rationales(questions)
    budget = scoring.token_budget(recursive, form)
    per_question = scoring.question_scores(
        recursive,
        verdicts,
        questions,
        matcher=matcher,
        rationales=rationales,
        qrels_excluded=excluded,
        budget=budget,
        deep=deep,
        form=form,
    )
    scores = scoring.score(
        per_question,
        resamples=bootstrap_resamples,
        proxy=scoring.proxy_agreement(
            recursive, verdicts, questions, exclude=proxy_exclude, matcher=matcher, form=form
        ),
        sentence_agreement=scoring.judge_vs_human(recursive, verdicts, questions, rationales, form=form),
    )
    measures = {**(JUDGED_MEASURES if judged else {}), **OFFLINE_MEASURES}
    comparisons = paired_comparisons(
        per_question, measures, resamples=permutation_resamples, primary=primary or Primary()
    )
    return ScoredRun(
        per_question=per_question,
        scores=scores,
        comparisons=comparisons,
        matching=counts.to_dicts(),
        qrels_excluded=excluded,
        token_budget=budget,
        rationale_questions=len(rationales),
    )
