"""One benchmark run as one self-contained archive (`write_snapshot`), and its offline replay (`replay`: no LLM,
no HTTP), which scores the run again and says whether the score tables equal the archived ones."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from evals import contexts, deep_recall, ledger, runs
from lumina_assets.core import settings, tables

FORMAT = "lumina-benchmark-snapshot/1"


def _prompt_hashes(levels: pl.DataFrame, questions: pl.DataFrame, form: str) -> pl.DataFrame:
    """key -> sha256 of the CR and CP prompts each pair was judged with (its context in the run's `form`)."""
    from evals.judge import context_sentences, precision_prompt, relevance_prompt
    from evals.runner import judge_inputs

    def sha(prompt: str) -> str:
        return hashlib.sha256(prompt.encode("utf-8")).hexdigest()

    rows = []
    for item in judge_inputs(levels, questions, form=form):
        sentences = context_sentences(item.context)
        precision = precision_prompt(item.question, item.context, sentences) if sentences else None
        rows.append(
            {
                "key": item.key,
                "relevance_prompt_sha256": sha(relevance_prompt(item.question, item.context)),
                "precision_prompt_sha256": sha(precision) if precision else None,
            }
        )
    schema = {"key": pl.String, "relevance_prompt_sha256": pl.String, "precision_prompt_sha256": pl.String}
    return pl.DataFrame(rows, schema=schema)


def write_snapshot(run: str, path: Path) -> dict[str, Any]:
    """The archive of a stored run (see the module note); returns what it holds."""
    from evals.registry import request_prices

    manifest, scores, per_question = runs.read_run(run)
    providers = manifest.get("providers", [])
    questions = tables.read(tables.QUESTIONS)
    if questions is None or runs.questions_fingerprint(questions) != manifest.get("questions"):
        raise ValueError(f"the stored questions are not run {run}'s any more: snapshot it before they change")
    papers = tables.read(tables.PAPERS)
    path.parent.mkdir(parents=True, exist_ok=True)
    contents: dict[str, Any] = {"format": FORMAT, "run_id": run, "providers": providers, "files": []}
    with tarfile.open(path, "w:gz") as archive:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            archive.addfile(info, io.BytesIO(data))
            contents["files"].append(name)

        def add_frame(name: str, frame: pl.DataFrame) -> None:
            buffer = io.BytesIO()
            frame.write_parquet(buffer)
            add(name, buffer.getvalue())

        def add_json(name: str, value: Any) -> None:
            add(name, json.dumps(value, indent=2, sort_keys=True, default=str).encode("utf-8"))

        add_json("run.json", manifest)
        add_frame("questions.parquet", questions)
        add_frame(
            "qrels.parquet",
            questions.select("question_id", "kind", "relevant_paper_ids").filter(
                pl.col("relevant_paper_ids").list.len() > 0
            ),
        )
        if papers is not None:
            add_frame("papers.parquet", papers)
        depths, page_sizes = manifest["depths"], manifest["page_sizes"]
        form = (manifest.get("scoring") or {}).get(
            "context_form", manifest.get("context_form", contexts.EQUAL)
        )
        for provider in providers:
            levels = tables.read(tables.RECURSIVE_RESULTS, provider)
            levels = levels.filter(pl.col("depth").is_in(depths) & pl.col("page_size").is_in(page_sizes))
            add_frame(f"levels/{provider}.parquet", levels)
            level0 = tables.read(tables.PROVIDER_RESULTS, provider)
            if level0 is not None:
                add_frame(f"provider_results/{provider}.parquet", level0)
            deep = deep_recall.stored(provider)
            if deep is not None:
                add_frame(f"deep_recall/{provider}.parquet", deep)
            verdicts = tables.read(tables.JUDGMENTS, provider)
            if verdicts is not None:
                verdicts = verdicts.join(_prompt_hashes(levels, questions, form), on="key", how="left")
                add_frame(f"verdicts/{provider}.parquet", verdicts)
            raw = settings.cache_dir() / "http" / provider
            for file in sorted(raw.rglob("*.json")):
                add(f"raw/{provider}/{file.relative_to(raw).as_posix()}", file.read_bytes())
        add_frame("scores.parquet", scores)
        add_frame("question_scores.parquet", per_question)
        comparisons = runs.read_comparisons(run)
        if comparisons is not None:
            add_frame("comparisons.parquet", comparisons)
        add_json("cost.json", ledger.run_cost(providers, request_prices()))
        add_json("judge_agreement.json", ledger.read_agreement())
        report = settings.reports_dir() / "runs" / run / "benchmark.md"
        if report.exists():
            add("report/benchmark.md", report.read_bytes())
        add_json("snapshot.json", {k: v for k, v in contents.items() if k != "files"})
    return contents


def _read(folder: Path, name: str) -> pl.DataFrame | None:
    path = folder / name
    return pl.read_parquet(path) if path.exists() else None


def replay(path: Path) -> dict[str, Any]:
    """Score the archived run again offline, write its report under the data dir's reports/, and compare the
    score tables with the archived ones: {"run_id", "identical", "report", "differences"}."""
    from evals.comparison import Primary
    from evals.manifest import report_options
    from evals.report import write_report
    from evals.scored_run import score_run

    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        with tarfile.open(path, "r:gz") as archive:
            archive.extractall(folder, filter="data")
        meta = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path} is not a {FORMAT} archive")
        manifest = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        scoring = manifest.get("scoring") or {}
        questions = pl.read_parquet(folder / "questions.parquet")
        papers = _read(folder, "papers.parquet")
        levels = [pl.read_parquet(p) for p in sorted((folder / "levels").glob("*.parquet"))]
        verdicts = [
            pl.read_parquet(p).drop("relevance_prompt_sha256", "precision_prompt_sha256", strict=False)
            for p in sorted((folder / "verdicts").glob("*.parquet"))
        ]
        verdicts = [v for v in verdicts if v.height]
        # the order the run scored them in: its providers' order
        order = {name: i for i, name in enumerate(manifest.get("providers", []))}
        levels.sort(key=lambda f: order.get(f["provider"][0] if f.height else "", 0))
        scored = score_run(
            pl.concat(levels, how="diagonal_relaxed"),
            pl.concat(verdicts, how="diagonal_relaxed") if verdicts else None,
            questions,
            papers,
            judged=scoring.get("judged", not manifest.get("judge_offline", True)),
            bootstrap_resamples=scoring.get("bootstrap_resamples", 2000),
            permutation_resamples=scoring.get("permutation_resamples", 10000),
            proxy_exclude=set(scoring.get("proxy_exclude", [])),
            primary=Primary(alpha=scoring.get("alpha", Primary().alpha)),
            deep={
                key: ranking
                for p in sorted((folder / "deep_recall").glob("*.parquet"))
                for key, ranking in deep_recall.contexts_of(pl.read_parquet(p)).items()
            },
            form=scoring.get("context_form", manifest.get("context_form", contexts.EQUAL)),
        )
        archived = pl.read_parquet(folder / "scores.parquet")
        differences = _differences(archived, scored.scores)
        run = manifest["run_id"]
        runs.write_run(manifest, scored.scores, scored.per_question, scored.comparisons)
        options = report_options(manifest, scored.comparisons)
        options["cost"] = json.loads((folder / "cost.json").read_text(encoding="utf-8"))
        options["agreement"] = json.loads((folder / "judge_agreement.json").read_text(encoding="utf-8"))
        options.pop("plan", None)
        options.pop("actual", None)
        result = write_report(scored.scores, out_dir=settings.reports_dir() / "runs" / run, **options)
        write_report(scored.scores, out_dir=settings.reports_dir(), **options)  # the latest, as a run does
        runs.set_latest(run)
    return {
        "run_id": run,
        "identical": not differences,
        "differences": differences,
        "report": str(result["report"]),
    }


def _differences(archived: pl.DataFrame, replayed: pl.DataFrame) -> list[str]:
    """What differs between two score tables, [] when they are identical (same rows, columns and values)."""
    if archived.columns != replayed.columns:
        return [f"columns differ: {archived.columns} vs {replayed.columns}"]
    if archived.height != replayed.height:
        return [f"{archived.height} rows archived, {replayed.height} replayed"]
    from polars.testing import assert_frame_equal

    differences = []
    for column in archived.columns:
        try:
            assert_frame_equal(archived.select(column), replayed.select(column), check_exact=True)
        except AssertionError:
            differences.append(f"column {column} differs")
    return differences
