"""The seeds file (`LUMINA_SEEDS`, data/seeds.yaml): what the live crawl starts from, read defensively. The size,
YAML aliases and nesting are bounded before anything expands, every field is checked (pydantic) with a wrong one
named in `problems` and its default kept: a bad file gives no seeds and says why, never a failed run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, TypeAdapter, ValidationError

from lumina_assets.core.ids import normalize_arxiv_id, normalize_doi, normalize_openalex_id

MAX_SEEDS_BYTES = 1024 * 1024  # tens of thousands of DOIs
MAX_YAML_ALIASES = 32  # a hand-written seeds file needs none; a bomb needs thousands
MAX_YAML_DEPTH = 16  # the schema nests three levels deep


@dataclass
class ArxivQuery:
    query: str
    max_results: int = 25


@dataclass
class Seeds:
    dois: list[str] = field(default_factory=list)
    arxiv_ids: list[str] = field(default_factory=list)
    openalex_ids: list[str] = field(default_factory=list)
    arxiv_queries: list[ArxivQuery] = field(default_factory=list)
    depth: int = 1
    max_papers: int = 150
    references_per_paper: int = 25
    languages: list[str] = field(default_factory=lambda: ["en"])
    require_abstract: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def identifiers(self) -> list[str]:
        return [*self.dois, *self.arxiv_ids, *self.openalex_ids]

    def is_empty(self) -> bool:
        return not self.identifiers and not self.arxiv_queries


# The settings a seeds file may give, with their bounds; a value outside them is a problem and the default stays.
SECTIONS: dict[str, dict[str, tuple[Any, TypeAdapter]]] = {
    "crawl": {
        "depth": (1, TypeAdapter(Annotated[int, Field(ge=0, le=5)])),
        "max_papers": (150, TypeAdapter(Annotated[int, Field(ge=1, le=100_000)])),
        "references_per_paper": (25, TypeAdapter(Annotated[int, Field(ge=0, le=1000)])),
    },
    "filters": {
        "languages": (["en"], TypeAdapter(list[Annotated[str, Field(min_length=2, max_length=8)]])),
        "require_abstract": (True, TypeAdapter(bool)),
    },
}
ID_LISTS = {  # list name -> (normalizer, what one entry must be)
    "dois": (normalize_doi, "a DOI"),
    "arxiv_ids": (normalize_arxiv_id, "an arXiv id"),
    "openalex_ids": (normalize_openalex_id, "an OpenAlex id"),
}
KNOWN_KEYS = {*ID_LISTS, "arxiv_queries", *SECTIONS}
MAX_RESULTS = TypeAdapter(Annotated[int, Field(ge=1, le=2000)])
MISSING = ("", "~", "null", "Null", "NULL")  # what YAML's BaseLoader reads an empty value as


class SeedFileRefused(yaml.YAMLError):
    """A seeds file the bounded loader will not compose (too many aliases, nested too deep)."""


class BoundedLoader(yaml.BaseLoader):
    """YAML's BaseLoader (every scalar a string: `2501.10120` stays the id it is, never a float) that counts alias
    references and nesting as it composes, refusing past MAX_YAML_ALIASES / MAX_YAML_DEPTH."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise SeedFileRefused(f"more than {MAX_YAML_ALIASES} YAML aliases (an anchor bomb?)")
        self.depth += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise SeedFileRefused(f"nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def read_seeds_yaml(path: Path, problems: list[str]) -> dict | None:
    """The file's top-level mapping (every scalar a string), or None with the reason added to `problems`."""
    if not path.exists():
        problems.append(f"seed file {path} does not exist")
        return None
    size = path.stat().st_size
    if size > MAX_SEEDS_BYTES:
        problems.append(
            f"seed file {path} is {size:,} bytes, over the {MAX_SEEDS_BYTES:,} byte cap: not read"
        )
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        raw = yaml.load(text, Loader=BoundedLoader)  # noqa: S506 - BaseLoader builds plain strings, lists, dicts
    except SeedFileRefused as exc:
        problems.append(f"seed file {path} refused: {exc}")
        return None
    except (yaml.YAMLError, RecursionError) as exc:
        problems.append(f"seed file {path} is not valid YAML: {exc}")
        return None
    if raw is None or raw in MISSING:
        problems.append(f"seed file {path} is empty")
        return None
    if not isinstance(raw, dict):
        problems.append(f"seed file {path} must be a mapping, got {type(raw).__name__}")
        return None
    return raw


def load_seeds(path: Path) -> Seeds:
    """Read seeds.yaml; malformed entries and wrongly typed settings are reported in `problems` and skipped (a
    setting keeps its default), never fatal. Identifiers are read as the strings written."""
    seeds = Seeds()
    raw = read_seeds_yaml(path, seeds.problems)
    if raw is None:
        return seeds
    for key in sorted(set(raw) - KNOWN_KEYS, key=str):
        seeds.problems.append(
            f"unknown key {str(key)[:40]!r} ignored (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    for name, (normalize, wanted) in ID_LISTS.items():
        for value in _entries(raw, name, seeds.problems):
            if isinstance(value, str) and (normalized := normalize(value)):
                getattr(seeds, name).append(normalized)
            else:
                seeds.problems.append(f"{name}: not {wanted}: {_shown(value)}")
    for entry in _entries(raw, "arxiv_queries", seeds.problems):
        query = _arxiv_query(entry, seeds.problems)
        if query is not None:
            seeds.arxiv_queries.append(query)
    for section, fields in SECTIONS.items():
        given = raw.get(section, "")
        if given in MISSING:
            continue
        if not isinstance(given, dict):
            seeds.problems.append(f"{section}: must be a mapping, got {_shown(given)}; defaults used")
            continue
        for key in sorted(set(given) - set(fields), key=str):
            seeds.problems.append(f"{section}: unknown key {str(key)[:40]!r} ignored")
        for key, (default, adapter) in fields.items():
            if key in given:
                setattr(
                    seeds, key, _validated(f"{section}.{key}", given[key], default, adapter, seeds.problems)
                )
    if seeds.is_empty():
        seeds.problems.append(f"seed file {path} lists no DOIs, arXiv ids, OpenAlex ids or arXiv queries")
    return seeds


def _shown(value: Any) -> str:
    """A value for a problem message, short whatever it holds."""
    if isinstance(value, str):
        return repr(value[:80])
    return f"a {type(value).__name__}"


def _entries(raw: dict, name: str, problems: list[str]) -> list:
    value = raw.get(name, "")
    if value in MISSING:
        return []
    if not isinstance(value, list):
        problems.append(f"{name}: must be a list, got {_shown(value)}")
        return []
    return value


def _validated(name: str, value: Any, default: Any, adapter: TypeAdapter, problems: list[str]) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = "".join(f"[{p}]" for p in first["loc"])
        problems.append(
            f"{name}{where}: {first['msg']} (got {_shown(value)}); the default {default!r} is used"
        )
        return default


def _arxiv_query(entry: Any, problems: list[str]) -> ArxivQuery | None:
    if isinstance(entry, str) and entry.strip():
        return ArxivQuery(entry)
    if isinstance(entry, dict) and isinstance(entry.get("query"), str) and entry["query"].strip():
        limit = entry.get("max_results", "25")
        return ArxivQuery(
            entry["query"], _validated("arxiv_queries.max_results", limit, 25, MAX_RESULTS, problems)
        )
    problems.append(f"arxiv_queries: an entry without a query: {_shown(entry)}")
    return None
