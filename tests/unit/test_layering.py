"""Dependencies run one way. The layer and direction rules are import-linter contracts in pyproject.toml
(`lint-imports`); two project rules import-linter cannot state stay here as small AST checks: no module imports
another module's private (`_name`) names, and no module but `lumina_assets/core/settings.py` reads the environment.
Each check is also run against a planted violation, so a broken checker cannot pass."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lumina_assets.core.settings import PROJECT_ROOT

PROJECT_PACKAGES = ("lumina_assets", "evals", "resources", "sensors")
SETTINGS = "lumina_assets/core/settings.py"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the tree at `root` (its pyproject.toml's contracts, its packages first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_layering_contracts_hold():
    result = lint_imports(PROJECT_ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout and "4 kept" in result.stdout


@pytest.mark.parametrize(
    ("planted_file", "source", "contract"),
    [
        # a back-import, inside a function and relative: parsing reaching up into corpus
        (
            "lumina_assets/parsing/planted.py",
            "def f():\n    from ..corpus import crawl\n",
            "pipeline's order",
        ),
        # evals is the last layer: search may not import it
        ("lumina_assets/search/planted.py", "import evals.metrics\n", "pipeline's order"),
        ("lumina_assets/indexing/planted.py", "import dagster\n", "plain Python"),
        ("resources/planted.py", "from sensors import inbox\n", "Resources point inward"),
        ("lumina_assets/defs/planted.py", "from lumina_assets.cli import main\n", "CLI"),
    ],
)
def test_a_planted_violation_breaks_its_contract(tmp_path, planted_file, source, contract):
    for package in PROJECT_PACKAGES:
        shutil.copytree(
            PROJECT_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / planted_file).write_text(source)
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert len(broken) == 1 and contract in broken[0], result.stdout[-3000:]


def _project_files(root: Path = PROJECT_ROOT) -> list[tuple[str, Path]]:
    return [
        (p.relative_to(root).as_posix(), p)
        for folder in PROJECT_PACKAGES
        for p in sorted((root / folder).rglob("*.py"))
    ]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str, module: str, root: Path = PROJECT_ROOT) -> list[str]:
    """`line: module.name` for each private name of another project module that `source` (the module `module`)
    imports (`from x import _y`) or reads off an imported module (`import x as m; m._y`, `from pkg import mod;
    mod._y`)."""

    def is_module(name: str) -> bool:
        path = root / Path(*name.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    tree = ast.parse(source)
    package = module.rpartition(".")[0]
    hits: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT_PACKAGES:
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([*parts, base] if base else parts)
            if base.split(".")[0] not in PROJECT_PACKAGES or base == module:
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    hits.add(f"{node.lineno}: {base}.{alias.name}")
                elif is_module(f"{base}.{alias.name}"):
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and aliases.get(node.value.id, module) != module
        ):
            hits.add(f"{node.lineno}: {aliases[node.value.id]}.{node.attr}")
    return sorted(hits)


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


def test_private_names_stay_private():
    violations = []
    for rel, path in _project_files():
        module = ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__")
        violations += [f"{rel}:{hit}" for hit in private_imports(path.read_text(), module)]
    assert not violations, "private names imported across modules:\n" + "\n".join(violations)


def test_environment_is_read_only_in_settings():
    violations = [
        f"{rel}:{hit}"
        for rel, path in _project_files()
        if rel != SETTINGS
        for hit in environment_reads(path.read_text())
    ]
    assert not violations, f"environment read outside {SETTINGS}:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    "source",
    [
        "from lumina_assets.search.stores import _rows_on_loop\n",
        "from lumina_assets.search import stores\nstores._rows_on_loop(1)\n",
        "import lumina_assets.search.stores as s\ns._rows_on_loop(1)\n",
    ],
)
def test_private_check_catches_each_form(source):
    assert private_imports(source, "evals.planted")
    assert private_imports("from lumina_assets.search.stores import rows\n", "evals.planted") == []
    assert private_imports("def _own():\n    pass\n_own()\n", "lumina_assets.search.stores") == []


def test_environment_check_catches_each_form():
    assert environment_reads("import os\nx = os.environ.get('A')")
    assert environment_reads("import os\nx = os.getenv('A')")
    assert environment_reads("from os import environ\n")
    assert environment_reads("import os\nos.environ['A'] = '1'")  # outside tests, writing is reserved too
    assert environment_reads("import os\np = os.path.join('a', 'b')") == []
