"""Parquet tables under data/tables: whole tables for corpus-level assets, one file per partition otherwise.
Writes go to a temp file then rename, so a killed run never leaves a half-written table."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from lumina_assets.core import settings


def table_path(name: str) -> Path:
    return settings.tables_dir() / f"{name}.parquet"


def partition_path(name: str, partition: str) -> Path:
    return settings.tables_dir() / name / f"{partition}.parquet"


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


def atomic_write(table: pa.Table | pl.DataFrame, path: Path) -> Path:
    """Write a Parquet table atomically (see atomic_replace)."""
    if isinstance(table, pl.DataFrame):
        table = table.to_arrow()
    return atomic_replace(path, lambda temp: pq.write_table(table, temp))


def write_table(name: str, table: pa.Table | pl.DataFrame) -> Path:
    arrow = table.to_arrow() if isinstance(table, pl.DataFrame) else table
    return atomic_write(arrow, table_path(name))


def write_partition(name: str, partition: str, table: pa.Table | pl.DataFrame) -> Path:
    arrow = table.to_arrow() if isinstance(table, pl.DataFrame) else table
    return atomic_write(arrow, partition_path(name, partition))


def read_table(name: str) -> pl.DataFrame | None:
    """The whole table, or None when its asset has not been materialized yet."""
    path = table_path(name)
    return pl.read_parquet(path) if path.exists() else None


def read_partition(name: str, partition: str) -> pl.DataFrame | None:
    path = partition_path(name, partition)
    return pl.read_parquet(path) if path.exists() else None


def read_all_partitions(name: str) -> pl.DataFrame | None:
    """Every partition file of a partitioned table concatenated, or None when there is none."""
    folder = settings.tables_dir() / name
    files = sorted(folder.glob("*.parquet")) if folder.exists() else []
    if not files:
        return None
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")


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
