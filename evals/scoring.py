"""Scores of one benchmark run: per question, then per provider × page size × depth × question set with CIs.
The measures (judged CR / CP, qrels, human CP, length) are defined in docs/benchmark.md ("Method"); a failed
provider call keeps only its `error` and is never scored."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from evals import contexts as context_forms
from evals import human_labels
from evals.judge import JudgeInput
from evals.matching import PaperMatcher
from evals.metrics import ContextVerdict, bootstrap_ci, mean, per_query_ranking, question_cp, question_cr
from evals.providers import contexts_from_rows
from lumina_assets.core.schemas import Context

QUESTION_SCORE_SCHEMA = {
    "provider": pl.String,
    "page_size": pl.Int32,
    "depth": pl.Int32,
    "question_id": pl.String,
    "kind": pl.String,
    "set_name": pl.String,
    "held_out": pl.Boolean,
    "error": pl.String,
    "cr": pl.Float64,
    "cp": pl.Float64,
    "cr_failures": pl.Int32,
    "cp_failures": pl.Int32,
    "unjudged": pl.Int32,
    "contexts": pl.Int32,
    "sentences_per_context": pl.Float64,
    "tokens_per_context": pl.Float64,
    "tokens_returned": pl.Float64,
    "has_qrels": pl.Boolean,
    "qrels_excluded": pl.String,
    "cr_qrels": pl.Float64,
    "ndcg10": pl.Float64,
    "ndcg_p": pl.Float64,
    "ap_p": pl.Float64,
    "recall_p": pl.Float64,
    "recall_pool": pl.Float64,
    "recall_100": pl.Float64,
    "rr": pl.Float64,
    "passage_hit": pl.Float64,
    "cp_human": pl.Float64,
    "cp_human_returned": pl.Float64,
    "cp_human_lm": pl.Float64,
}

# qrels precision over the distinct papers of a page (not the judge's CR): its name in tables and the report
QRELS_PRECISION = "P@p (qrels, distinct papers)"
# per-question column -> the name it has in the scores table and the report
QRELS_MEASURES = {
    "cr_qrels": QRELS_PRECISION,
    "ndcg10": "nDCG@10",
    "ndcg_p": "nDCG@p",
    "ap_p": "AP@p",
    "recall_p": "R@p",
    "recall_100": "R@100",
    "passage_hit": "passage@p",
}
HUMAN_MEASURES = {
    "cp_human": "CP (human)",
    "cp_human_returned": "CP (human, as returned)",
    "cp_human_lm": "CP (human, length-matched)",
}


def token_counts(recursive: pl.DataFrame, form: str = context_forms.EQUAL) -> dict[str, list[int]]:
    """Per provider, the word tokens of each depth-0 context in the judged form (`token_budget` takes the median)."""
    out: dict[str, list[int]] = {}
    if not recursive.height:
        return out
    rows = recursive.filter((pl.col("depth") == 0) & pl.col("error").is_null())
    for provider, contexts in zip(rows["provider"].to_list(), rows["contexts"].to_list(), strict=True):
        out.setdefault(provider, []).extend(
            sum(human_labels.tokens(chunk) for chunk in context_forms.judged_form(c, form).chunks)
            for c in contexts_from_rows(contexts or [])
        )
    return out


def budget_of(counts: Mapping[str, list[int]]) -> int | None:
    """The length-matched budget: the smallest, over providers, of the median of `token_counts`; None without
    contexts."""
    medians = [statistics.median(values) for _, values in sorted(counts.items()) if values]
    return max(1, int(min(medians))) if medians else None


def _pool_papers(row: dict[str, Any], matcher: PaperMatcher) -> list[str]:
    """The collection papers in a level's merged pool (every level so far), matched like its contexts."""
    refs = row.get("pool_refs")
    if refs is None:  # stored before pools kept their titles and DOIs
        refs = [{"paper_id": pid} for pid in row.get("pool_paper_ids") or []]
    return [matcher.paper_of(context) for context in contexts_from_rows(refs)]


def _verdicts(judgments: pl.DataFrame | None) -> dict[str, ContextVerdict]:
    """The judge's verdicts by pair key; a failed CP verdict keeps only its CR."""
    return {
        row["key"]: ContextVerdict(
            row["relevant"],
            row["critical"] if row["precision_failure"] is None else None,
            row["sentences"] if row["precision_failure"] is None else None,
        )
        for row in (judgments.iter_rows(named=True) if judgments is not None else [])
    }


