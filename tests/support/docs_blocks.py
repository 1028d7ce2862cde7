"""Configuration blocks copied out of the user docs as written, for tests that load what a user would copy."""

from __future__ import annotations

import re

from lumina_assets.core import settings


def documented_yaml(page: str, heading: str, index: int = 0) -> str:
    """The `index`-th yaml block under `heading` (up to the next `## `) of docs/<page>, exactly as written."""
    text = (settings.PROJECT_ROOT / "docs" / page).read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, re.S)[index]


def documented_postgres_dagster_yaml() -> str:
    return documented_yaml("production.md", "## Dagster instance on PostgreSQL")
