"""Dependencies run one way (issue 10): domain packages never import Dagster, `resources/`, `sensors/`, the asset
definitions or the CLI; `resources/` never imports `defs/`, the CLI or sensors; `defs/` never imports the CLI; and no
module but `lumina_assets/core/settings.py` reads the environment. A small AST walk over every project .py file,
imports inside functions included; the checker itself is tested on synthetic sources so a violation cannot pass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lumina_assets.core.settings import PROJECT_ROOT

# Not Dagster-aware: plain Python, importable and testable without an instance.
DOMAIN = (
    "lumina_assets/core",
    "lumina_assets/corpus",
    "lumina_assets/parsing",
    "lumina_assets/indexing",
    "lumina_assets/search",
    "evals",
)
OUTER = (
    "dagster",
    "resources",
    "sensors",
    "lumina_assets.defs",
    "lumina_assets.cli",
    "lumina_assets.definitions",
)

# folder (relative to the project root) -> module prefixes it must not import
RULES: dict[str, tuple[str, ...]] = {
    **{folder: OUTER for folder in DOMAIN},
    "resources": ("lumina_assets.defs", "lumina_assets.cli", "lumina_assets.definitions", "sensors"),
    "lumina_assets/defs": ("lumina_assets.cli",),
}

SETTINGS = "lumina_assets/core/settings.py"
# Folders whose .py files may read the environment: tests build subprocess environments, scripts are standalone.
ENV_EXEMPT = ("tests", "scripts")
SOURCE_FOLDERS = ("lumina_assets", "resources", "sensors", "evals", "scripts", "tests")


def _matches(module: str, prefix: str) -> bool:
    """`module` is `prefix` or inside it; `dagster` also covers its sibling distributions (dagster_postgres...)."""
    if module == prefix or module.startswith(prefix + "."):
        return True
    return prefix == "dagster" and module.split(".")[0].startswith("dagster_")


def imported_modules(source: str, package: str = "") -> list[tuple[int, str]]:
    """Every module a source imports, anywhere in it: `import a.b`, `from a import b` (as `a` and `a.b`, since b may
    be a submodule), relative imports resolved against `package`, and `importlib.import_module("...")` /
    `__import__("...")` with a literal name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def forbidden_imports(source: str, banned: tuple[str, ...], package: str = "") -> list[str]:
    """`line: module` for each import of a banned module (or anything inside one)."""
    return sorted(
        {
            f"{line}: {module}"
            for line, module in imported_modules(source, package)
            if any(_matches(module, prefix) for prefix in banned)
        }
    )


def environment_reads(source: str) -> list[str]:
    """`line: what` for each use of `os.environ` / `os.environb` / `os.getenv` (or the names imported from os)."""
    hits = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "environb", "getenv"):
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                hits.add(f"{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            hits |= {
                f"{node.lineno}: from os import {a.name}"
                for a in node.names
                if a.name in ("environ", "getenv")
            }
    return sorted(hits)


def _project_files() -> list[Path]:
    files = []
    for folder in SOURCE_FOLDERS:
        files += [p for p in (PROJECT_ROOT / folder).rglob("*.py") if ".venv" not in p.parts]
    return sorted(files)


def _package(rel: str) -> str:
    parts = Path(rel).with_suffix("").parts
    return ".".join(parts[:-1])


def _rule_for(rel: str) -> tuple[str, ...]:
    for folder, banned in RULES.items():
        if rel.startswith(folder + "/"):
            return banned
    return ()


def test_the_tree_is_scanned():
    rels = {p.relative_to(PROJECT_ROOT).as_posix() for p in _project_files()}
    for folder in (*DOMAIN, "resources", "lumina_assets/defs"):
        assert any(r.startswith(folder + "/") for r in rels), f"no .py files found under {folder}"


def test_dependencies_run_one_way():
    violations = []
    for path in _project_files():
        rel = path.relative_to(PROJECT_ROOT).as_posix()
        banned = _rule_for(rel)
        if banned:
            violations += [
                f"{rel}:{hit}" for hit in forbidden_imports(path.read_text(), banned, _package(rel))
            ]
    assert not violations, "imports against the layer direction:\n" + "\n".join(violations)


def test_environment_is_read_only_in_settings():
    violations = []
    for path in _project_files():
        rel = path.relative_to(PROJECT_ROOT).as_posix()
        if rel == SETTINGS or rel.split("/")[0] in ENV_EXEMPT:
            continue
        violations += [f"{rel}:{hit}" for hit in environment_reads(path.read_text())]
    assert not violations, "environment read outside lumina_assets/core/settings.py:\n" + "\n".join(
        violations
    )


@pytest.mark.parametrize(
    "source",
    [
        "import dagster as dg",
        "from dagster import asset",
        "import dagster_postgres",
        "def f():\n    from resources.llm import build_llm_resources\n",
        "from lumina_assets import defs",
        "from lumina_assets.cli.main import main",
        "import lumina_assets.definitions",
        "import importlib\nimportlib.import_module('sensors.inbox')",
        "from ..defs import corpus",  # relative, from lumina_assets.search
    ],
)
def test_checker_catches_each_kind_of_forbidden_import(source):
    assert forbidden_imports(source, OUTER, package="lumina_assets.search")


@pytest.mark.parametrize(
    "source",
    [
        "import polars as pl",
        "from lumina_assets.core import tables",
        "from lumina_assets.search.bm25 import BM25",
        "from . import bm25",
        "import resourceful",  # a name that merely starts like a banned one
        "from lumina_assets import definitions_helper",
    ],
)
def test_checker_allows_what_is_allowed(source):
    assert forbidden_imports(source, OUTER, package="lumina_assets.search") == []


def test_checker_catches_environment_reads():
    assert environment_reads("import os\nx = os.environ.get('A')")
    assert environment_reads("import os\nx = os.getenv('A')")
    assert environment_reads("from os import environ\n")
    assert environment_reads("import os\nos.environ['A'] = '1'")  # outside tests, writing is reserved too
    assert environment_reads("import os\np = os.path.join('a', 'b')") == []
