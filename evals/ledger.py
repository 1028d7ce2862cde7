"""What a benchmark run records beside its tables, under data/benchmark/: LLM cost per asset (costs/), why a
provider was skipped (skipped/), and the judge's agreement with human qrels (judge_agreement.json). The report
reads all three, so it can say what the whole benchmark cost, what was left out and how far the judge is trusted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lumina_assets.core import settings


def _costs_dir() -> Path:
    return settings.benchmark_dir() / "costs"


def _skip_path(name: str, partition: str) -> Path:
    return settings.benchmark_dir() / "skipped" / f"{name}.{partition}.txt"


def agreement_path() -> Path:
    return settings.benchmark_dir() / "judge_agreement.json"


def record_cost(asset: str, partition: str | None, client) -> None:
    """Per-asset LLM usage as JSON (nothing for no client or an offline one)."""
    if client is None or client.is_offline:
        return
    path = _costs_dir() / f"{asset}.{partition or 'all'}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": client.label, **client.usage.as_metadata("llm")}), encoding="utf-8")


def total_cost() -> dict[str, Any]:
    """Calls, cache hits, tokens and estimated USD summed over the last materialization of each asset."""
    folder = _costs_dir()
    entries = (
        [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        if folder.exists()
        else []
    )
    if not entries:
        return {}
    return {
        "LLM calls sent": sum(e["llm_calls"] for e in entries),
        "LLM cache hits": sum(e["llm_cache_hits"] for e in entries),
        "tokens in/out": f"{sum(e['llm_input_tokens'] for e in entries)}/{sum(e['llm_output_tokens'] for e in entries)}",
        "estimated USD (last materialization of each asset)": round(
            sum(e["llm_estimated_cost_usd"] for e in entries), 4
        ),
    }


def mark_skipped(name: str, partition: str, reason: str) -> None:
    path = _skip_path(name, partition)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reason, encoding="utf-8")


def clear_skipped(name: str, partition: str) -> None:
    _skip_path(name, partition).unlink(missing_ok=True)


def skipped_providers() -> dict[str, str]:
    """Provider -> the reason its `provider_results` partition was skipped."""
    folder = settings.benchmark_dir() / "skipped"
    reasons: dict[str, str] = {}
    for path in sorted(folder.glob("provider_results.*.txt")) if folder.exists() else []:
        reasons[path.stem.split(".", 1)[1]] = path.read_text(encoding="utf-8")
    return reasons


def write_agreement(agreement: dict[str, Any]) -> None:
    path = agreement_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(agreement, indent=2), encoding="utf-8")


def read_agreement() -> dict[str, Any]:
    """The last measured judge agreement, {} when none was measured."""
    path = agreement_path()
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
