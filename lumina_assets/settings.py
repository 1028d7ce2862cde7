"""Where Lumina keeps its files; every path resolves lazily so importing never touches the disk."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Runtime state root: `LUMINA_DATA_DIR` or `<project>/data`."""
    return Path(os.environ.get("LUMINA_DATA_DIR", PROJECT_ROOT / "data")).resolve()


def tables_dir() -> Path:
    return data_dir() / "tables"


def cache_dir() -> Path:
    return data_dir() / "cache"


def embedding_model() -> str:
    """`LUMINA_EMBEDDING_MODEL`: a sentence-transformers name or path; empty means the bundled all-MiniLM-L6-v2."""
    return os.environ.get("LUMINA_EMBEDDING_MODEL", "").strip()


def query_encoder() -> str:
    """`LUMINA_QUERY_ENCODER`: auto (ONNX where the model qualifies) | onnx | torch."""
    return os.environ.get("LUMINA_QUERY_ENCODER", "auto").strip() or "auto"


def models_dir() -> Path:
    """Derived model files (the ONNX export of the query encoder)."""
    return data_dir() / "models"


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
    """The offline corpus (`LUMINA_CORPUS`): a folder of PDFs or a BEIR directory; None when unset."""
    value = os.environ.get("LUMINA_CORPUS", "").strip()
    return Path(value).expanduser().resolve() if value else None


def shared_data_dir() -> Path:
    """`../shared/data` beside the checkout: test fixtures and evaluation sets."""
    return PROJECT_ROOT.parent / "shared" / "data"
