"""The judge against the collection's own labels on this run's contexts, per provider: CR verdicts against qrels,
CP sentence verdicts against the human rationale sentences."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from evals import contexts as context_forms
from evals import human_labels
from evals.judge import JudgeInput
from evals.matching import PaperMatcher
from evals.metrics import agreement
from evals.providers import contexts_from_rows
from evals.scoring import matched_paper


def proxy_from_pairs(pairs: Mapping[str, Mapping[str, tuple[int, int]]]) -> dict[str, dict[str, Any]]:
    """Per provider, the judge's CR verdicts' agreement with qrels over `proxy_pairs` (slices merged by pair key)."""
    out = {}
    for provider, found in pairs.items():
        judge, human = zip(*found.values(), strict=True)
        result = agreement(list(judge), list(human))
        out[provider] = {"kappa": result.kappa, "pairs": result.n, "positives": result.positives}
    return out


def proxy_pairs(
    recursive: pl.DataFrame,
    judgments: pl.DataFrame | None,
    questions: pl.DataFrame,
    *,
    exclude: set[str] | frozenset[str] = frozenset(),
    matcher: PaperMatcher | None = None,
    form: str = context_forms.EQUAL,
) -> dict[str, dict[str, tuple[int, int]]]:
    """Per provider, pair key -> (the judge's CR verdict, qrels' label) over questions with qrels, `exclude` left out."""
    matcher = matcher or PaperMatcher()
    verdicts = {
        row["key"]: row["relevant"]
        for row in (judgments.iter_rows(named=True) if judgments is not None else [])
    }
    if not verdicts:
        return {}
    meta = {row["question_id"]: row for row in questions.iter_rows(named=True)}
    pairs: dict[str, dict[str, tuple[int, int]]] = {}
    for row in recursive.iter_rows(named=True):
        question = meta.get(row["question_id"])
        if question is None or row.get("error") or row["question_id"] in exclude:
            continue
        relevant = set(question.get("relevant_paper_ids") or [])
        if not relevant:
            continue
        for context in contexts_from_rows(row["contexts"]):
            key = JudgeInput(
                row["question_id"], question["text"], context_forms.judged_form(context, form)
            ).key
            verdict = verdicts.get(key)
            if verdict is not None:
                pairs.setdefault(row["provider"], {})[key] = (
                    int(verdict),
                    int(matched_paper(context, matcher) in relevant),
                )
    return pairs


def sentences_from_pairs(
    pairs: Mapping[str, Mapping[str, tuple[list[int], list[int]]]],
) -> dict[str, dict[str, Any]]:
    """Per provider, the judge's CP sentence verdicts' agreement with the human labels over `sentence_pairs`."""
    out = {}
    for provider, found in pairs.items():
        result = human_labels.sentence_agreement(list(found.values()))
        if result is not None:
            out[provider] = result
    return out


def sentence_pairs(
    recursive: pl.DataFrame,
    judgments: pl.DataFrame | None,
    questions: pl.DataFrame,
    rationales: Mapping[str, list[str]],
    form: str = context_forms.EQUAL,
) -> dict[str, dict[str, tuple[list[int], list[int]]]]:
    """Per provider, pair key -> (the judge's sentence verdicts, the human labels) over questions with rationales."""
    if judgments is None or not judgments.height or not rationales:
        return {}
    sentence_verdicts = {
        row["key"]: row["sentence_verdicts"]
        for row in judgments.iter_rows(named=True)
        if row["sentence_verdicts"] is not None and row["precision_failure"] is None
    }
    texts = dict(zip(questions["question_id"].to_list(), questions["text"].to_list(), strict=True))
    pairs: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    for row in recursive.iter_rows(named=True):
        labels = rationales.get(row["question_id"])
        if not labels or row.get("error") or row["question_id"] not in texts:
            continue
        for context in (context_forms.judged_form(c, form) for c in contexts_from_rows(row["contexts"])):
            key = JudgeInput(row["question_id"], texts[row["question_id"]], context).key
            if key in sentence_verdicts:
                pairs.setdefault(row["provider"], {})[key] = (
                    list(sentence_verdicts[key]),
                    human_labels.sentence_labels(context, labels),
                )
    return pairs
