"""The judge against the collection's own labels on this run's contexts, per provider: CR verdicts against qrels,
CP sentence verdicts against the human rationale sentences."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from evals import contexts as context_forms
from evals import human_labels
from evals.matching import PaperMatcher
from evals.metrics import agreement
from evals.runner import judged_pairs


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
    relevant, texts = {}, {}
    for question in questions.iter_rows(named=True):
        if question.get("relevant_paper_ids") and question["question_id"] not in exclude:
            relevant[question["question_id"]] = set(question["relevant_paper_ids"])
            texts[question["question_id"]] = question["text"]
    pairs: dict[str, dict[str, tuple[int, int]]] = {}
    for row, context, item in judged_pairs(recursive, texts, form):
        verdict = verdicts.get(item.key)
        if verdict is not None and not row.get("error"):
            found = matcher.paper_of(context) in relevant[row["question_id"]]
            pairs.setdefault(row["provider"], {})[item.key] = (int(verdict), int(found))
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
    texts = {
        question_id: text
        for question_id, text in zip(questions["question_id"], questions["text"], strict=True)
        if rationales.get(question_id)
    }
    pairs: dict[str, dict[str, tuple[list[int], list[int]]]] = {}
    for row, _, item in judged_pairs(recursive, texts, form):
        if item.key in sentence_verdicts and not row.get("error"):
            labels = human_labels.sentence_labels(item.context, rationales[row["question_id"]])
            pairs.setdefault(row["provider"], {})[item.key] = (list(sentence_verdicts[item.key]), labels)
    return pairs
