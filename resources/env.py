"""How a secret reaches a resource: as `dg.EnvVar(name)`, so Dagster resolves it at run time and shows only the
variable's name in the UI and in run config."""

from __future__ import annotations

from typing import Any

import dagster as dg

from lumina_assets.core import settings


def env_secret(name: str, missing: Any = "") -> Any:
    """`dg.EnvVar(name)` when the variable is set, else `missing`: an unset EnvVar would fail the whole code
    location, while a missing key only means the resource that needs it says so (a provider is skipped, an LLM is
    offline)."""
    return dg.EnvVar(name) if settings.is_set(name) else missing
