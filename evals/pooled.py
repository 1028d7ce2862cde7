"""Pooled, graded judging: per question, the distinct papers in every provider's top p are judged once (the
equal-form context of the provider that ranked each highest) by the binary CR / CP prompts and the exploratory
graded prompt; per provider, pooled CR / CP, graded and qrels nDCG@p, and Kendall's tau between the rankings."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from evals import contexts as context_forms
from evals import human_labels
from evals.judge import JudgeInput, JudgeParseError, format_context_for_relevance, load_prompt, render
from evals.matching import PaperMatcher
from evals.metrics import ContextVerdict, mean, per_query_ranking, question_cp, question_cr
from evals.providers import contexts_from_rows
from lumina_assets.core.concurrency import map_in_threads
from lumina_assets.core.schemas import Context

GRADES = (0, 1, 2, 3)
_GRADE = re.compile(r"##\s*final\s+score\s*:\s*\**\s*(\d+)", re.IGNORECASE)


def graded_prompt(question: str, context: Context) -> str:
    return render(
        load_prompt("graded_relevance"), question=question, context=format_context_for_relevance(context)
    )


def parse_grade(answer: str) -> int:
    """The grade of the one `##final score: N` line, N in 0..3; none, several or out of range is malformed."""
    found = {int(m) for m in _GRADE.findall(answer or "")}
    if len(found) != 1 or not found <= set(GRADES):
        raise JudgeParseError(
            f"expected one '##final score: N' with N in 0..3, found {sorted(found) or 'none'}"
        )
    return found.pop()


@dataclass
class PoolItem:
    """One (question, paper) of a pool: the context judged for it and the providers whose top p held it."""

    question_id: str
    question: str
    paper: str
    context: Context
    providers: tuple[str, ...]

    @property
    def judge_input(self) -> JudgeInput:
        return JudgeInput(self.question_id, self.question, self.context)


def rankings(
    recursive: pl.DataFrame, *, page_size: int, depth: int = 0, matcher: PaperMatcher | None = None
) -> dict[str, dict[str, list[tuple[str, Context]]]]:
    """provider -> question id -> its top p as (paper, context), in rank order, one entry per paper."""
    matcher = matcher or PaperMatcher()
    out: dict[str, dict[str, list[tuple[str, Context]]]] = {}
    rows = recursive.filter(
        (pl.col("page_size") == page_size) & (pl.col("depth") == depth) & pl.col("error").is_null()
    )
    for row in rows.iter_rows(named=True):
        ranked: dict[str, Context] = {}
        for context in contexts_from_rows(row["contexts"])[:page_size]:
            ranked.setdefault(matcher.paper_of(context), context)
        out.setdefault(row["provider"], {})[row["question_id"]] = list(ranked.items())
    return out


def build_pool(
    recursive: pl.DataFrame,
    questions: pl.DataFrame,
    *,
    page_size: int,
    depth: int = 0,
    matcher: PaperMatcher | None = None,
    form: str = context_forms.EQUAL,
) -> list[PoolItem]:
    """Every distinct (question, paper) of every provider's top p, once, with the context judged for it."""
    texts = dict(zip(questions["question_id"].to_list(), questions["text"].to_list(), strict=True))
    best: dict[tuple[str, str], tuple[int, str, Context]] = {}
    holders: dict[tuple[str, str], set[str]] = {}
    ranked_by_provider = rankings(recursive, page_size=page_size, depth=depth, matcher=matcher)
    for provider, by_question in ranked_by_provider.items():
        for question_id, ranked in by_question.items():
            if question_id not in texts:
                continue
            for rank, (paper, context) in enumerate(ranked):
                key = (question_id, paper)
                holders.setdefault(key, set()).add(provider)
                if key not in best or (rank, provider) < best[key][:2]:
                    best[key] = (rank, provider, context)
    return [
        PoolItem(
            question_id=question_id,
            question=texts[question_id],
            paper=paper,
            context=context_forms.judged_form(best[(question_id, paper)][2], form),
            providers=tuple(sorted(holders[(question_id, paper)])),
        )
        for question_id, paper in sorted(best)
    ]


