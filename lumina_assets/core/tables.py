"""The one table store: every Parquet table Lumina writes is declared here (`TableSpec`) and read and
written only through `read` / `read_all` / `write`: data/tables/<name>.parquet, or
<name>/<partition>.parquet for a table partitioned by ingest batch, and the same under data/benchmark/.
Writes are atomic (temp file, then rename)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from lumina_assets.core import settings


@dataclass(frozen=True)
class TableSpec:
    """A declared table: `folder` is "tables" (data/tables) or "benchmark" (data/benchmark); a partitioned table is
    one file per partition key in a folder named after it."""

    name: str
    folder: str = "tables"
    partitioned: bool = False

    def root(self) -> Path:
        return settings.benchmark_dir() if self.folder == "benchmark" else settings.tables_dir()

    def path(self, partition: str | None = None) -> Path:
        """The table's file, or one partition's file (a partitioned table needs the key)."""
        if self.partitioned:
            if partition is None:
                raise ValueError(f"table {self.name!r} is partitioned: name the partition")
            return self.root() / self.name / f"{partition}.parquet"
        if partition is not None:
            raise ValueError(f"table {self.name!r} is not partitioned (got partition {partition!r})")
        return self.root() / f"{self.name}.parquet"


# [corpus] whole tables
OPENALEX_WORKS = TableSpec("openalex_works")
ARXIV_WORKS = TableSpec("arxiv_works")
LOCAL_PAPERS = TableSpec("local_papers")
LOCAL_REJECTED = TableSpec("local_rejected")  # local files and records refused at intake, with the reason
PAPERS = TableSpec("papers")
REJECTED_PAPERS = TableSpec("rejected_papers")
CITATION_EDGES = TableSpec("citation_edges")
CITATION_GRAPH = TableSpec("citation_graph")
CATALOGUE_RECORDS = TableSpec("catalogue_records")  # every record any source contributed, by origin
REMOVED_PAPERS = TableSpec("removed_papers")  # taken out by hand (remove / prune), out until restored
# [parse] one file per ingest batch
PDF_FILES = TableSpec("pdf_files", partitioned=True)
PARSED_PAPERS = TableSpec("parsed_papers", partitioned=True)
PASSAGES = TableSpec("passages", partitioned=True)
# [benchmark] under data/benchmark; the provider-partitioned ones one file per provider
SYNTHETIC_QUESTIONS = TableSpec("synthetic_questions", "benchmark")
USER_QUERIES = TableSpec("user_queries", "benchmark")
QUESTIONS = TableSpec("questions", "benchmark")
PROVIDER_RESULTS = TableSpec("provider_results", "benchmark", partitioned=True)
RECURSIVE_RESULTS = TableSpec("recursive_results", "benchmark", partitioned=True)
JUDGMENTS = TableSpec("judgments", "benchmark", partitioned=True)
BENCHMARK_SCORES = TableSpec("benchmark_scores", "benchmark")


def atomic_replace(path: Path, write: Callable[[Path], object]) -> Path:
    """`write(temp)` then rename temp to `path`: readers and concurrent writers (other processes or threads) never
    see half a file; a failed write leaves `path` as it was and no temp file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        write(temp)
        temp.replace(path)
    finally:
        temp.unlink(missing_ok=True)
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """`text` written to `path` in UTF-8 through `atomic_replace`."""
    return atomic_replace(path, lambda temp: temp.write_text(text, encoding="utf-8"))


def write(spec: TableSpec, table: pa.Table | pl.DataFrame, partition: str | None = None) -> Path:
    """Replace the table (or one partition of it) atomically; returns the file written."""
    if isinstance(table, pl.DataFrame):
        table = table.to_arrow()
    return atomic_replace(spec.path(partition), lambda temp: pq.write_table(table, temp))


def read(spec: TableSpec, partition: str | None = None) -> pl.DataFrame | None:
    """The table (or one partition of it), or None when it has not been written yet."""
    path = spec.path(partition)
    return pl.read_parquet(path) if path.exists() else None


def read_all(spec: TableSpec) -> pl.DataFrame | None:
    """A partitioned table's partitions concatenated (empty partitions left out unless every one is empty); a
    whole table as it is; None when nothing was written."""
    if not spec.partitioned:
        return read(spec)
    folder = spec.root() / spec.name
    frames = [pl.read_parquet(f) for f in sorted(folder.glob("*.parquet"))] if folder.exists() else []
    if not frames:
        return None
    filled = [f for f in frames if f.height]
    return pl.concat(filled, how="diagonal_relaxed") if filled else frames[0]


def content_hash(frame: pl.DataFrame, columns: list[str] | None = None) -> str:
    """Stable hash of a table's content regardless of row order, used as a Dagster data_version."""
    selected = frame.select(columns) if columns else frame
    if selected.height == 0:
        return "empty"
    rows = sorted(json.dumps(row, sort_keys=True, default=str) for row in selected.iter_rows(named=True))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(row.encode("utf-8"))
    return digest.hexdigest()[:24]


def markdown_sample(frame: pl.DataFrame, columns: list[str], rows: int = 5, width: int = 60) -> str:
    """A few rows as a markdown table for asset metadata (cells shortened to `width`)."""
    present = [c for c in columns if c in frame.columns]
    if not present or frame.height == 0:
        return "_empty_"
    lines = ["| " + " | ".join(present) + " |", "|" + "---|" * len(present)]
    for row in frame.select(present).head(rows).iter_rows():
        cells = []
        for value in row:
            text = "" if value is None else str(value).replace("|", "/").replace("\n", " ")
            cells.append(text if len(text) <= width else text[: width - 1] + "…")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
