"""Where Lumina keeps its files; every path resolves lazily so importing never touches the disk."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """Runtime state root: `LUMINA_DATA_DIR` or `<project>/data`."""
    return Path(os.environ.get("LUMINA_DATA_DIR", PROJECT_ROOT / "data")).resolve()


def tables_dir() -> Path:
    return data_dir() / "tables"


def cache_dir() -> Path:
    return data_dir() / "cache"


def store_sentence_vectors() -> bool:
    """`LUMINA_SENTENCE_VECTORS`: passage_index stores every passage's sentence vectors, so evidence highlighting
    encodes only the query. On by default (they cost about what the passages cost: SciFact's 44,869 sentences hold
    as many tokens as its 9,140 passages); `0` / `false` / `no` / `off` leaves them out, and `lumina serve` then
    fills them in the background."""
    return os.environ.get("LUMINA_SENTENCE_VECTORS", "").strip().lower() not in {"0", "false", "no", "off"}


def embedding_model() -> str:
    """`LUMINA_EMBEDDING_MODEL`: a sentence-transformers name or path; empty means the bundled all-MiniLM-L6-v2."""
    return os.environ.get("LUMINA_EMBEDDING_MODEL", "").strip()


def query_encoder() -> str:
    """`LUMINA_QUERY_ENCODER`: auto (ONNX where the model qualifies) | onnx | torch."""
    return os.environ.get("LUMINA_QUERY_ENCODER", "auto").strip() or "auto"


def embedding_form() -> str:
    """`LUMINA_EMBEDDING_FORM`: auto (chosen per machine: int8 on CPUs with VNNI, fp32 on others, fp16 on a CUDA
    device) | fp32 | int8 | fp16. An existing index keeps the form it was built in."""
    return os.environ.get("LUMINA_EMBEDDING_FORM", "auto").strip().lower() or "auto"


def cuda_visible_devices() -> str:
    """`CUDA_VISIBLE_DEVICES` as set (a GPU may be there even where /dev/nvidiactl is not visible)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()


def models_dir() -> Path:
    """Derived model files of this data dir (the ONNX export of the encoder, model fingerprints)."""
    return data_dir() / "models"


def model_cache_dir() -> Path:
    """`LUMINA_MODEL_CACHE`, else $XDG_CACHE_HOME/lumina/models (~/.cache/lumina/models): where the encoder's ONNX
    export and its int8 quantization are written, keyed by the weights and library versions, so a new data dir
    (an eval index, a test) does not load torch and export the model again."""
    configured = os.environ.get("LUMINA_MODEL_CACHE", "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "lumina" / "models"


def pdf_dir() -> Path:
    return data_dir() / "pdfs"


def inbox_dir() -> Path:
    return data_dir() / "inbox"


def lancedb_uri() -> str:
    return os.environ.get("LUMINA_LANCEDB_URI", str(data_dir() / "lancedb"))


def reports_dir() -> Path:
    return data_dir() / "reports"


def benchmark_dir() -> Path:
    return data_dir() / "benchmark"


def seeds_file() -> Path:
    return Path(os.environ.get("LUMINA_SEEDS", PROJECT_ROOT / "data" / "seeds.yaml"))


def corpus_path() -> Path | None:
    """The offline corpus (`LUMINA_CORPUS`): a folder of PDFs, a BEIR directory or a reference library (a Zotero
    data folder or export, optionally written `zotero:<path>`); None when unset."""
    value = os.environ.get("LUMINA_CORPUS", "").strip().removeprefix("zotero:")
    return Path(value).expanduser().resolve() if value else None


def shared_data_dir() -> Path:
    """`../shared/data` beside the checkout: test fixtures and evaluation sets."""
    return PROJECT_ROOT.parent / "shared" / "data"


def env(name: str, default: str = "") -> str:
    """The one place an environment variable is read (stripped; `default` when unset or blank)."""
    return os.environ.get(name, "").strip() or default


def child_environment(**overrides: str) -> dict[str, str]:
    """This process's environment with `overrides`, for a subprocess (e.g. a baseline engine with its own data dir)."""
    return {**os.environ, **overrides}


def is_set(name: str) -> bool:
    """Whether a variable (typically a secret passed on as `dg.EnvVar`) is set; its value is never returned."""
    return bool(os.environ.get(name))


def dagster_home() -> Path:
    """`DAGSTER_HOME`, defaulting to `<project>/.dagster_home` (set for this process so Dagster finds it)."""
    home = os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / ".dagster_home"))
    return Path(home)


def user_queries() -> str:
    """`LUMINA_USER_QUERIES`: comma-separated JSONL / CSV files of real user queries."""
    return env("LUMINA_USER_QUERIES")


def beir_splits() -> str:
    """`LUMINA_BEIR_SPLITS`: the qrels splits a BEIR folder's benchmark questions come from, the first present
    wins (default test,dev,train)."""
    return env("LUMINA_BEIR_SPLITS", "test,dev,train")


def beir_queries() -> int:
    """`LUMINA_BEIR_QUERIES`: at most this many of a BEIR folder's (held-out) queries in a benchmark run, a seeded
    sample; unset or 0 = all of them."""
    value = env("LUMINA_BEIR_QUERIES", "0")
    try:
        return max(0, int(value))
    except ValueError as exc:
        raise ValueError(f"LUMINA_BEIR_QUERIES={value!r} is not a number of queries") from exc


def recursion_llm() -> str:
    """`LUMINA_RECURSION_LLM`: which LLM writes the recursive queries, `judge` (default, the paper's GPT-4o) or
    `question`."""
    value = env("LUMINA_RECURSION_LLM", "judge").lower()
    return value if value in {"judge", "question"} else "judge"


