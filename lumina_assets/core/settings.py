"""Lumina's settings: one typed object, the only place the environment is read.

`get()` returns a `LuminaSettings` whose groups each read their own `LUMINA_*` variables, parsed once per
distinct set of their values (so a test's `monkeypatch.setenv` is seen). Secrets are not settings:
resources read them through `dagster.EnvVar` (`resources/env.py`); only their presence is asked here
(`is_set`). docs/configuration.md is generated from these fields (`devtools/settings_docs.py`). Derived paths
are functions, so importing touches no disk."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parents[2]

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}

# A switch that is on only when set to 1/true/yes/on (anything else leaves it off: used where on is the risk).
OptIn = Annotated[bool, BeforeValidator(lambda v: v.lower() in _ON if isinstance(v, str) else v)]
# A switch that is off only when set to 0/false/no/off.
OptOut = Annotated[bool, BeforeValidator(lambda v: v.lower() not in _OFF if isinstance(v, str) else v)]


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _auto_none(value: Any) -> Any:
    return None if isinstance(value, str) and value.lower() == "auto" else value


Url = Annotated[
    str, BeforeValidator(lambda v: v.rstrip("/") if isinstance(v, str) else v)
]  # no trailing slash


def _env(name: str, default: Any = None, **kwargs: Any) -> Any:
    """A field read from variable `name` (also settable by its field name in code and tests); its description is
    the docstring under it."""
    return Field(default, validation_alias=AliasChoices(name), **kwargs)


def _derive(group: BaseSettings, name: str, value: Any) -> None:
    """Set a value worked out from others without counting it as set by the environment (`from_environment`)."""
    group.__dict__[name] = value


class _Group(BaseSettings):
    """One concern's variables. Values are stripped; a blank variable counts as unset."""

    model_config = SettingsConfigDict(
        extra="ignore", populate_by_name=True, validate_default=True, use_attribute_docstrings=True
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_blanks(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        cleaned = {k: v.strip() if isinstance(v, str) else v for k, v in data.items()}
        return {k: v for k, v in cleaned.items() if v != ""}


class PathSettings(_Group):
    """Where runtime state lives."""

    data_dir: Path = _env("LUMINA_DATA_DIR", PROJECT_ROOT / "data")
    """where tables, PDFs, caches, LanceDB, collections and reports live"""
    lancedb_uri: str = _env("LUMINA_LANCEDB_URI", "")
    """LanceDB location; `s3://bucket/path` for object storage ([production](production.md)); empty: `<data
    dir>/lancedb`"""
    corpus: Path | None = _env("LUMINA_CORPUS", None)
    """folder of PDFs, BEIR directory or reference library (a Zotero data folder or a `.bib` / `.ris` / CSL
    `.json` export, optionally written `zotero:<path>`; [your library](library-and-alerts.md)) indexed offline
    instead of the live crawl (`lumina fetch-collection` downloads a BEIR one)"""
    seeds: Path = _env("LUMINA_SEEDS", PROJECT_ROOT / "data" / "seeds.yaml")
    """seed DOIs / arXiv ids / OpenAlex ids / arXiv queries, crawl depth and cap"""

    @model_validator(mode="after")
    def _resolve(self) -> PathSettings:
        _derive(self, "data_dir", self.data_dir.expanduser().resolve())
        if self.corpus is not None:
            _derive(self, "corpus", Path(str(self.corpus).removeprefix("zotero:")).expanduser().resolve())
        return self


class EmbeddingSettings(_Group):
    """The encoder, its form, and how passage_index builds the index."""

    model: str = _env("LUMINA_EMBEDDING_MODEL", "")
    """sentence-transformers name or path for passages and queries; empty: the bundled all-MiniLM-L6-v2.
    Switching it re-embeds the index on the next run; a query model that does not match the index's is refused
    with a message naming both"""
    form: Annotated[Literal["auto", "fp32", "int8", "fp16"], BeforeValidator(_lower)] = _env(
        "LUMINA_EMBEDDING_FORM", "auto"
    )
    """stored vector form: `auto` picks per machine (int8 on CPUs with VNNI, fp32 on others, fp16 on a CUDA
    device); an existing index keeps the form it was built in"""
    sentence_vectors: OptOut = _env("LUMINA_SENTENCE_VECTORS", True)
    """`passage_index` stores every passage's sentence vectors for evidence highlighting
    ([embedding](embedding.md)); `0` / `false` / `no` / `off` leaves them out, and `lumina serve` then fills
    them in the background"""
    embed_parts: Annotated[int | None, BeforeValidator(_auto_none)] = _env("LUMINA_EMBED_PARTS", None, ge=1)
    """parallel steps that embed an index run's new passages (1: the index step embeds them itself); unset or
    `auto`: by passage count and cores"""
    model_cache: Path | None = _env("LUMINA_MODEL_CACHE", None)
    """where the encoder's ONNX export and int8 quantization are kept, keyed by weights and library versions;
    unset: `$XDG_CACHE_HOME/lumina/models` (`~/.cache/lumina/models`)"""
    fts_memory_mb: int | None = _env("LUMINA_FTS_MEMORY_MB", None)
    """cap on the resident memory of a full-text index build, in MB; unset: a quarter of the machine's memory,
    1-8 GB. A build that could pass it runs in a child process held under the cap
    ([embedding](embedding.md#full-text-index-under-a-memory-cap))"""
    xdg_cache_home: Path | None = _env("XDG_CACHE_HOME", None)
    """the user's cache folder (XDG base directories)"""
    cuda_visible_devices: str = _env("CUDA_VISIBLE_DEVICES", "")
    """GPUs visible to this process; when set, the `auto` form may pick fp16"""


class SearchSettings(_Group):
    """The optional reranker and the search process's index cache."""

    rerank_model: str = _env("LUMINA_RERANK_MODEL", "")
    """a sentence-transformers `CrossEncoder` name or path that reranks the top fused papers; empty: no
    rerank"""
    index_cache_mb: Annotated[int | Literal["auto", "unbounded"], BeforeValidator(_lower)] = _env(
        "LUMINA_INDEX_CACHE_MB", "auto"
    )
    """the most memory a search process's LanceDB index cache holds: a number of MB (at least 64) bounds it
    and preloads nothing; `unbounded` is LanceDB's default with every index preloaded; `auto` bounds it by the
    machine and preloads the indexes that fit ([search at scale](search-at-scale.md))"""

    @model_validator(mode="after")
    def _checked(self) -> SearchSettings:
        if isinstance(self.index_cache_mb, int) and self.index_cache_mb < 64:
            raise ValueError(
                f"LUMINA_INDEX_CACHE_MB={self.index_cache_mb!r}: a whole number of megabytes (at least 64), "
                "auto or unbounded"
            )
        return self


class ParsingSettings(_Group):
    """Where PDFs are parsed and completed."""

    grobid_url: Url = _env("GROBID_URL", "")
    """GROBID server for the GROBID / combined parsers"""
    enrich_pdfs: OptIn = _env("LUMINA_ENRICH_PDFS", False)
    """`1` completes a local PDF's record from OpenAlex (by the DOI it prints; needs `OPENALEX_API_KEY`) and
    arXiv (by the arXiv id it prints), labelling those fields in `metadata_sources`. Off by default: it sends
    your library's identifiers to those APIs"""


class NetworkSettings(_Group):
    """API roots (a mirror, a proxy path or a local replay server) and the private-address policy."""

    allow_private_urls: OptIn = _env("LUMINA_ALLOW_PRIVATE_URLS", False)
    """`1` lets every HTTP client (API calls, PDF downloads, `fetch-collection`) reach hosts that resolve to
    loopback / private / link-local addresses (a local mirror or replay server); by default such a URL, or a
    redirect to one, is refused as `blocked_url`"""
    openalex_url: Url = _env("LUMINA_OPENALEX_URL", "https://api.openalex.org")
    """OpenAlex API root (crawl, polling sensor, offline check)"""
    arxiv_url: Url = _env("LUMINA_ARXIV_URL", "https://export.arxiv.org/api")
    """arXiv export API root (crawl, polling sensor)"""
    semantic_scholar_url: Url = _env(
        "LUMINA_SEMANTIC_SCHOLAR_URL", "https://api.semanticscholar.org/graph/v1"
    )
    """Semantic Scholar Graph API root (benchmark provider)"""
    serpapi_url: Url = _env("LUMINA_SERPAPI_URL", "https://serpapi.com")
    """SerpAPI root (google_scholar benchmark provider)"""
    exa_url: Url = _env("LUMINA_EXA_URL", "https://api.exa.ai")
    """Exa API root (benchmark provider)"""


Backend = Literal["anthropic", "openai", "openai-compatible", "offline"]
COMPATIBLE_BASE_URL_VARIABLES = ("OPENAI_COMPATIBLE_BASE_URL", "OPENAI_BASE_URL")


class BenchmarkSettings(_Group):
    """The benchmark's questions, LLM roles and the Lumina provider."""

    user_queries: str = _env("LUMINA_USER_QUERIES", "")
    """comma-separated JSONL / CSV / text files of real user queries added to the benchmark"""
    beir_splits: str = _env("LUMINA_BEIR_SPLITS", "test,dev,train")
    """qrels splits a BEIR folder's benchmark questions come from: the first present wins; the report names
    it"""
    beir_queries: int = _env("LUMINA_BEIR_QUERIES", 0, ge=0)
    """at most this many of a BEIR folder's held-out queries in a benchmark run (a seeded sample); 0: all"""
    recursion_llm: Annotated[Literal["judge", "question"], BeforeValidator(_lower)] = _env(
        "LUMINA_RECURSION_LLM", "judge"
    )
    """which LLM writes the recursive queries: `judge` or `question`"""
    judge_backend: Annotated[Backend | None, BeforeValidator(_lower)] = _env("LUMINA_JUDGE_BACKEND", None)
    """judge backend; unset: `openai`, or `openai-compatible` when `OPENAI_COMPATIBLE_BASE_URL` or
    `OPENAI_BASE_URL` is set"""
    judge_model: str = _env("LUMINA_JUDGE_MODEL", "")
    """judge model; empty: gpt-4o"""
    question_backend: Annotated[Backend, BeforeValidator(_lower)] = _env(
        "LUMINA_QUESTION_BACKEND", "anthropic"
    )
    """synthetic question generator's backend"""
    question_model: str = _env("LUMINA_QUESTION_MODEL", "")
    """question generator's model; empty: claude-sonnet-4-6"""
    compatible_base_url_var: str | None = Field(None, exclude=True)
    """derived: the variable naming an OpenAI-compatible server's URL"""
    lumina_api_url: Url = _env("LUMINA_API_URL", "")
    """e.g. `http://127.0.0.1:8765`: the benchmark's Lumina provider calls `lumina serve`'s API instead of the
    in-process engine"""

    @model_validator(mode="after")
    def _backend(self) -> BenchmarkSettings:
        compatible = next((n for n in COMPATIBLE_BASE_URL_VARIABLES if is_set(n)), None)
        _derive(self, "compatible_base_url_var", compatible)
        if self.judge_backend is None:
            _derive(self, "judge_backend", "openai-compatible" if self.compatible_base_url_var else "openai")
        return self


def _executor(value: Any) -> Any:
    return "in_process" if isinstance(value, str) and value.lower() == "default" else _lower(value)


class OrchestrationSettings(_Group):
    """How Dagster runs the graph."""

    dagster_home: Path = _env("DAGSTER_HOME", PROJECT_ROOT / ".dagster_home")
    """Dagster instance (runs, materializations, sensor cursors)"""
    executor: Annotated[Literal["multiprocess", "in_process", "k8s"], BeforeValidator(_executor)] = _env(
        "LUMINA_EXECUTOR", "in_process"
    )
    """how a run launched by the UI or the daemon runs its steps: `in_process` (one after another in the run's
    process), `multiprocess` (a process per step), `k8s` (`k8s_job_executor`, a pod per step)"""
    k8s_gpus: int = _env("LUMINA_K8S_GPU", 0, ge=0)
    """under `LUMINA_EXECUTOR=k8s`, the `nvidia.com/gpu` the embedding step's pod asks for
    ([production](production.md#kubernetes-one-pod-per-run-gpu-pods-for-embedding)); 0: none"""
    ui_port: int = _env("LUMINA_UI_PORT", 3000)
    """port of `make ui`"""
    debug: OptOut = _env("LUMINA_DEBUG", False)
    """`1`: the CLI prints tracebacks instead of one-line errors"""


class LuminaSettings(BaseModel):
    """Every setting, by concern. Each group reads its own variables; this object only holds them."""

    model_config = ConfigDict(extra="forbid")

    paths: PathSettings = Field(default_factory=PathSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    parsing: ParsingSettings = Field(default_factory=ParsingSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    benchmark: BenchmarkSettings = Field(default_factory=BenchmarkSettings)
    orchestration: OrchestrationSettings = Field(default_factory=OrchestrationSettings)


GROUPS: dict[str, type[_Group]] = {
    name: field.default_factory
    for name, field in LuminaSettings.model_fields.items()  # type: ignore[misc]
}


def variable(field: Any) -> str:
    """The environment variable a group field is read from."""
    return field.validation_alias.choices[0]


VARIABLES = tuple(
    variable(f) for group in GROUPS.values() for f in group.model_fields.values() if f.validation_alias
)


class SettingsError(ValueError):
    """A variable holds a value its setting cannot take; the message names the variable."""


@functools.lru_cache(maxsize=8)
def _load(values: tuple[tuple[str, str | None], ...]) -> LuminaSettings:
    """`values` (the variables' values) is only the cache key: the groups read the environment themselves."""
    try:
        return LuminaSettings()
    except ValidationError as error:
        problems = [
            f"{'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}{e['msg'].removeprefix('Value error, ')}"
            for e in error.errors()
        ]
        raise SettingsError("invalid setting: " + "; ".join(problems)) from None


def get() -> LuminaSettings:
    """The settings for the current environment (parsed once per distinct set of values)."""
    names = (*VARIABLES, *COMPATIBLE_BASE_URL_VARIABLES)
    return _load(tuple((name, os.environ.get(name)) for name in names))


def reset() -> None:
    """Forget the parsed settings (tests that change the environment behind `os.environ`'s back)."""
    _load.cache_clear()


def data_dir() -> Path:
    return get().paths.data_dir


def tables_dir() -> Path:
    return data_dir() / "tables"


def cache_dir() -> Path:
    return data_dir() / "cache"


def models_dir() -> Path:
    """Derived model files of this data dir (the ONNX export of the encoder, model fingerprints)."""
    return data_dir() / "models"


def model_cache_dir() -> Path:
    """LUMINA_MODEL_CACHE, else $XDG_CACHE_HOME/lumina/models: shared by every data dir of this user."""
    embedding = get().embedding
    if embedding.model_cache is not None:
        return embedding.model_cache.expanduser().resolve()
    base = embedding.xdg_cache_home or Path.home() / ".cache"
    return base.expanduser().resolve() / "lumina" / "models"


def pdf_dir() -> Path:
    return data_dir() / "pdfs"


def inbox_dir() -> Path:
    return data_dir() / "inbox"


def lancedb_uri() -> str:
    return get().paths.lancedb_uri or str(data_dir() / "lancedb")


def reports_dir() -> Path:
    return data_dir() / "reports"


def benchmark_dir() -> Path:
    return data_dir() / "benchmark"


def shared_data_dir() -> Path:
    """`../shared/data` beside the checkout: test fixtures and evaluation sets."""
    return PROJECT_ROOT.parent / "shared" / "data"


def dagster_home() -> Path:
    """DAGSTER_HOME, also set for this process so Dagster finds the same instance."""
    home = get().orchestration.dagster_home
    os.environ.setdefault("DAGSTER_HOME", str(home))
    return home


def child_environment(**overrides: str) -> dict[str, str]:
    """This process's environment with `overrides`, for a subprocess (e.g. a baseline engine with its own data dir)."""
    return {**os.environ, **overrides}


def is_set(name: str) -> bool:
    """Whether a variable (typically a secret passed on as `dg.EnvVar`) is set; its value is never returned."""
    return bool(os.environ.get(name))


def from_environment() -> dict[str, Any]:
    """{variable: value} of the settings the environment sets (`lumina status`); a URL's user info is masked."""
    out: dict[str, Any] = {}
    for _, group in get():
        values = group.model_dump(mode="json")
        for name in sorted(group.model_fields_set):
            field = type(group).model_fields[name]
            if field.validation_alias is not None:
                value = values[name]
                out[variable(field)] = (
                    re.sub(r"//[^/@]*@", "//***@", value) if isinstance(value, str) else value
                )
    return out
