"""One benchmark run's manifest: the provider partitions it takes (stamps matching its questions, grid and judge),
what it records about itself (`run.json`), and the report options read back from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from evals import disclosure, ledger, runs
from evals.registry import PROVIDERS, RECURSIVE_ALIAS, request_prices
from evals.report import question_sources
from lumina_assets.core import tables


@dataclass
class RunSelection:
    """The provider partitions of one run (levels and verdicts on its grid) and the stored ones left out, with why."""

    recursive: pl.DataFrame | pl.LazyFrame | None  # select_run: lazy scans, read a slice at a time
    verdicts: pl.DataFrame | pl.LazyFrame | None
    included: list[str]
    excluded: dict[str, str] = field(default_factory=dict)


def select_run(
    providers: list[str],
    *,
    depths: list[int],
    page_sizes: list[int],
    judge_name: str,
    question_frame: pl.DataFrame,
) -> RunSelection:
    """`providers` (empty: every stored partition) whose stamps match this run; the rest excluded with the reason."""
    folder = tables.RECURSIVE_RESULTS.root() / tables.RECURSIVE_RESULTS.name
    stored = sorted(p.stem for p in folder.glob("*.parquet"))
    wanted = list(dict.fromkeys(providers)) or stored
    fingerprint = runs.questions_fingerprint(question_frame)
    included, excluded, levels, verdicts = [], {}, [], []
    for name in wanted:
        path = tables.RECURSIVE_RESULTS.path(name)
        recursive = pl.scan_parquet(path) if path.exists() else None
        reason = runs.stale_reason(
            name, questions=fingerprint, depths=depths, page_sizes=page_sizes, judge=judge_name
        )
        if reason is None and recursive is None:
            reason = "no recursive results"
        if reason is not None:
            excluded[name] = reason
            continue
        included.append(name)
        levels.append(recursive.filter(pl.col("depth").is_in(depths) & pl.col("page_size").is_in(page_sizes)))
        judged_path = tables.JUDGMENTS.path(name)
        if judged_path.exists():
            verdicts.append(pl.scan_parquet(judged_path))
    for name in stored:
        if name not in wanted:
            excluded[name] = "not among this run's providers"
    judged = [v for v in verdicts if v.select(pl.len()).collect().item()]
    return RunSelection(
        recursive=pl.concat(levels, how="diagonal_relaxed") if levels else None,
        verdicts=pl.concat(judged, how="diagonal_relaxed") if judged else None,
        included=included,
        excluded=excluded,
    )


def skipped_providers(requested: list[str]) -> dict[str, str]:
    """Provider -> why its partition was skipped, for the run's providers (all when none were named)."""
    return {
        name: reason
        for name, reason in ledger.skipped_providers().items()
        if name != RECURSIVE_ALIAS and (not requested or name in requested)
    }


def build_manifest(
    selection: RunSelection,
    question_frame: pl.DataFrame,
    *,
    depths: list[int],
    page_sizes: list[int],
    judge_name: str,
    judge_offline: bool,
    skipped: dict[str, str],
    matching: list[dict[str, Any]] | None = None,
    qrels_excluded: dict[str, str] | None = None,
    token_budget: int | None = None,
    primary: str = "",
) -> dict[str, Any]:
    """What `run.json` records: the run's questions, providers (and those left out), grid, judge, refinement, request
    counters and code version, each provider's setup, each role's LLM with shared-model warnings, and matching."""
    fingerprint = runs.questions_fingerprint(question_frame)
    recursive = selection.recursive
    refinements = []
    if recursive is not None:
        found = recursive.lazy().select(pl.col("refinement").unique()).collect()["refinement"].to_list()
        refinements = sorted(r for r in found if r not in ("none", "error"))
    stamps = {name: runs.read_stamp("recursive_results", name) for name in selection.included}
    stats = {name: stamp.get("provider_stats") or {} for name, stamp in stamps.items()}
    setup = {name: stamp.get("provider_info") or {} for name, stamp in stamps.items()}
    provider_llms = {
        name: setup[name].get("llm") or (PROVIDERS[name].llm if name in PROVIDERS else "?")
        for name in selection.included
    }
    synthetic = question_frame.filter(pl.col("kind") == "synthetic")
    roles = disclosure.llm_roles(
        question_generators=sorted(set(synthetic["generator"].to_list())),
        provider_llms=provider_llms,
        refiners=refinements,
        judge=judge_name,
        judge_offline=judge_offline,
    )
    return {
        "run_id": runs.run_id(
            questions=fingerprint,
            providers=selection.included,
            depths=depths,
            page_sizes=page_sizes,
            judge=judge_name,
        ),
        "created": datetime.now(UTC).isoformat(),
        "questions": fingerprint,
        "question_counts": dict(question_frame.group_by("kind").len().sort("kind").iter_rows()),
        "question_sources": question_sources(question_frame),
        "providers": selection.included,
        "excluded": selection.excluded,
        "skipped": skipped,
        "depths": sorted(set(depths)),
        "page_sizes": sorted(set(page_sizes)),
        "judge": judge_name,
        "judge_offline": judge_offline,
        "refinement": ", ".join(refinements) or "none",
        "provider_stats": {k: v for k, v in stats.items() if v},
        "provider_setup": {k: v for k, v in setup.items() if v},
        "llm_roles": roles,
        "warnings": disclosure.shared_model_warnings(roles),
        "primary": primary,
        "matching": matching or [],
        "qrels_excluded": qrels_excluded or {},
        "token_budget": token_budget,
        "code_version": runs.CODE_VERSION,
    }


def report_options(manifest: dict[str, Any], comparisons: pl.DataFrame | None) -> dict[str, Any]:
    """`evals.report.write_report`'s keyword arguments for a stored run."""
    return {
        "run": manifest,
        "agreement": ledger.read_agreement(),
        "cost": ledger.run_cost(manifest.get("providers", []), request_prices()),
        "comparisons": comparisons,
        **_plan_of(manifest),
    }


def _plan_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The recorded plan and the run's actual counts when the plan was made for this run's providers and grid."""
    plan = ledger.read_plan()
    if not plan:
        return {}
    same = (
        set(plan.get("providers", [])) == set(manifest.get("providers", []))
        and plan.get("depths") == sorted(manifest.get("depths", []))
        and plan.get("page_sizes") == sorted(manifest.get("page_sizes", []))
    )
    if not same:
        return {}
    return {"plan": plan, "actual": ledger.actual_by_plan_role(manifest.get("providers", []))}
