"""A benchmark run: the one set of (questions, providers, grid, judge, code version) a report's rows come from.
`benchmark_scores` takes a provider into the run only when its stamps match the run, and every run keeps its
scores and report under its own id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from lumina_assets.core import settings
from lumina_assets.core.ids import short_hash

CODE_VERSION = "3"  # of the benchmark's scoring and recursion: a stamp from another version is stale


def questions_fingerprint(questions: pl.DataFrame | None) -> str:
    if questions is None or questions.height == 0:
        return "none"
    pairs = sorted(zip(questions["question_id"].to_list(), questions["text"].to_list(), strict=True))
    return short_hash(json.dumps(pairs), length=16)


FINGERPRINT_SLICE = 2000  # rows serialized at a time


def frame_fingerprint(frame: pl.DataFrame | pl.LazyFrame | None) -> str:
    """A content hash of a levels table that ignores row order (sorted row hashes hashed together), read a slice at
    a time."""
    if frame is None:
        return "empty"
    lazy = frame.lazy()
    columns = lazy.collect_schema().names()
    keys = [c for c in ("question_id", "page_size", "depth", "query", "error", "contexts") if c in columns]
    height = lazy.select(pl.len()).collect().item()
    if height == 0:
        return "empty"
    digests: list[str] = []
    for start in range(0, height, FINGERPRINT_SLICE):
        part = lazy.slice(start, FINGERPRINT_SLICE).select(keys).collect()
        digests += [short_hash(json.dumps(row, default=str), length=32) for row in part.iter_rows()]
    return short_hash(*sorted(digests), length=16)


def _stamp_path(stage: str, provider: str) -> Path:
    return settings.benchmark_dir() / "stamps" / f"{stage}.{provider}.json"


def write_stamp(stage: str, provider: str, stamp: dict[str, Any]) -> None:
    path = _stamp_path(stage, provider)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({**stamp, "code_version": CODE_VERSION}, sort_keys=True, default=str), encoding="utf-8"
    )


def read_stamp(stage: str, provider: str) -> dict[str, Any]:
    path = _stamp_path(stage, provider)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def stamp_recursive(
    provider: str,
    *,
    questions: str,
    depths: list[int],
    page_sizes: list[int],
    refinement: str,
    data: str,
    provider_stats: dict[str, int],
    provider_info: dict[str, Any] | None = None,
) -> None:
    """What a provider's recursive levels were computed from and hold (`data`), for `stale_reason` and the manifest."""
    write_stamp(
        "recursive_results",
        provider,
        {
            "questions": questions,
            "depths": sorted(set(depths)),
            "page_sizes": sorted(set(page_sizes)),
            "refinement": refinement,
            "data": data,
            "provider_stats": provider_stats,
            "provider_info": provider_info or {},
        },
    )


def stamp_judgments(provider: str, *, judge: str, recursive: str) -> None:
    """Which judge judged which recursive levels (their `data`); the offline run stamps it too."""
    write_stamp("judgments", provider, {"judge": judge, "recursive": recursive})


def stale_reason(
    provider: str, *, questions: str, depths: list[int], page_sizes: list[int], judge: str
) -> str | None:
    """Why a provider's stored results are not part of this run (None when they are)."""
    levels = read_stamp("recursive_results", provider)
    verdicts = read_stamp("judgments", provider)
    if not levels:
        return "no recursive results stamp (not run with this code)"
    if levels.get("code_version") != CODE_VERSION:
        return f"computed by benchmark code version {levels.get('code_version')}, not {CODE_VERSION}"
    if levels.get("skipped"):
        return f"skipped: {levels['skipped']}"
    if levels.get("questions") != questions:
        return "computed for other questions (or not every shard of these is computed)"
    missing_depths = sorted(set(depths) - set(levels.get("depths", [])))
    missing_pages = sorted(set(page_sizes) - set(levels.get("page_sizes", [])))
    if missing_depths or missing_pages:
        return f"grid lacks depths {missing_depths} / page sizes {missing_pages}"
    if not verdicts or verdicts.get("recursive") != levels.get("data"):
        return "judgments are not of the current recursive results"
    if verdicts.get("judge") != judge:
        return f"judged by {verdicts.get('judge')}, not {judge}"
    return None


def run_id(
    *, questions: str, providers: list[str], depths: list[int], page_sizes: list[int], judge: str
) -> str:
    return short_hash(
        questions,
        ",".join(sorted(providers)),
        ",".join(map(str, sorted(depths))),
        ",".join(map(str, sorted(page_sizes))),
        judge,
        CODE_VERSION,
        length=12,
    )


def run_dir(run: str) -> Path:
    return settings.benchmark_dir() / "runs" / run


def write_run(
    manifest: dict[str, Any],
    scores: pl.DataFrame,
    per_question: pl.DataFrame,
    comparisons: pl.DataFrame | None = None,
) -> Path:
    folder = run_dir(manifest["run_id"])
    folder.mkdir(parents=True, exist_ok=True)
    scores.write_parquet(folder / "scores.parquet")
    per_question.write_parquet(folder / "question_scores.parquet")
    if comparisons is not None:
        comparisons.write_parquet(folder / "comparisons.parquet")
    (folder / "run.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True, default=str), encoding="utf-8"
    )
    return folder


def read_run(run: str) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]:
    """(manifest, scores, per-question scores) of a stored run."""
    folder = run_dir(run)
    if not (folder / "run.json").exists():
        raise FileNotFoundError(f"no benchmark run {run!r} under {folder.parent}")
    return (
        json.loads((folder / "run.json").read_text(encoding="utf-8")),
        pl.read_parquet(folder / "scores.parquet"),
        pl.read_parquet(folder / "question_scores.parquet"),
    )


def read_comparisons(run: str) -> pl.DataFrame | None:
    """The paired tests a stored run wrote, None for a run without them."""
    path = run_dir(run) / "comparisons.parquet"
    return pl.read_parquet(path) if path.exists() else None


def list_runs() -> list[dict[str, Any]]:
    """Every stored run's manifest, oldest first."""
    folder = settings.benchmark_dir() / "runs"
    manifests = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*/run.json")]
    return sorted(manifests, key=lambda m: m.get("created", ""))


def set_latest(run: str) -> None:
    path = settings.benchmark_dir() / "runs" / "LATEST"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run, encoding="utf-8")


def latest() -> str | None:
    path = settings.benchmark_dir() / "runs" / "LATEST"
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


COMPARED = ("nDCG@10", "R@p", "P@p (qrels, distinct papers)", "cr", "cp")


def compare_runs(a: str, b: str) -> pl.DataFrame:
    """Two stored runs side by side: per (question set, provider, p, depth) in both, each of `COMPARED` in a, b and
    their difference; `same_questions` says whether rows compare question for question."""
    manifest_a, scores_a, _ = read_run(a)
    manifest_b, scores_b, _ = read_run(b)
    keys = ["question_set", "provider", "page_size", "depth"]
    present = [m for m in COMPARED if m in scores_a.columns and m in scores_b.columns]
    left = scores_a.select(keys + ["n"] + present)
    right = scores_b.select(keys + ["n"] + present)
    joined = left.join(right, on=keys, how="inner", suffix=f" ({b})").rename(
        {c: f"{c} ({a})" for c in ["n", *present]}
    )
    joined = joined.with_columns(
        [(pl.col(f"{m} ({b})") - pl.col(f"{m} ({a})")).alias(f"{m} Δ") for m in present]
    ).with_columns(pl.lit(manifest_a["questions"] == manifest_b["questions"]).alias("same_questions"))
    return joined.sort(keys)
