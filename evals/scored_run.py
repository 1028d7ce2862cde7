"""One benchmark run scored end to end for `benchmark_scores`: matching, qrels exclusions, rationale labels, the
length-matched budget, per-question scores, CIs, the judge's agreement and the paired comparisons."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from evals import contexts, human_labels, judge_vs_labels, scoring
from evals.comparison import Primary, paired_comparisons
from evals.matching import MATCH_COUNT_SCHEMA, PaperMatcher, match_counts, qrels_exclusions

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


SLICE_QUESTIONS = 500  # questions scored at a time


def _slices(
    recursive: pl.LazyFrame, verdicts: pl.LazyFrame | None, questions: pl.DataFrame, size: int
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]]:
    """(questions, their levels of every provider, their verdicts), `size` questions at a time."""
    for start in range(0, questions.height, max(size, 1)):
        part = questions.slice(start, size)
        wanted = pl.col("question_id").is_in(part["question_id"].implode())
        yield (
            part,
            recursive.filter(wanted).collect(),
            verdicts.filter(wanted).collect() if verdicts is not None else None,
        )


def score_run(
    recursive: pl.DataFrame | pl.LazyFrame,
    verdicts: pl.DataFrame | pl.LazyFrame | None,
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
    slice_questions: int = SLICE_QUESTIONS,
) -> ScoredRun:
    """The run scored a slice of questions at a time: a first pass counts what the qrels exclusions and the
    length-matched budget need, a second scores each question and collects the judge-agreement pairs."""
    recursive = recursive.lazy()
    verdicts = verdicts.lazy() if verdicts is not None else None
    matcher = PaperMatcher.from_papers(papers)
    counts_parts, lengths = [], {}
    for _, rows, _ in _slices(recursive, None, questions, slice_questions):
        counts_parts.append(match_counts(rows, matcher))
        for provider, values in scoring.token_counts(rows, form).items():
            lengths.setdefault(provider, []).extend(values)
        human_labels.clear_caches()
    counts = _sum_counts(counts_parts)
    excluded = qrels_exclusions(counts)
    rationales = question_rationales(questions)
    budget = scoring.budget_of(lengths)
    per_question, proxy, sentences = [], {}, {}
    for part, rows, part_verdicts in _slices(recursive, verdicts, questions, slice_questions):
        per_question.append(
            scoring.question_scores(
                rows,
                part_verdicts,
                part,
                matcher=matcher,
                rationales=rationales,
                qrels_excluded=excluded,
                budget=budget,
                deep=deep,
                form=form,
            )
        )
        found = judge_vs_labels.proxy_pairs(
            rows, part_verdicts, part, exclude=proxy_exclude, matcher=matcher, form=form
        )
        for provider, pairs in found.items():
            proxy.setdefault(provider, {}).update(pairs)
        for provider, pairs in judge_vs_labels.sentence_pairs(
            rows, part_verdicts, part, rationales, form=form
        ).items():
            sentences.setdefault(provider, {}).update(pairs)
        human_labels.clear_caches()  # the next slice's contexts are others
    per_question = _provider_order(per_question, recursive)
    scores = scoring.score(
        per_question,
        resamples=bootstrap_resamples,
        proxy=judge_vs_labels.proxy_from_pairs(proxy),
        sentence_agreement=judge_vs_labels.sentences_from_pairs(sentences),
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
    )


def _sum_counts(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """The slices' match counts as one row per provider (each count summed: a result is one question's)."""
    filled = [p for p in parts if p.height]
    if not filled:
        return parts[0] if parts else pl.DataFrame(schema=MATCH_COUNT_SCHEMA)
    frame = pl.concat(filled)
    numbers = [c for c in frame.columns if c != "provider"]
    return (
        frame.group_by("provider", maintain_order=True)
        .agg(pl.col(c).sum() for c in numbers)
        .sort("provider")
        .cast(MATCH_COUNT_SCHEMA)
    )


def _provider_order(parts: list[pl.DataFrame], recursive: pl.LazyFrame) -> pl.DataFrame:
    """The slices' per-question rows in the levels' provider order, each provider's rows in question order."""
    filled = [p for p in parts if p.height]
    if not filled:
        return parts[0] if parts else pl.DataFrame(schema=scoring.QUESTION_SCORE_SCHEMA)
    frame = pl.concat(filled, how="diagonal_relaxed")
    providers = (
        recursive.select(pl.col("provider").unique(maintain_order=True)).collect()["provider"].to_list()
    )
    rank = {name: i for i, name in enumerate(providers)}
    return (
        frame.with_columns(pl.col("provider").replace_strict(rank, default=len(rank)).alias("_order"))
        .sort("_order", maintain_order=True)
        .drop("_order")
    )
