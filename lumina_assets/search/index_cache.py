"""How much memory a search process's LanceDB index cache may hold, and whether its indexes are preloaded whole
(`LUMINA_INDEX_CACHE_MB`: `auto`, a number of megabytes, or `unbounded`; docs/search-at-scale.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lumina_assets.core import settings
from lumina_assets.indexing.fts_build import machine_memory_mb

AUTO_LIMIT_MB = 2560
SMALLEST_AUTO_LIMIT_MB = 256
PRELOAD_SHARE = 0.5  # indexes are preloaded whole when their files take at most this share of the bound
INDEXED_TABLES = ("passages", "papers")


@dataclass(frozen=True)
class IndexCachePolicy:
    limit_mb: int | None  # None: LanceDB's default cache (no bound)
    preload: bool  # load each index whole in the background after the first query
    reason: str  # why, for logs and `lumina bench scale`


def auto_limit_mb(memory_mb: int | None = None) -> int:
    """AUTO_LIMIT_MB, or a quarter of a smaller machine's memory (never below SMALLEST_AUTO_LIMIT_MB)."""
    memory_mb = machine_memory_mb() if memory_mb is None else memory_mb
    return max(SMALLEST_AUTO_LIMIT_MB, min(AUTO_LIMIT_MB, memory_mb // 4))


def index_files_mb(db_uri: str) -> float | None:
    """Megabytes of index files (`_indices`) of the passage and paper tables of a local LanceDB database; None for
    object storage."""
    if "://" in db_uri and not db_uri.startswith("file://"):
        return None
    root = Path(db_uri.removeprefix("file://"))
    total = 0
    for table in INDEXED_TABLES:
        folder = root / f"{table}.lance" / "_indices"
        if folder.is_dir():
            total += sum(entry.stat().st_size for entry in folder.rglob("*") if entry.is_file())
    return total / 2**20


def index_cache_policy(db_uri: str) -> IndexCachePolicy:
    """The cache bound and preload choice for a search process over the database at `db_uri`."""
    setting = settings.get().search.index_cache_mb
    if setting == "unbounded":
        return IndexCachePolicy(None, True, "LUMINA_INDEX_CACHE_MB=unbounded")
    if isinstance(setting, int):
        return IndexCachePolicy(setting, False, f"LUMINA_INDEX_CACHE_MB={setting}")
    limit = auto_limit_mb()
    files_mb = index_files_mb(db_uri)
    if files_mb is None:  # object storage: bounded, and preloaded into the bounded cache as before the bound
        return IndexCachePolicy(
            limit, True, f"auto: {limit} MB bound, index size not listed on object storage"
        )
    preload = files_mb <= PRELOAD_SHARE * limit
    verdict = "preloaded" if preload else "loaded as queries touch them"
    return IndexCachePolicy(
        limit, preload, f"auto: {limit} MB bound, {files_mb:.0f} MB of index files, {verdict}"
    )