POOL_SCHEMA = {
    "question_id": pl.String,
    "paper": pl.String,
    "providers": pl.List(pl.String),
    "key": pl.String,
    "relevant": pl.Int8,
    "relevance_failure": pl.String,
    "critical": pl.Int32,
    "sentences": pl.Int32,
    "precision_failure": pl.String,
    "grade": pl.Int8,
    "grade_failure": pl.String,
    "tokens": pl.Int32,
}


def judge_pool(items: Sequence[PoolItem], judge) -> pl.DataFrame:
    """Each pool item judged once by the LLM judge: the binary prompts through `judge.judge_many` and the graded
    prompt. Without an LLM judge nothing is pooled (`lumina_assets.defs.benchmark_run`)."""
    results = judge.judge_many([item.judge_input for item in items]) if items else []
    # (grade, None) or (None, the reason) after the judge's retries, as many in flight as its binary prompts
    grades = map_in_threads(
        lambda item: judge.ask(graded_prompt(item.question, item.context), parse_grade)[:2],
        items,
        getattr(judge, "workers", 1),
    )
    rows = [
        {
            **asdict(result),
            "paper": item.paper,
            "providers": list(item.providers),
            "grade": grade,
            "grade_failure": grade_failure,
            "tokens": sum(human_labels.tokens(chunk) for chunk in item.context.chunks),
        }
        for item, result, (grade, grade_failure) in zip(items, results, grades, strict=True)
    ]
    return pl.DataFrame([{k: row[k] for k in POOL_SCHEMA} for row in rows], schema=POOL_SCHEMA)


