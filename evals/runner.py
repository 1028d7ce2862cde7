"""The benchmark's steps as plain functions over polars frames (the Dagster assets in
`lumina_assets.defs.benchmark` call these): query providers, recurse, judge, score.

Contexts are stored as a list of structs per (question, provider, page size, depth), so a question that got no
contexts still has its row and scores 0. A provider error is stored as `error` and the row is a failure: it is
counted (failure rate per provider and depth) and left out of every score, never scored as an empty result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from evals.judge import JudgeInput, JudgeResult
from evals.metrics import (
    ContextVerdict,
    agreement,
    bootstrap_ci,
    per_query_ranking,
    question_cp,
    question_cr,
)
from evals.providers import contexts_from_rows
from evals.recursive import recursive_search
from lumina_assets.core.schemas import Context

CONTEXT_STRUCT = pl.Struct(
    {
        "title": pl.String,
        "chunks": pl.List(pl.String),
        "doi": pl.String,
        "url": pl.String,
        "paper_id": pl.String,
        "score": pl.Float64,
        "passage_ids": pl.List(pl.String),
    }
)

PROVIDER_RESULT_SCHEMA = {
    "question_id": pl.String,
    "provider": pl.String,
    "query": pl.String,
    "k": pl.Int32,
    "contexts": pl.List(CONTEXT_STRUCT),
    "error": pl.String,
}

RECURSIVE_SCHEMA = {
    "question_id": pl.String,
    "provider": pl.String,
    "page_size": pl.Int32,
    "depth": pl.Int32,
    "query": pl.String,
    "refinement": pl.String,
    "failure": pl.String,
    "new_chunks": pl.Int32,
    "fresh_contexts": pl.Int32,
    "contexts": pl.List(CONTEXT_STRUCT),
    "error": pl.String,
    "pool_size": pl.Int32,
    "pool_paper_ids": pl.List(pl.String),
}

JUDGMENT_SCHEMA = {
    "key": pl.String,
    "question_id": pl.String,
    "provider": pl.String,
    "judge": pl.String,
    "relevant": pl.Int8,
    "relevance_failure": pl.String,
    "relevance_attempts": pl.Int32,
    "critical": pl.Int32,
    "sentences": pl.Int32,
    "sentence_verdicts": pl.List(pl.Int8),
    "precision_failure": pl.String,
    "precision_attempts": pl.Int32,
    "relevance_score": pl.Float64,
}


def _context_dicts(contexts: Sequence[Context]) -> list[dict[str, Any]]:
    return [
        {
            "title": c.title,
            "chunks": list(c.chunks),
            "doi": c.doi,
            "url": c.url,
            "paper_id": c.paper_id,
            "score": float(c.score),
            "passage_ids": list(c.passage_ids),
        }
        for c in contexts
    ]


def query_provider(
    provider, questions: pl.DataFrame, k: int, *, on_progress: Callable[[int], None] | None = None
) -> pl.DataFrame:
    """Level 0 for every question at page size k. A failed request is recorded in `error`, not raised."""
    rows = []
    for index, question in enumerate(questions.iter_rows(named=True)):
        error = None
        try:
            contexts = provider.search(question["text"], k)[:k]
        except Exception as exc:  # one failing question must not lose the others; the reason is kept
            contexts, error = [], f"{type(exc).__name__}: {exc}"[:500]
        rows.append(
            {
                "question_id": question["question_id"],
                "provider": provider.name,
                "query": question["text"],
                "k": k,
                "contexts": _context_dicts(contexts),
                "error": error,
            }
        )
        if on_progress:
            on_progress(index + 1)
    return (
        pl.DataFrame(rows, schema=PROVIDER_RESULT_SCHEMA)
        if rows
        else pl.DataFrame(schema=PROVIDER_RESULT_SCHEMA)
    )


def run_recursive(
    provider,
    questions: pl.DataFrame,
    level0: pl.DataFrame,
    *,
    page_sizes: Sequence[int],
    max_depth: int,
    refiner,
) -> pl.DataFrame:
    """Every level 0..max_depth for every question and page size. Level 0 is the stored provider result (its top p);
    a page size above the stored k, or a stored level 0 that failed, queries afresh. A provider error is recorded
    on the levels it affects (see recursive_search), never as an empty result."""
    stored = {row["question_id"]: row for row in level0.iter_rows(named=True)} if level0 is not None else {}
    rows = []
    for question in questions.iter_rows(named=True):
        for page_size in page_sizes:
            base = stored.get(question["question_id"])
            first = None
            if base is not None and base["k"] >= page_size and not base["error"]:
                first = contexts_from_rows(base["contexts"])[:page_size]
            try:
                levels = recursive_search(
                    provider,
                    question["text"],
                    max_depth=max_depth,
                    page_size=page_size,
                    refiner=refiner,
                    level0=first,
                )
            except Exception as exc:  # a refiner bug: every level is a failure, with the reason
                failure = f"{type(exc).__name__}: {exc}"[:500]
                for depth in range(max_depth + 1):
                    rows.append(
                        _recursive_row(
                            question,
                            provider.name,
                            page_size,
                            depth,
                            None,
                            "error",
                            failure,
                            0,
                            0,
                            [],
                            failure,
                            [],
                        )
                    )
                continue
            for level in levels:
                rows.append(
                    _recursive_row(
                        question,
                        provider.name,
                        page_size,
                        level.depth,
                        level.query,
                        level.refinement,
                        level.failure,
                        level.new_chunks,
                        len(level.fresh),
                        level.contexts,
                        level.error,
                        level.pool,
                    )
                )
    return pl.DataFrame(rows, schema=RECURSIVE_SCHEMA) if rows else pl.DataFrame(schema=RECURSIVE_SCHEMA)


def _recursive_row(
    question, provider, page_size, depth, query, refinement, failure, new_chunks, fresh, contexts, error, pool
):
    return {
        "question_id": question["question_id"],
        "provider": provider,
        "page_size": page_size,
        "depth": depth,
        "query": query,
        "refinement": refinement,
        "failure": failure,
        "new_chunks": new_chunks,
        "fresh_contexts": fresh,
        "contexts": _context_dicts(contexts),
        "error": error,
        "pool_size": len(pool),
        "pool_paper_ids": [c.paper_id for c in pool if c.paper_id],
    }


def judge_inputs(recursive: pl.DataFrame, questions: pl.DataFrame) -> list[JudgeInput]:
    """Unique (question, context) pairs across every level and page size: each is judged once."""
    texts = dict(zip(questions["question_id"].to_list(), questions["text"].to_list(), strict=True))
    unique: dict[str, JudgeInput] = {}
    for row in recursive.iter_rows(named=True):
        question = texts.get(row["question_id"])
        if question is None:
            continue
        for context in contexts_from_rows(row["contexts"]):
            item = JudgeInput(row["question_id"], question, context)
            unique.setdefault(item.key, item)
    return list(unique.values())


def judgments_frame(results: Sequence[JudgeResult], provider: str) -> pl.DataFrame:
    rows = [{**r.to_row(), "provider": provider} for r in results]
    if not rows:
        return pl.DataFrame(schema=JUDGMENT_SCHEMA)
    return pl.DataFrame([{k: row.get(k) for k in JUDGMENT_SCHEMA} for row in rows], schema=JUDGMENT_SCHEMA)


QUESTION_SCORE_SCHEMA = {
    "provider": pl.String,
    "page_size": pl.Int32,
    "depth": pl.Int32,
    "question_id": pl.String,
    "kind": pl.String,
    "set_name": pl.String,
    "error": pl.String,
    "cr": pl.Float64,
    "cp": pl.Float64,
    "cr_failures": pl.Int32,
    "cp_failures": pl.Int32,
    "unjudged": pl.Int32,
    "contexts": pl.Int32,
    "has_qrels": pl.Boolean,
    "cr_qrels": pl.Float64,
    "ndcg10": pl.Float64,
    "recall_p": pl.Float64,
    "recall_pool": pl.Float64,
    "rr": pl.Float64,
    "passage_hit": pl.Float64,
}

# per-question column -> the name it has in the scores table and the report
QRELS_MEASURES = {
    "cr_qrels": "CR@p (qrels)",
    "ndcg10": "nDCG@10",
    "recall_p": "R@p",
    "passage_hit": "passage@p",
}


def _doc_id(context: Context, doi_to_paper: dict[str, str]) -> str | None:
    """The id a context is matched to qrels by: the paper its DOI names in our catalogue, else its paper id."""
    if context.doi and context.doi.lower() in doi_to_paper:
        return doi_to_paper[context.doi.lower()]
    return context.paper_id


def question_scores(
    recursive: pl.DataFrame,
    judgments: pl.DataFrame | None,
    questions: pl.DataFrame,
    *,
    doi_to_paper: dict[str, str] | None = None,
) -> pl.DataFrame:
    """One row per (provider, page size, depth, question): judge CR / CP, and where the question has qrels (BEIR,
    or a synthetic question's source paper) CR@p from qrels (fraction of the p contexts from a relevant paper),
    nDCG@10, R@p, the merged pool's recall and, for synthetic questions, whether the source passage is among the
    contexts. A row whose provider call failed keeps only its `error`."""
    doi_to_paper = {k.lower(): v for k, v in (doi_to_paper or {}).items()}
    verdicts = {
        row["key"]: ContextVerdict(
            row["relevant"],
            row["critical"] if row["precision_failure"] is None else None,
            row["sentences"] if row["precision_failure"] is None else None,
        )
        for row in (judgments.iter_rows(named=True) if judgments is not None else [])
    }
    meta = {row["question_id"]: row for row in questions.iter_rows(named=True)}
    rows, runs, pools, qrels = [], {}, {}, {}
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
            "has_qrels": bool(relevant),
        }
        if row.get("error"):
            rows.append({**base, "error": row["error"]})
            continue
        contexts = contexts_from_rows(row["contexts"])
        judged = [verdicts.get(JudgeInput(row["question_id"], question["text"], c).key) for c in contexts]
        missing = sum(1 for v in judged if v is None)
        judged = [v if v is not None else ContextVerdict(None, None, None) for v in judged]
        record = {
            **base,
            "cr": question_cr(judged),
            "cp": question_cp(judged),
            "cr_failures": sum(1 for v in judged if v.relevant is None),
            "cp_failures": sum(1 for v in judged if v.critical is None),
            "unjudged": missing,
            "contexts": len(contexts),
        }
        if relevant:
            docs = [_doc_id(c, doi_to_paper) for c in contexts]
            record["cr_qrels"] = sum(1 for d in docs if d in relevant) / len(docs) if docs else 0.0
            key = (row["provider"], row["page_size"], row["depth"])
            runs.setdefault(key, {})[row["question_id"]] = [d for d in docs if d]
            pools.setdefault(key, {})[row["question_id"]] = [
                doi_to_paper.get(pid, pid) for pid in (row.get("pool_paper_ids") or [])
            ]
            qrels[row["question_id"]] = {pid: 1 for pid in relevant}
            if question.get("source_passage_id"):
                ids = {pid for c in contexts for pid in c.passage_ids}
                record["passage_hit"] = float(question["source_passage_id"] in ids)
        rows.append(record)
    for record in rows:
        if record.get("error") or not record["has_qrels"]:
            continue
        key = (record["provider"], record["page_size"], record["depth"])
        qid = record["question_id"]
        ranked = per_query_ranking({qid: qrels[qid]}, {qid: runs[key][qid]})[qid]
        pooled = per_query_ranking({qid: qrels[qid]}, {qid: pools[key][qid]}, measures=("R@1000",))[qid]
        record.update(
            ndcg10=ranked["nDCG@10"], recall_p=ranked["R@1000"], rr=ranked["RR"], recall_pool=pooled["R@1000"]
        )
    if not rows:
        return pl.DataFrame(schema=QUESTION_SCORE_SCHEMA)
    return pl.DataFrame(
        [{k: r.get(k) for k in QUESTION_SCORE_SCHEMA} for r in rows], schema=QUESTION_SCORE_SCHEMA
    )


def proxy_agreement(
    recursive: pl.DataFrame,
    judgments: pl.DataFrame | None,
    questions: pl.DataFrame,
    *,
    exclude: set[str] | frozenset[str] = frozenset(),
    doi_to_paper: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per provider: the judge's CR verdicts against qrels on this run's own contexts (questions with qrels, the
    judge's calibration questions in `exclude` left out), each unique (question, context) pair once."""
    doi_to_paper = {k.lower(): v for k, v in (doi_to_paper or {}).items()}
    verdicts = {
        row["key"]: row["relevant"]
        for row in (judgments.iter_rows(named=True) if judgments is not None else [])
    }
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
            key = JudgeInput(row["question_id"], question["text"], context).key
            verdict = verdicts.get(key)
            if verdict is not None:
                human = int(_doc_id(context, doi_to_paper) in relevant)
                pairs.setdefault(row["provider"], {})[key] = (int(verdict), human)
    out = {}
    for provider, found in pairs.items():
        judge, human = zip(*found.values(), strict=True)
        result = agreement(list(judge), list(human))
        out[provider] = {"kappa": result.kappa, "pairs": result.n, "positives": result.positives}
    return out


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
    "n_qrels": pl.Int32,
    **{f"{name}{suffix}": pl.Float64 for name in QRELS_MEASURES.values() for suffix in ("", " low", " high")},
    "R@pool": pl.Float64,
    "RR": pl.Float64,
    "proxy_kappa": pl.Float64,
    "proxy_pairs": pl.Int32,
}


