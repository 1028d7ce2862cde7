"""The benchmark's steps as plain functions over polars frames (the Dagster assets call these): query providers,
recurse, judge. A question with no contexts keeps its row; a provider error is stored as `error`, counted as a
failure and never scored as an empty result."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import polars as pl

from evals.contexts import judged_form
from evals.defaults import CONTEXT_FORM
from evals.judge import JudgeInput, JudgeResult
from evals.providers import contexts_from_rows
from evals.recursive import Level, recursive_search
from lumina_assets.core.concurrency import map_in_threads
from lumina_assets.core.llm import BudgetExhausted
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
        "ranked_passage_ids": pl.List(pl.String),
    }
)

# what qrels matching needs of a context (evals.matching), whatever provider returned it
REF_STRUCT = pl.Struct({"title": pl.String, "doi": pl.String, "url": pl.String, "paper_id": pl.String})


def refs(contexts: Sequence[Context]) -> list[dict[str, Any]]:
    return [{"title": c.title, "doi": c.doi, "url": c.url, "paper_id": c.paper_id} for c in contexts]


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
    "pool_refs": pl.List(REF_STRUCT),
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
    return [{**c.to_dict(), "score": float(c.score)} for c in contexts]


def provider_concurrency(provider) -> int:
    """Searches of `provider` in flight at once: its API client's concurrency, else 1 (local providers)."""
    return max(1, int(getattr(getattr(provider, "client", None), "concurrency", 1) or 1))


class _Bounded:
    """`provider` with at most `limit` searches in flight, whatever number of threads asks it."""

    def __init__(self, provider, limit: int):
        self._provider = provider
        self._slots = threading.BoundedSemaphore(limit)
        self.name = provider.name

    def search(self, query: str, k: int) -> list[Context]:
        with self._slots:
            return self._provider.search(query, k)


def query_provider(provider, questions: pl.DataFrame, k: int) -> pl.DataFrame:
    """Level 0 for every question at page size k; a failed request is recorded in `error`, not raised."""

    def one(question: dict[str, Any]) -> dict[str, Any]:
        error = None
        try:
            contexts = provider.search(question["text"], k)[:k]
        except Exception as exc:  # one failing question must not lose the others; the reason is kept
            contexts, error = [], f"{type(exc).__name__}: {exc}"[:500]
        return {
            "question_id": question["question_id"],
            "provider": provider.name,
            "query": question["text"],
            "k": k,
            "contexts": _context_dicts(contexts),
            "error": error,
        }

    rows = map_in_threads(one, questions.iter_rows(named=True), provider_concurrency(provider))
    return pl.DataFrame(rows, schema=PROVIDER_RESULT_SCHEMA)


def run_recursive(
    provider,
    questions: pl.DataFrame,
    level0: pl.DataFrame,
    *,
    page_sizes: Sequence[int],
    max_depth: int,
    refiner,
) -> pl.DataFrame:
    """Every level 0..max_depth for every question and page size, level 0 from the stored provider result (queried
    afresh above the stored k or after a failure). Questions run side by side, each API within its concurrency."""
    stored = {row["question_id"]: row for row in level0.iter_rows(named=True)} if level0 is not None else {}
    searches = provider_concurrency(provider)
    bounded = _Bounded(provider, searches)
    refiner_calls = int(getattr(getattr(refiner, "client", None), "concurrency", 0) or 0)

    def one(job: tuple[dict[str, Any], int]) -> list[dict[str, Any]]:
        question, page_size = job
        base = stored.get(question["question_id"])
        first = None
        if base is not None and base["k"] >= page_size and not base["error"]:
            first = contexts_from_rows(base["contexts"])[:page_size]
        try:
            levels = recursive_search(
                bounded,
                question["text"],
                max_depth=max_depth,
                page_size=page_size,
                refiner=refiner,
                level0=first,
            )
        except BudgetExhausted:
            raise
        except Exception as exc:  # a refiner bug: every level is a failure, with the reason
            failure = f"{type(exc).__name__}: {exc}"[:500]
            levels = [
                Level(depth, None, "error", [], 0, failure=failure, error=failure)
                for depth in range(max_depth + 1)
            ]
        return [_recursive_row(question, provider.name, page_size, level) for level in levels]

    jobs = [(question, page_size) for question in questions.iter_rows(named=True) for page_size in page_sizes]
    workers = searches + refiner_calls if max_depth > 0 else searches
    rows = [row for rows in map_in_threads(one, jobs, workers) for row in rows]
    return pl.DataFrame(rows, schema=RECURSIVE_SCHEMA)


def _recursive_row(question: dict[str, Any], provider: str, page_size: int, level: Level) -> dict[str, Any]:
    return {
        "question_id": question["question_id"],
        "provider": provider,
        "page_size": page_size,
        "depth": level.depth,
        "query": level.query,
        "refinement": level.refinement,
        "failure": level.failure,
        "new_chunks": level.new_chunks,
        "fresh_contexts": len(level.fresh),
        "contexts": _context_dicts(level.contexts),
        "error": level.error,
        "pool_size": len(level.pool),
        "pool_paper_ids": [c.paper_id for c in level.pool if c.paper_id],
        "pool_refs": refs(level.pool),
    }


def judged_pairs(
    levels: pl.DataFrame, texts: Mapping[str, str], form: str = CONTEXT_FORM
) -> Iterator[tuple[dict[str, Any], Context, JudgeInput]]:
    """(level row, a context as returned, its pair in the judged form) for every context of a question in `texts`."""
    for row in levels.iter_rows(named=True):
        question = texts.get(row["question_id"])
        if question is not None:
            for context in contexts_from_rows(row["contexts"]):
                yield row, context, JudgeInput(row["question_id"], question, judged_form(context, form))


def judge_inputs(
    recursive: pl.DataFrame, questions: pl.DataFrame, *, form: str = CONTEXT_FORM
) -> list[JudgeInput]:
    """Unique (question, context) pairs over every level and page size, contexts in the judged form."""
    texts = dict(zip(questions["question_id"].to_list(), questions["text"].to_list(), strict=True))
    unique: dict[str, JudgeInput] = {}
    for _, _, item in judged_pairs(recursive, texts, form):
        unique.setdefault(item.key, item)
    return list(unique.values())


def judgments_frame(results: Sequence[JudgeResult], provider: str) -> pl.DataFrame:
    rows = [{**asdict(r), "provider": provider} for r in results]
    return pl.DataFrame([{k: row.get(k) for k in JUDGMENT_SCHEMA} for row in rows], schema=JUDGMENT_SCHEMA)