def provider_values(
    recursive: pl.DataFrame,
    pool: pl.DataFrame,
    *,
    page_size: int,
    depth: int = 0,
    matcher: PaperMatcher | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    into: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per provider, over the questions the pool judged: the per-question pooled CR and CP of its top p papers,
    context tokens, graded and qrels nDCG@p, and the questions failed (a failed verdict fails the question, never
    scored over fewer papers); added to `into`, as a run read a slice of questions at a time adds each slice's."""
    out = {} if into is None else into
    verdicts = {(r["question_id"], r["paper"]): r for r in pool.iter_rows(named=True)}
    graded: dict[str, dict[str, int]] = {}
    for r in verdicts.values():
        if r["grade"] is not None:
            graded.setdefault(r["question_id"], {})[r["paper"]] = int(r["grade"])
    asked = {q for q, _ in verdicts}
    measure = f"nDCG@{page_size}"
    ranked_by_provider = rankings(recursive, page_size=page_size, depth=depth, matcher=matcher)
    for provider, by_question in ranked_by_provider.items():
        values = out.setdefault(
            provider, {"cr": [], "cp": [], "lengths": [], "failed": 0, "graded": [], "qrels": []}
        )
        runs = {q: [paper for paper, _ in ranked] for q, ranked in by_question.items() if q in asked}
        for question_id, papers in runs.items():
            found = [verdicts.get((question_id, p)) for p in papers]
            values["lengths"] += [float(v["tokens"]) for v in found if v is not None]
            if any(v is None or v["relevance_failure"] or v["precision_failure"] for v in found):
                values["failed"] += 1  # counted, never scored over fewer papers
                continue
            judged = [ContextVerdict(v["relevant"], v["critical"], v["sentences"]) for v in found]
            values["cr"].append(question_cr(judged))
            values["cp"].append(question_cp(judged))
        graded_ndcg = per_query_ranking(
            {q: graded[q] for q in runs if q in graded}, runs, measures=(measure,)
        )
        qrels_ndcg = per_query_ranking(
            {q: dict(qrels[q]) for q in runs if qrels and q in qrels}, runs, measures=(measure,)
        )
        values["graded"] += [v[measure] for v in graded_ndcg.values()]
        values["qrels"] += [v[measure] for v in qrels_ndcg.values()]
    return out


def scores_of(values: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per provider, the means of `provider_values` with their n."""
    return {
        provider: {
            "pooled_cr": mean(v["cr"]),
            "pooled_cp": mean(v["cp"]),
            "n_judged": len(v["cr"]),
            "tokens_per_context": mean(v["lengths"]),
            "failed": v["failed"],
            "graded_ndcg": mean(v["graded"]),
            "n_graded": len(v["graded"]),
            "qrels_ndcg": mean(v["qrels"]),
            "n_qrels": len(v["qrels"]),
        }
        for provider, v in values.items()
    }


RANKED_BY = {"pooled_cr": "LLM judge (pooled CR)", "graded_ndcg": "graded judge", "qrels_ndcg": "qrels"}


def ranking_agreement(scores: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Kendall's tau-b (scipy) between the provider rankings by each pair of `RANKED_BY` measures, over the
    providers that have both; a pair with fewer than two such providers has no tau."""
    from scipy.stats import kendalltau

    names = list(RANKED_BY)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            providers = sorted(p for p, s in scores.items() if s.get(a) is not None and s.get(b) is not None)
            tau = p_value = None
            if len(providers) >= 2:
                result = kendalltau([scores[p][a] for p in providers], [scores[p][b] for p in providers])
                if result.statistic == result.statistic:  # NaN when one ranking is all ties
                    tau, p_value = float(result.statistic), float(result.pvalue)
            out.append(
                {"a": RANKED_BY[a], "b": RANKED_BY[b], "providers": len(providers), "tau": tau, "p": p_value}
            )
    return out


def pooled_run(
    recursive: pl.DataFrame | pl.LazyFrame,
    questions: pl.DataFrame,
    papers: pl.DataFrame | None,
    judge,
    *,
    page_size: int,
    depth: int = 0,
    form: str = context_forms.EQUAL,
    slice_questions: int = 500,
) -> dict[str, Any]:
    """The pooled, graded judging of one run at p and `depth`, as `run.json` keeps it (pool size, per-provider scores,
    the rankings' tau), read, pooled and judged `slice_questions` questions at a time."""
    matcher = PaperMatcher.from_papers(papers)
    lazy = recursive.lazy().filter((pl.col("page_size") == page_size) & (pl.col("depth") == depth))
    values: dict[str, dict[str, Any]] = {}
    items = questions_judged = relevance_failures = grade_failures = 0
    tokens: list[float] = []
    for start in range(0, questions.height, max(slice_questions, 1)):
        part = questions.slice(start, slice_questions)
        rows = lazy.filter(pl.col("question_id").is_in(part["question_id"].implode())).collect()
        qrels = {
            row["question_id"]: {paper: 1 for paper in row["relevant_paper_ids"]}
            for row in part.iter_rows(named=True)
            if row.get("relevant_paper_ids")
        }
        pool = build_pool(rows, part, page_size=page_size, depth=depth, matcher=matcher, form=form)
        judged = judge_pool(pool, judge)
        provider_values(
            rows, judged, page_size=page_size, depth=depth, matcher=matcher, qrels=qrels, into=values
        )
        if judged.height:
            items += judged.height
            questions_judged += judged["question_id"].n_unique()
            tokens += [float(t) for t in judged["tokens"].to_list()]
            relevance_failures += int(judged["relevance_failure"].is_not_null().sum())
            grade_failures += int((judged["grade"].is_null() & judged["grade_failure"].is_not_null()).sum())
        human_labels.clear_caches()  # the next slice's contexts are others
    scores = scores_of(values)
    return {
        "page_size": page_size,
        "depth": depth,
        "judge": judge.name,
        "pool_items": items,
        "questions": questions_judged,
        "tokens_per_item": mean(tokens),
        "relevance_failures": relevance_failures,
        "grade_failures": grade_failures,
        "providers": scores,
        "tau": ranking_agreement(scores),
    }