def _judged_measures(
    question_id: str, text: str, contexts: list[Context], verdicts: Mapping[str, ContextVerdict]
) -> dict[str, Any]:
    """CR and CP of one question's contexts (judged form), with the failed and unjudged counts."""
    judged = [verdicts.get(JudgeInput(question_id, text, c).key) if verdicts else None for c in contexts]
    missing = sum(1 for v in judged if v is None)
    failed_cr = sum(1 for v in judged if v is not None and v.relevant is None)
    failed_cp = sum(1 for v in judged if v is not None and v.critical is None)
    judged = [v if v is not None else ContextVerdict(None, None, None) for v in judged]
    return {
        "cr": question_cr(judged),
        "cp": question_cp(judged),
        "cr_failures": failed_cr,
        "cp_failures": failed_cp,
        "unjudged": missing,
    }


def _length_measures(contexts: list[Context], returned: list[Context]) -> dict[str, Any]:
    sentences, words = human_labels.length(contexts)
    _, words_returned = human_labels.length(returned)
    return {
        "contexts": len(contexts),
        "sentences_per_context": sentences,
        "tokens_per_context": words,
        "tokens_returned": words_returned,
    }


def _human_measures(
    labels: list[str], contexts: list[Context], returned: list[Context], budget: int | None
) -> dict[str, Any]:
    """Human CP on the judged form, as returned, and length-matched (when there is a budget)."""
    measures = {
        "cp_human": human_labels.human_cp(contexts, labels),
        "cp_human_returned": human_labels.human_cp(returned, labels),
    }
    if budget:
        measures["cp_human_lm"] = human_labels.human_cp(
            [context_forms.cut(c, budget) for c in returned], labels
        )
    return measures


@dataclass
class _RankedRuns:
    """The matched papers of every (provider, p, depth) and question with qrels, for one ranking pass each."""

    matcher: PaperMatcher
    deep: Mapping[tuple[str, str], list[Context]]
    runs: dict[tuple, dict[str, list[str]]] = field(default_factory=dict)
    pools: dict[tuple, dict[str, list[str]]] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(
        self, row: dict[str, Any], question: dict[str, Any], relevant: set[str], contexts, returned
    ) -> dict[str, Any]:
        """Records the question's papers; returns its P@p, R@100 (depth 0, from the deep search) and passage@p."""
        docs = [self.matcher.paper_of(c) for c in contexts]
        measures: dict[str, Any] = {"cr_qrels": len(set(docs) & relevant) / row["page_size"]}
        key = (row["provider"], row["page_size"], row["depth"])
        self.runs.setdefault(key, {})[row["question_id"]] = docs
        self.pools.setdefault(key, {})[row["question_id"]] = _pool_papers(row, self.matcher)
        self.qrels[row["question_id"]] = {pid: 1 for pid in relevant}
        ranked_deep = self.deep.get((row["provider"], row["question_id"]))
        if ranked_deep is not None and row["depth"] == 0:
            found = {self.matcher.paper_of(c) for c in ranked_deep[:100]}
            measures["recall_100"] = len(found & relevant) / len(relevant)
        if question.get("source_passage_id"):
            ids = {pid for c in returned for pid in c.passage_ids}
            measures["passage_hit"] = float(question["source_passage_id"] in ids)
        return measures

    def rankings(self) -> dict[tuple, dict[str, float]]:
        """(provider, p, depth, question) -> the ranking measures, one ir_measures pass per (provider, p, depth)."""
        out: dict[tuple, dict[str, float]] = {}
        for key, run in self.runs.items():
            page = key[1]
            subset = {q: self.qrels[q] for q in run}
            measures = list(dict.fromkeys(("nDCG@10", f"nDCG@{page}", f"AP@{page}", "R@1000", "RR")))
            ranked = per_query_ranking(subset, run, measures=measures)
            pooled = per_query_ranking(subset, self.pools.get(key, {}), measures=("R@1000",))
            for qid, values in ranked.items():
                out[(*key, qid)] = {
                    "ndcg10": values["nDCG@10"] if page >= 10 else None,  # a page of 5: nDCG@5 alone
                    "ndcg_p": values[f"nDCG@{page}"],
                    "ap_p": values[f"AP@{page}"],
                    "recall_p": values["R@1000"],
                    "rr": values["RR"],
                    "recall_pool": pooled[qid]["R@1000"],
                }
        return out


