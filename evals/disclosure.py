"""What a benchmark run must say about its own setup: Lumina's search configuration, index and embedding models,
the LLM of every role, and a warning whenever two roles share a model."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# The code whose change can change a ranking: search, indexing and the benchmark's own providers.
RANKING_CODE = ("lumina_assets/search", "lumina_assets/indexing", "evals/providers.py", "evals/lexical.py")
_ROOT = Path(__file__).resolve().parent.parent

# Which collections and which halves informed Lumina's current defaults: a report states it beside its headline.
DEFAULTS_INFORMED_BY = (
    "Lumina's SearchConfig defaults were chosen on all 809 SciFact train claims and CISI's 76 queries before the "
    "held-out split existed; corpus-graph smoothing (weight 0.2, 3 neighbours) was switched on after the split "
    "existed, with held-out-half figures read while choosing; earlier margin tests gated changes on the first 415 "
    "train claims, about half of them now held out. Margin and tuning tests read the tuning half only from now on. "
    "So SciFact train's held-out half is held out of tuning code, not untouched by the choice of the defaults; a "
    "collection's own test split (SciFact's BEIR test split once fetched) informed nothing"
)

NO_LLM = ("none", "offline", "offline:template", "offline:pseudo-relevance-feedback", "")


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex) of a described configuration, keys sorted."""
    blob = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def ranking_code_hash(paths: Iterable[str] = RANKING_CODE, root: Path = _ROOT) -> str:
    """SHA-256 (first 16 hex) over the paths and bytes of the Python sources that rank (`RANKING_CODE`)."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for item in paths:
        path = root / item
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
    for file in sorted(files):
        digest.update(str(file.relative_to(root)).encode("utf-8") + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def engine_setup(search_fn: Callable) -> dict[str, Any]:
    """The SearchEngine behind a bound `search` method: its configuration, the index's table versions and the
    index and query models (through `lumina serve`'s API, only that)."""
    engine = getattr(search_fn, "__self__", None)
    if engine is None or not hasattr(engine, "config"):
        return {"engine": "lumina serve API (configuration not visible from here)"}
    config = engine.config.as_json()
    out: dict[str, Any] = {
        "search_config": config,
        "config_hash": config_hash(config),
        "ranking_code_hash": ranking_code_hash(),
    }
    try:
        from lumina_assets.indexing import model_identity
        from lumina_assets.indexing.lancedb_tables import PASSAGES_TABLE, index_version
        from lumina_assets.indexing.table_ops import open_table

        out["index_uri"] = str(engine.db_uri)
        out["index_version"] = index_version(engine.db)
        table = open_table(engine.db, PASSAGES_TABLE)
        out["index_model"] = (
            model_identity.of_schema(table.schema).describe() if table is not None else "no passages table"
        )
        out["query_model"] = model_identity.of_embedder(engine.embedder).describe()
    except Exception as exc:  # disclosure must not fail a run that searched fine
        out["index_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def model_of(label: str | None) -> str | None:
    """The model in a role's label (`llm:anthropic:claude-sonnet-4-6` -> `claude-sonnet-4-6`); None for no LLM."""
    if not label:
        return None
    text = label.removeprefix("llm:")
    if text in NO_LLM or text.startswith("offline") or " " in text:  # prose: "not disclosed by the service"
        return None
    return text.rsplit(":", 1)[-1].strip().lower() or None


def llm_roles(
    *,
    question_generators: list[str],
    provider_llms: Mapping[str, str],
    refiners: list[str],
    judge: str,
    judge_offline: bool,
) -> dict[str, str]:
    """Role -> the LLM (label) it used, or what it used instead."""
    roles = {"question generator": ", ".join(question_generators) or "none"}
    for provider, llm in sorted(provider_llms.items()):
        roles[f"provider {provider}"] = llm or "none"
    roles["refiner"] = ", ".join(refiners) or "none"
    roles["judge"] = "none (offline: nothing judged)" if judge_offline else judge
    return roles


def shared_model_warnings(roles: Mapping[str, str]) -> list[str]:
    """One warning per model used by two or more roles."""
    users: dict[str, list[str]] = {}
    for role, labels in roles.items():
        for label in labels.split(", "):
            model = model_of(label)
            if model and role not in users.setdefault(model, []):
                users[model].append(role)
    return [
        f"{', '.join(names)} share the model `{model}`: "
        + (
            "the judge grades text its own model wrote"
            if "judge" in names
            else "one model both writes and answers the benchmark"
        )
        for model, names in sorted(users.items())
        if len(names) > 1
    ]
