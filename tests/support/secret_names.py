"""Every secret variable the project names, found by reading it: the code (lumina_assets, resources, sensors,
evals) and the user docs (README.md, docs/*.md). A new key added to either is canaried by the tests that use this
list (the canary scan, the Kubernetes pod specs) without anyone having to add it by hand."""

from __future__ import annotations

import re

from lumina_assets.core import settings

PROJECT = settings.PROJECT_ROOT
CODE_FOLDERS = ("lumina_assets", "resources", "sensors", "evals")
# API keys, tokens, passwords and the AWS credential pair (the key id travels with its secret)
SECRET_NAME = re.compile(
    r"\b(?:[A-Z][A-Z0-9_]*_(?:API_KEY|SECRET_ACCESS_KEY|SECRET_KEY|TOKEN|PASSWORD|SECRET)|AWS_ACCESS_KEY_ID)\b"
)


def sources() -> dict[str, str]:
    """{path relative to the project: text} of every file the names are read from."""
    paths = [p for folder in CODE_FOLDERS for p in sorted((PROJECT / folder).rglob("*.py"))]
    paths += [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))]
    return {str(p.relative_to(PROJECT)): p.read_text(encoding="utf-8") for p in paths}


def secret_variables() -> set[str]:
    """In code, names inside a string literal (an environment read, an EnvVar, an `api_key_env`); a constant
    that happens to end in _TOKEN is not a variable. In the docs, every mention."""
    names: set[str] = set()
    for path, text in sources().items():
        if path.endswith(".py"):
            quoted = re.findall(r"[\"'`]([A-Z][A-Z0-9_]*)[\"'`]", text)
            names |= {name for name in quoted if SECRET_NAME.fullmatch(name)}
        else:
            names |= set(SECRET_NAME.findall(text))
    return names


def where_named(name: str) -> list[str]:
    return [path for path, text in sources().items() if re.search(rf"\b{name}\b", text)]