def search_llm_stages() -> list[str]:
    """`LUMINA_SEARCH_LLM`: any of parse,expand,rerank."""
    return [s.strip() for s in env("LUMINA_SEARCH_LLM").split(",") if s.strip()]


def lumina_api_url() -> str:
    """LUMINA_API_URL: when set (e.g. http://127.0.0.1:8765), the benchmark's Lumina provider calls `lumina serve`'s
    API instead of the in-process engine."""
    return env("LUMINA_API_URL")


def rerank_model() -> str:
    """`LUMINA_RERANK_MODEL`: a CrossEncoder name or path; empty means no cross-encoder rerank."""
    return env("LUMINA_RERANK_MODEL")


def grobid_url() -> str:
    return env("GROBID_URL")


def executor() -> str:
    """`LUMINA_EXECUTOR`: empty (multiprocess), in_process or k8s."""
    return env("LUMINA_EXECUTOR").lower()


def k8s_gpus() -> int:
    """`LUMINA_K8S_GPU`: GPUs (`nvidia.com/gpu`) requested by the embedding step's pod under LUMINA_EXECUTOR=k8s;
    unset or 0: none, the step runs on a CPU node like the others."""
    value = env("LUMINA_K8S_GPU") or "0"
    if not value.isdigit():
        raise ValueError(f"LUMINA_K8S_GPU={value!r}: a whole number of GPUs (0 or unset: none)")
    return int(value)


def index_cache_setting() -> int | str:
    """`LUMINA_INDEX_CACHE_MB`: the most memory a search process's LanceDB index cache may hold, in MB (and no
    index is then preloaded whole); `unbounded`: LanceDB's default and every index preloaded after the first query;
    unset or `auto`: bounded by the machine, preloaded where the indexes fit (search/index_cache.py)."""
    value = env("LUMINA_INDEX_CACHE_MB", "auto").lower()
    if value in ("auto", "unbounded"):
        return value
    if not value.isdigit() or int(value) < 64:
        raise ValueError(
            f"LUMINA_INDEX_CACHE_MB={value!r}: a whole number of megabytes (at least 64), auto or unbounded"
        )
    return int(value)


def embed_parts() -> int | None:
    """`LUMINA_EMBED_PARTS`: how many parallel steps embed the new passages of an index run (1: the index step
    embeds them itself); unset or `auto`: by passage count and cores (defs/embedding_fanout.py)."""
    value = env("LUMINA_EMBED_PARTS").lower()
    if value in ("", "auto"):
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"LUMINA_EMBED_PARTS={value!r}: a whole number of parts (1 or more), or auto")
    return int(value)


def judge_backend() -> str:
    """`LUMINA_JUDGE_BACKEND`; an OpenAI-compatible base URL switches the default to `openai-compatible`."""
    return env("LUMINA_JUDGE_BACKEND") or ("openai-compatible" if compatible_base_url_var() else "openai")


def question_backend() -> str:
    return env("LUMINA_QUESTION_BACKEND", "anthropic")


def judge_model(default: str) -> str:
    return env("LUMINA_JUDGE_MODEL", default)


def question_model(default: str) -> str:
    return env("LUMINA_QUESTION_MODEL", default)


def compatible_base_url_var() -> str | None:
    """The name of the variable holding an OpenAI-compatible server's URL, if one is set."""
    for name in ("OPENAI_COMPATIBLE_BASE_URL", "OPENAI_BASE_URL"):
        if is_set(name):
            return name
    return None


def enrich_local_papers() -> bool:
    """`LUMINA_ENRICH_PDFS`: complete local PDFs' records from OpenAlex (by a printed DOI) and arXiv (by a printed
    arXiv id). Off by default: it sends the identifiers of a user's own library to those APIs, and a local corpus
    is meant to run offline."""
    return env("LUMINA_ENRICH_PDFS").lower() in {"1", "true", "yes"}


def allow_private_urls() -> bool:
    """`LUMINA_ALLOW_PRIVATE_URLS`: let every HTTP client (APIs, PDF downloads, collection downloads) reach
    hosts that resolve to loopback / private / link-local addresses (a local mirror or replay server, tests); off
    by default so neither a URL from an API response nor a redirect can reach inside."""
    return env("LUMINA_ALLOW_PRIVATE_URLS").lower() in {"1", "true", "yes"}


# External base URLs: every source and provider can be pointed at a mirror, a proxy path or a local replay server.
OPENALEX_URL = "https://api.openalex.org"
ARXIV_URL = "https://export.arxiv.org/api"
SEMANTIC_SCHOLAR_URL = "https://api.semanticscholar.org/graph/v1"
SERPAPI_URL = "https://serpapi.com"
EXA_URL = "https://api.exa.ai"


def openalex_url() -> str:
    """`LUMINA_OPENALEX_URL`: the OpenAlex API root."""
    return env("LUMINA_OPENALEX_URL", OPENALEX_URL).rstrip("/")


def arxiv_url() -> str:
    """`LUMINA_ARXIV_URL`: the arXiv export API root (`.../api`)."""
    return env("LUMINA_ARXIV_URL", ARXIV_URL).rstrip("/")


def semantic_scholar_url() -> str:
    """`LUMINA_SEMANTIC_SCHOLAR_URL`: the Semantic Scholar Graph API root (`.../graph/v1`)."""
    return env("LUMINA_SEMANTIC_SCHOLAR_URL", SEMANTIC_SCHOLAR_URL).rstrip("/")


def serpapi_url() -> str:
    """`LUMINA_SERPAPI_URL`: the SerpAPI root (Google Scholar provider)."""
    return env("LUMINA_SERPAPI_URL", SERPAPI_URL).rstrip("/")


def exa_url() -> str:
    """`LUMINA_EXA_URL`: the Exa API root."""
    return env("LUMINA_EXA_URL", EXA_URL).rstrip("/")