def score(
    recursive: pl.DataFrame,
    judgments: pl.DataFrame | None,
    questions: pl.DataFrame,
    *,
    resamples: int = 2000,
    doi_to_paper: dict[str, str] | None = None,
    proxy_exclude: set[str] | frozenset[str] = frozenset(),
    per_question: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per provider × page size × depth × question set ("all" and each kind): CR, CP and the qrels measures with
    bootstrap CIs over the scored questions, `n` = scored questions, `failed` / `failure_rate` = provider calls
    that failed, and the judge's per-provider agreement with qrels (proxy_kappa)."""
    if per_question is None:
        per_question = question_scores(recursive, judgments, questions, doi_to_paper=doi_to_paper)
    proxy = proxy_agreement(recursive, judgments, questions, exclude=proxy_exclude, doi_to_paper=doi_to_paper)
    records = per_question.to_dicts()
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        for question_set in ("all", record["kind"]):
            key = (record["provider"], record["page_size"], record["depth"], question_set)
            groups.setdefault(key, []).append(record)
    out = []
    for (provider, page_size, depth, question_set), group in sorted(groups.items()):
        scored = [r for r in group if not r["error"]]
        failed = len(group) - len(scored)
        cr = bootstrap_ci([r["cr"] for r in scored if r["cr"] is not None], resamples=resamples)
        cp = bootstrap_ci([r["cp"] for r in scored if r["cp"] is not None], resamples=resamples)
        with_qrels = [r for r in scored if r["has_qrels"]]
        row: dict[str, Any] = {
            "provider": provider,
            "page_size": page_size,
            "depth": depth,
            "question_set": question_set,
            "cr": cr.mean,
            "cr_low": cr.low,
            "cr_high": cr.high,
            "cp": cp.mean,
            "cp_low": cp.low,
            "cp_high": cp.high,
            "n": len(scored),
            "failed": failed,
            "failure_rate": failed / len(group) if group else 0.0,
            "n_scored_cr": cr.n,
            "n_scored_cp": cp.n,
            "cr_failures": sum(r["cr_failures"] or 0 for r in scored),
            "cp_failures": sum(r["cp_failures"] or 0 for r in scored),
            "unjudged_contexts": sum(r["unjudged"] or 0 for r in scored),
            "questions_without_contexts": sum(1 for r in scored if r["contexts"] == 0),
            "mean_contexts": sum(r["contexts"] for r in scored) / len(scored) if scored else None,
            "n_qrels": len(with_qrels),
            "R@pool": _mean([r["recall_pool"] for r in with_qrels]),
            "RR": _mean([r["rr"] for r in with_qrels]),
            "proxy_kappa": proxy.get(provider, {}).get("kappa"),
            "proxy_pairs": proxy.get(provider, {}).get("pairs", 0),
        }
        for column, name in QRELS_MEASURES.items():
            values = [r[column] for r in with_qrels if r[column] is not None]
            estimate = bootstrap_ci(values, resamples=resamples)
            row[name] = estimate.mean if values else None
            row[f"{name} low"] = estimate.low if values else None
            row[f"{name} high"] = estimate.high if values else None
        out.append(row)
    return pl.DataFrame(out, schema=SCORE_SCHEMA) if out else pl.DataFrame(schema=SCORE_SCHEMA)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
