"""Dependencies run one way: domain packages never import Dagster, `resources/`, `sensors/`, the asset definitions
or the CLI; `resources/` never imports `defs/`, the CLI or sensors; `defs/` never imports the CLI; the domain
packages follow the pipeline's order (core <- parsing <- corpus <- indexing <- search <- evals: each imports only
from those before it); no module imports another module's private (`_name`) names; and no module but
`lumina_assets/core/settings.py` reads the environment. A small AST walk over every project .py file, imports inside
functions included; the checker itself is tested on synthetic sources and a planted tree so a violation cannot
pass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lumina_assets.core.settings import PROJECT_ROOT

# Not Dagster-aware: plain Python, importable and testable without an instance.
DOMAIN = (
    "lumina_assets/core",
    "lumina_assets/parsing",
    "lumina_assets/corpus",
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

# The pipeline's order: each domain package imports only from the packages before it (collections are read in
# corpus, indexed in indexing, searched in search, and evaluated in evals).
DOMAIN_ORDER = (
    "lumina_assets.core",
    "lumina_assets.parsing",
    "lumina_assets.corpus",
    "lumina_assets.indexing",
    "lumina_assets.search",
    "evals",
)
assert [m.replace(".", "/") for m in DOMAIN_ORDER] == list(DOMAIN)

# folder (relative to the project root) -> module prefixes it must not import
RULES: dict[str, tuple[str, ...]] = {
    **{folder: OUTER + DOMAIN_ORDER[i + 1 :] for i, folder in enumerate(DOMAIN)},
    "resources": ("lumina_assets.defs", "lumina_assets.cli", "lumina_assets.definitions", "sensors"),
    "lumina_assets/defs": ("lumina_assets.cli",),
}

PROJECT_PACKAGES = ("lumina_assets", "evals", "resources", "sensors")
# Tests may reach into a module's internals (monkeypatching a cache, checking a helper); project code may not.
PRIVATE_EXEMPT = ("tests",)
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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str, module: str, is_module=lambda name: False) -> list[str]:
    """`line: module.name` for each private name of another project module that `source` (the module `module`)
    imports (`from x import _y`) or reads off an imported module (`import x as m; m._y`, `from pkg import mod;
    mod._y`). `is_module(name)` tells whether a dotted name is a module (to see `from pkg import mod`)."""
    tree = ast.parse(source)
    package = module.rpartition(".")[0]
    hits: set[str] = set()
    module_aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT_PACKAGES:
                    module_aliases[alias.asname or alias.name.split(".")[0]] = alias.name
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
                    module_aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and module_aliases[node.value.id] != module
        ):
            hits.add(f"{node.lineno}: {module_aliases[node.value.id]}.{node.attr}")
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


def _is_project_module(name: str, root: Path = PROJECT_ROOT) -> bool:
    path = root / Path(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def layer_violations(root: Path) -> list[str]:
    """Every import against the layer rules and every private-name import across modules under `root` (a project
    tree: the real one, or a planted one in a test)."""
    violations = []
    for folder in SOURCE_FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if ".venv" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            source = path.read_text()
            banned = _rule_for(rel)
            if banned:
                violations += [f"{rel}:{hit}" for hit in forbidden_imports(source, banned, _package(rel))]
            if rel.split("/")[0] not in PRIVATE_EXEMPT:
                module = ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__")
                violations += [
                    f"{rel}:{hit} (private name)"
                    for hit in private_imports(source, module, lambda name: _is_project_module(name, root))
                ]
    return violations


def test_domain_packages_follow_the_pipeline_order_and_keep_private_names_private():
    violations = layer_violations(PROJECT_ROOT)
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    ("planted_file", "source", "expected"),
    [
        # a back-import: indexing reaching up into search
        (
            "lumina_assets/indexing/planted.py",
            "from lumina_assets.search.engine import SearchEngine\n",
            "search",
        ),
        # the same inside a function, and relative
        ("lumina_assets/parsing/planted.py", "def f():\n    from ..corpus import crawl\n", "corpus"),
        # evals is the last layer: nothing before it may import it
        ("lumina_assets/search/planted.py", "import evals.metrics\n", "evals"),
        # a private name of another module, imported or read off the module
        (
            "lumina_assets/search/planted.py",
            "from lumina_assets.search.stores import _rows_on_loop\n",
            "private",
        ),
        ("evals/planted.py", "from lumina_assets.search import stores\nstores._rows_on_loop(1)\n", "private"),
    ],
)
def test_a_planted_violation_fails_the_layer_check(tmp_path, planted_file, source, expected):
    for folder in SOURCE_FOLDERS:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    for package in (
        "lumina_assets",
        "lumina_assets/search",
        "lumina_assets/indexing",
        "lumina_assets/parsing",
    ):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "lumina_assets/search/stores.py").write_text("def _rows_on_loop(q):\n    return q\n")
    (tmp_path / "lumina_assets/indexing/clean.py").write_text("from lumina_assets.core import tables\n")
    assert layer_violations(tmp_path) == []  # the clean tree passes
    (tmp_path / planted_file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / planted_file).write_text(source)
    found = layer_violations(tmp_path)
    assert found and all(v.startswith(planted_file) for v in found), found
    assert expected in "".join(found)


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
