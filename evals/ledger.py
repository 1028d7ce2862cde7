"""What a benchmark run records beside its tables under data/benchmark/ (LLM cost per asset, provider requests, skip
reasons, the judge's agreement, the plan), so the report can say what this run cost and what was left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lumina_assets.core import settings, tables
from lumina_assets.core.tables import atomic_write_text


def _costs_dir() -> Path:
    return settings.benchmark_dir() / "costs"


def _skip_path(name: str, partition: str) -> Path:
    return settings.benchmark_dir() / "skipped" / f"{name}.{partition}.txt"


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


ROLES = {  # which LLM role an asset's calls are, for the cost line
    "synthetic_questions": "question generator",
    "recursive_results": "refiner",
    "judgments": "judge",
    "judge_validation": "judge",
}


def record_cost(asset: str, partition: str | None, client, *, role: str = "") -> None:
    """Per-asset LLM usage as JSON (none for an offline client); `role` tells two clients of one asset apart."""
    if client is None or client.is_offline:
        return
    suffix = f".{role}" if role else ""
    entry = {
        "asset": asset,
        "partition": partition,
        "role": role or ROLES.get(asset, asset),
        "model": client.label,
        **client.usage.as_metadata("llm"),
    }
    atomic_write_text(_costs_dir() / f"{asset}.{partition or 'all'}{suffix}.json", json.dumps(entry))


def record_requests(asset: str, partition: str, counters: dict[str, Any]) -> None:
    """A provider's HTTP counters for one asset (requests sent, cache hits, a price its responses stated)."""
    entry = {"asset": asset, "partition": partition, **counters}
    atomic_write_text(settings.benchmark_dir() / "requests" / f"{asset}.{partition}.json", json.dumps(entry))


def provider_of(partition: str) -> str:
    """The provider of a partition key (`provider` or `provider|shard`)."""
    return partition.split("|")[0]


