"""What a benchmark run must say about its own setup: Lumina's search configuration, the index and embedding model
it searched, which LLM every role used (question generator, each provider, refiner, judge) and a warning whenever
two roles share a model (a judge grading its own rewrites, a search LLM answering questions it wrote).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

NO_LLM = ("none", "offline", "offline:template", "offline:pseudo-relevance-feedback", "")


def describe_search_config(config) -> dict[str, Any]:
    """SearchConfig as JSON values; a model-backed stage (a callable) is named by its function, None when off."""
    out: dict[str, Any] = {}
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if callable(value):
            value = getattr(value, "__qualname__", type(value).__name__).split(".<locals>")[0]
        elif isinstance(value, dict):
            value = {str(k): v for k, v in value.items()}
        out[item.name] = value
    return out


def engine_setup(search_fn: Callable) -> dict[str, Any]:
    """The SearchEngine behind a bound `search` method: its configuration as it searched (with any setting the
    index recorded applied), that recorded setting, the index's table versions and the embedding model that built
    the index and the one that encodes queries. Through `lumina serve`'s API (no
    engine here) only that is said."""
    engine = getattr(search_fn, "__self__", None)
    if engine is None or not hasattr(engine, "config"):
        return {"engine": "lumina serve API (configuration not visible from here)"}
    out: dict[str, Any] = {"search_config": describe_search_config(engine.config)}
    record = getattr(
        getattr(engine, "tuning", None), "record", None
    )  # the setting the index recorded, if any
    if record is not None and hasattr(record, "describe"):
        out["index_tuning"] = record.describe()
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
    """The model a role used, from its label (`llm:anthropic:claude-sonnet-4-6` -> `claude-sonnet-4-6`); None for
    no LLM (offline template, pseudo-relevance feedback, no judge)."""
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