def question_scores(
    recursive: pl.DataFrame,
    judgments: pl.DataFrame | None,
    questions: pl.DataFrame,
    *,
    matcher: PaperMatcher | None = None,
    rationales: Mapping[str, list[str]] | None = None,
    qrels_excluded: Mapping[str, str] | None = None,
    budget: int | None = None,
    form: str = context_forms.EQUAL,
    deep: Mapping[tuple[str, str], list[Context]] | None = None,
) -> pl.DataFrame:
    """One row per (provider, page size, depth, question) with every measure; `form` is what the judge saw."""
    rationales = rationales or {}
    excluded = qrels_excluded or {}
    verdicts = _verdicts(judgments)
    meta = {row["question_id"]: row for row in questions.iter_rows(named=True)}
    rows: list[dict[str, Any]] = []
    ranked_runs = _RankedRuns(matcher or PaperMatcher(), deep or {})
    for row in recursive.iter_rows(named=True):
        question = meta.get(row["question_id"])
        if question is None:
            continue
        relevant = set(question.get("relevant_paper_ids") or [])
        base = {
            "provider": row["provider"],
            "page_size": row["page_size"],
            "depth": row["depth"],
            "question_id": row["question_id"],
            "kind": question["kind"],
            "set_name": question.get("set_name") or question["kind"],
            "held_out": question.get("held_out"),
            "has_qrels": bool(relevant),
        }
        if row.get("error"):
            rows.append({**base, "error": row["error"]})
            continue
        returned = contexts_from_rows(row["contexts"])
        contexts = [context_forms.judged_form(c, form) for c in returned]
        record = {
            **base,
            **_judged_measures(row["question_id"], question["text"], contexts, verdicts),
            **_length_measures(contexts, returned),
        }
        labels = rationales.get(row["question_id"])
        if labels:
            record.update(_human_measures(labels, contexts, returned, budget))
        if relevant and row["provider"] in excluded:
            record["qrels_excluded"] = excluded[row["provider"]]
        elif relevant:
            record.update(ranked_runs.add(row, question, relevant, contexts, returned))
        rows.append(record)
    ranked = ranked_runs.rankings()
    for record in rows:
        key = (record["provider"], record["page_size"], record["depth"], record["question_id"])
        record.update(ranked.get(key, {}))
    return pl.DataFrame(
        [{k: r.get(k) for k in QUESTION_SCORE_SCHEMA} for r in rows], schema=QUESTION_SCORE_SCHEMA
    )


def _interval(row: dict[str, Any], name: str, values: list[float], resamples: int) -> None:
    estimate = bootstrap_ci(values, resamples=resamples)
    row[name] = estimate.mean if values else None
    row[f"{name} low"] = estimate.low if values else None
    row[f"{name} high"] = estimate.high if values else None


SCORE_SCHEMA = {
    "provider": pl.String,
    "page_size": pl.Int32,
    "depth": pl.Int32,
    "question_set": pl.String,
    **{c: pl.Float64 for c in ("cr", "cr_low", "cr_high", "cp", "cp_low", "cp_high")},
    "n": pl.Int32,
    "failed": pl.Int32,
    "failure_rate": pl.Float64,
    "n_scored_cr": pl.Int32,
    "n_scored_cp": pl.Int32,
    "cr_failures": pl.Int32,
    "cp_failures": pl.Int32,
    "unjudged_contexts": pl.Int32,
    "questions_without_contexts": pl.Int32,
    "mean_contexts": pl.Float64,
    "sentences/context": pl.Float64,
    "tokens/context": pl.Float64,
    "tokens/context as returned": pl.Float64,
    "cr_failed_questions": pl.Int32,
    "cp_failed_questions": pl.Int32,
    "n_qrels": pl.Int32,
    "qrels_excluded": pl.String,
    **{f"{name}{suffix}": pl.Float64 for name in QRELS_MEASURES.values() for suffix in ("", " low", " high")},
    "R@pool": pl.Float64,
    "RR": pl.Float64,
    "n_human_cp": pl.Int32,
    **{f"{name}{suffix}": pl.Float64 for name in HUMAN_MEASURES.values() for suffix in ("", " low", " high")},
    "proxy_kappa": pl.Float64,
    "proxy_pairs": pl.Int32,
    "judge_vs_human_kappa": pl.Float64,
    "judge_vs_human_sentences": pl.Int32,
}


