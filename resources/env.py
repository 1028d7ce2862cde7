"""How a secret reaches a resource: as `dg.EnvVar(name)`, resolved at run time and shown only by name.

A run that overrides any field of a resource rebuilds it from run config alone, dropping constructor values
(an `api_key=dg.EnvVar(...)` too); so resources also keep the variable's name as a class default
(`api_key_env`, `base_url_env`) and read it with `first_secret` when the value is gone."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import dagster as dg

from lumina_assets.core import settings


def env_secret(name: str, missing: Any = "") -> Any:
    """`dg.EnvVar(name)` when the variable is set, else `missing`: an unset EnvVar would fail the whole code
    location, while a missing key only means the resource that needs it says so (a provider is skipped, an LLM is
    offline)."""
    return dg.EnvVar(name) if settings.is_set(name) else missing


def first_secret(names: Iterable[str]) -> str:
    """The value of the first of `names` that is set, read through `dg.EnvVar` (never logged); "" when none is."""
    for name in names:
        if name and settings.is_set(name):
            return dg.EnvVar(name).get_value() or ""
    return ""