def _entries(folder: Path, partitions: set[str]) -> list[dict[str, Any]]:
    """The entries of this run: its providers' partitions of the current shards, and the unpartitioned steps."""
    from evals import shards

    questions = tables.read(tables.QUESTIONS)
    current = set(shards.current(questions["question_id"].to_list())) if questions is not None else set()
    entries = []
    for path in sorted(folder.glob("*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        partition = entry.get("partition", path.name.split(".")[1])
        shard = partition.partition("|")[2] if partition else ""
        if partition in (None, "all") or (provider_of(partition) in partitions and shard in current | {""}):
            entries.append(entry)
    return entries


def run_cost(providers: list[str], request_prices: dict[str, tuple[float | None, str]]) -> dict[str, Any]:
    """This run's cost, for its providers and unpartitioned steps: LLM calls per role and requests per API, in USD
    or unknown without a price; cached answers counted apart. `request_prices`: provider -> (USD or None, source)."""
    wanted = set(providers)
    llm: dict[str, dict[str, Any]] = {}
    for entry in _entries(_costs_dir(), wanted):
        key = f"{entry.get('role', '?')} ({entry['model']})"
        row = llm.setdefault(key, {"calls": 0, "cache_hits": 0, "tokens_in": 0, "tokens_out": 0, "usd": 0.0})
        row["calls"] += entry["llm_calls"]
        row["cache_hits"] += entry["llm_cache_hits"]
        row["tokens_in"] += entry["llm_input_tokens"]
        row["tokens_out"] += entry["llm_output_tokens"]
        if entry.get("llm_calls_with_unknown_price"):
            row["usd"] = None
        elif row["usd"] is not None:
            row["usd"] += entry["llm_estimated_cost_usd"]
    requests: dict[str, dict[str, Any]] = {}
    for entry in _entries(settings.benchmark_dir() / "requests", wanted):
        provider = provider_of(entry["partition"])
        price, note = request_prices.get(provider, (None, "no price known"))
        row = requests.setdefault(provider, {"requests": 0, "cache_hits": 0, "usd": 0.0, "price": note})
        sent = entry.get("http_requests", 0)
        row["requests"] += sent
        row["cache_hits"] += entry.get("http_cache_hits", 0)
        if "reported_cost_usd" in entry and not entry.get("unpriced_requests"):
            stated = entry["reported_cost_usd"]
        elif price is not None:
            stated = sent * price
        else:
            stated = None if sent else 0.0
        row["usd"] = None if row["usd"] is None or stated is None else row["usd"] + stated
    known = [r["usd"] for r in (*llm.values(), *requests.values())]
    total = sum(u for u in known if u is not None)
    return {
        "llm": llm,
        "requests": requests,
        "total_usd": round(total, 4),
        "total_complete": all(u is not None for u in known),
    }


def mark_skipped(name: str, partition: str, reason: str) -> None:
    atomic_write_text(_skip_path(name, partition), reason)


def clear_skipped(name: str, partition: str) -> None:
    _skip_path(name, partition).unlink(missing_ok=True)


def skipped_providers() -> dict[str, str]:
    """Provider -> the reason its `provider_results` partition was skipped."""
    folder = settings.benchmark_dir() / "skipped"
    reasons: dict[str, str] = {}
    for path in sorted(folder.glob("provider_results.*.txt")):
        reasons[path.stem.split(".", 1)[1]] = path.read_text(encoding="utf-8")
    return reasons


def write_agreement(agreement: dict[str, Any]) -> None:
    atomic_write_text(settings.benchmark_dir() / "judge_agreement.json", json.dumps(agreement, indent=2))


def read_agreement() -> dict[str, Any]:
    """The last measured judge agreement, {} when none was measured."""
    return _read_json(settings.benchmark_dir() / "judge_agreement.json")


def write_plan(plan: dict[str, Any]) -> None:
    """The plan of the run about to start, so its report can set it beside what the run actually sent."""
    atomic_write_text(settings.benchmark_dir() / "plan.json", json.dumps(plan, indent=2))


def read_plan() -> dict[str, Any]:
    return _read_json(settings.benchmark_dir() / "plan.json")


PLAN_ROLES = {  # plan role -> the (asset, role) cost entries that are its actual calls
    "questions": {("synthetic_questions", "question generator")},
    "refiner": {("recursive_results", "refiner")},
    "judge": {("judgments", "judge")},
    "pooled": {("pooled_judgments", "pooled_judgments")},  # `evals.pooled`, recorded by benchmark_scores
}
# Roles whose plan counts every call, cached or not; the judge's and pooled judging's plans count only prompts not
# in the cache, so their cache hits (verdicts another provider's pair or the judge step already asked) are not calls.
COUNTED_BEFORE_CACHE = {"questions", "refiner"}


def actual_by_plan_role(providers: list[str]) -> dict[str, dict[str, Any]]:
    """What the run sent, in the plan's roles: LLM calls and tokens per role, `cache_hits` where the plan counts a
    repeated prompt as a call (`COUNTED_BEFORE_CACHE`), and each provider's requests (sent + HTTP cache)."""
    wanted = set(providers)
    llm = {role: {"calls": 0, "cache_hits": 0, "input_tokens": 0, "output_tokens": 0} for role in PLAN_ROLES}
    for entry in _entries(_costs_dir(), wanted):
        for role, sources in PLAN_ROLES.items():
            if (entry["asset"], entry.get("role")) in sources:
                llm[role]["calls"] += entry["llm_calls"]
                llm[role]["cache_hits"] += entry["llm_cache_hits"] if role in COUNTED_BEFORE_CACHE else 0
                llm[role]["input_tokens"] += entry["llm_input_tokens"]
                llm[role]["output_tokens"] += entry["llm_output_tokens"]
    requests: dict[str, int] = {}
    for entry in _entries(settings.benchmark_dir() / "requests", wanted):
        # retries of a throttled or failed request are the same request again
        made = entry.get("http_requests", 0) - entry.get("http_retries", 0) + entry.get("http_cache_hits", 0)
        provider = provider_of(entry["partition"])
        requests[provider] = requests.get(provider, 0) + made
    return {"llm": llm, "provider_requests": requests}
