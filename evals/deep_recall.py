"""Recall@100 for the providers on Lumina's own index: each BEIR question with qrels asked once more for the top
`defaults.RECALL_DEPTH` papers, apart from the scored pages; external providers are not asked."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from evals import defaults
from evals.providers import contexts_from_rows
from evals.runner import REF_STRUCT, query_provider, refs
from lumina_assets.core import settings
from lumina_assets.core.schemas import Context

CHUNK = 200  # questions searched before their contexts are reduced to references
SCHEMA = {"question_id": pl.String, "provider": pl.String, "refs": pl.List(REF_STRUCT), "error": pl.String}


def _path(provider: str):
    return settings.benchmark_dir() / "deep_recall" / f"{provider}.parquet"


def collect(provider, questions: pl.DataFrame, depth: int = defaults.RECALL_DEPTH) -> pl.DataFrame:
    """Each question with qrels asked for `depth` papers; a failed call keeps its error (never scored)."""
    with_qrels = questions.filter(pl.col("relevant_paper_ids").list.len() > 0)
    rows = []
    # a slice of questions at a time: only the references are kept, never every question's 100 texts at once
    for start in range(0, with_qrels.height, CHUNK):
        frame = query_provider(provider, with_qrels.slice(start, CHUNK), depth)
        for row in frame.iter_rows(named=True):
            rows.append(
                {
                    "question_id": row["question_id"],
                    "provider": provider.name,
                    "refs": refs(contexts_from_rows(row["contexts"])),
                    "error": row["error"],
                }
            )
    return pl.DataFrame(rows, schema=SCHEMA)


def write(provider: str, frame: pl.DataFrame) -> None:
    path = _path(provider)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)


def stored(provider: str) -> pl.DataFrame | None:
    """The provider's deep ranking as written by `write`, or None."""
    path = _path(provider)
    return pl.read_parquet(path) if path.exists() else None


def contexts_of(frame: pl.DataFrame) -> dict[tuple[str, str], list[Context]]:
    """(provider, question id) -> the deep ranking as contexts without text (failed searches left out)."""
    out: dict[tuple[str, str], list[Context]] = {}
    for row in frame.iter_rows(named=True):
        if row["error"] is None:
            out[(row["provider"], row["question_id"])] = contexts_from_rows(row["refs"])
    return out


def read(providers: Iterable[str]) -> dict[tuple[str, str], list[Context]]:
    """`contexts_of` for every provider that has a deep ranking stored."""
    out: dict[tuple[str, str], list[Context]] = {}
    for provider in providers:
        frame = stored(provider)
        if frame is not None:
            out.update(contexts_of(frame))
    return out