def _judged_cells(scored: list[dict[str, Any]], resamples: int) -> dict[str, Any]:
    """CR and CP with CIs, and how many verdicts failed or are missing."""
    cells: dict[str, Any] = {"unjudged_contexts": sum(r["unjudged"] or 0 for r in scored)}
    for name in ("cr", "cp"):
        estimate = bootstrap_ci([r[name] for r in scored if r[name] is not None], resamples=resamples)
        cells[name], cells[f"{name}_low"], cells[f"{name}_high"] = estimate.mean, estimate.low, estimate.high
        cells[f"n_scored_{name}"] = estimate.n
        cells[f"{name}_failures"] = sum(r[f"{name}_failures"] or 0 for r in scored)
        cells[f"{name}_failed_questions"] = sum(1 for r in scored if r[f"{name}_failures"])
    return cells


def _length_cells(scored: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "questions_without_contexts": sum(1 for r in scored if r["contexts"] == 0),
        "mean_contexts": mean([r["contexts"] for r in scored]),
        "sentences/context": mean([r["sentences_per_context"] for r in scored]),
        "tokens/context": mean([r["tokens_per_context"] for r in scored]),
        "tokens/context as returned": mean([r["tokens_returned"] for r in scored]),
    }


def _label_cells(scored: list[dict[str, Any]], resamples: int) -> dict[str, Any]:
    """The qrels measures over the questions with qrels (a provider left out says why) and human CP, with CIs."""
    with_qrels = [r for r in scored if r["has_qrels"] and not r["qrels_excluded"]]
    reasons = sorted({r["qrels_excluded"] for r in scored if r["qrels_excluded"]})
    row: dict[str, Any] = {
        "n_qrels": len(with_qrels),
        "qrels_excluded": "; ".join(reasons) or None,
        "R@pool": mean([r["recall_pool"] for r in with_qrels]),
        "RR": mean([r["rr"] for r in with_qrels]),
        "n_human_cp": sum(1 for r in scored if r["cp_human"] is not None),
    }
    for column, name in QRELS_MEASURES.items():
        _interval(row, name, [r[column] for r in with_qrels if r[column] is not None], resamples)
    for column, name in HUMAN_MEASURES.items():
        _interval(row, name, [r[column] for r in scored if r[column] is not None], resamples)
    return row


def score(
    per_question: pl.DataFrame,
    *,
    resamples: int = 2000,
    proxy: Mapping[str, dict[str, Any]] | None = None,
    sentence_agreement: Mapping[str, dict[str, Any]] | None = None,
) -> pl.DataFrame:
    """Per provider × page size × depth × question set ("all" and each kind): the measures with bootstrap CIs, `n`
    scored questions, `failed` provider calls, and the judge's agreement with qrels and human sentence labels."""
    proxy = proxy or {}
    sentence_agreement = sentence_agreement or {}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in per_question.to_dicts():
        for question_set in ("all", record["kind"]):
            key = (record["provider"], record["page_size"], record["depth"], question_set)
            groups.setdefault(key, []).append(record)
    out = []
    for (provider, page_size, depth, question_set), group in sorted(groups.items()):
        scored = [r for r in group if not r["error"]]
        failed = len(group) - len(scored)
        out.append(
            {
                "provider": provider,
                "page_size": page_size,
                "depth": depth,
                "question_set": question_set,
                "n": len(scored),
                "failed": failed,
                "failure_rate": failed / len(group) if group else 0.0,
                **_judged_cells(scored, resamples),
                **_length_cells(scored),
                **_label_cells(scored, resamples),
                "proxy_kappa": proxy.get(provider, {}).get("kappa"),
                "proxy_pairs": proxy.get(provider, {}).get("pairs", 0),
                "judge_vs_human_kappa": sentence_agreement.get(provider, {}).get("kappa"),
                "judge_vs_human_sentences": sentence_agreement.get(provider, {}).get("sentences", 0),
            }
        )
    return pl.DataFrame(out, schema=SCORE_SCHEMA)
