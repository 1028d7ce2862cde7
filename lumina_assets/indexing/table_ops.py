"""LanceDB table operations shared by every writer and reader of the index (the search stores included):
tables, columns, `IN` filters, full-text / scalar / ANN indexes, upserts, and vectors between NumPy and
Arrow."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lumina_assets.indexing.fts_build import FtsBuild, build_fts

ANN_TRAINED_ROWS = "lumina:ann_trained_rows"  # vector field metadata: rows the ANN index was trained on


def vector_array(vectors: np.ndarray, dim: int) -> pa.FixedSizeListArray:
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, dim)


def vectors_from_arrow(column: pa.ChunkedArray | pa.Array, dim: int | None = None) -> np.ndarray:
    """(n, dim) float32 matrix from a fixed-size-list column."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros((0, dim or 0), dtype=np.float32)
    width = array.type.list_size
    return array.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, width)


def table_names(db) -> set[str]:
    listing = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    names = getattr(listing, "tables", listing)
    return set(names)


def open_table(db, name: str):
    return db.open_table(name) if name in table_names(db) else None


def read_columns(table, columns: list[str], where: str | None = None) -> pa.Table:
    query = table.search().select(columns)
    if where:
        query = query.where(where)
    return query.limit(max(table.count_rows(), 1)).to_arrow()


def column_map(table, key: str, *values: str, where: str | None = None) -> dict:
    """{key: value} for one value column, {key: (value, ...)} for several."""
    stored = read_columns(table, [key, *values], where)
    columns = [stored[v].to_pylist() for v in values]
    found = columns[0] if len(columns) == 1 else zip(*columns, strict=True)
    return dict(zip(stored[key].to_pylist(), found, strict=True))


def sql_in(column: str, values: Sequence[str]) -> str:
    quoted = ",".join("'" + str(v).replace("'", "''") + "'" for v in values)
    return f"{column} IN ({quoted})"


def delete_ids(table, column: str, ids: Sequence[str]) -> int:
    """Delete the rows whose `column` is one of `ids` (500 to a filter); returns how many ids."""
    for start in range(0, len(ids), 500):
        table.delete(sql_in(column, ids[start : start + 500]))
    return len(ids)


def has_index(table, column: str) -> bool:
    try:
        return any(column in (idx.columns or []) for idx in table.list_indices())
    except Exception:  # an older table format without index listing
        return False


def ensure_fts(table, column: str, cap_mb: int | None = None) -> FtsBuild | None:
    """The full-text index on `column`, built under `cap_mb` (default `LUMINA_FTS_MEMORY_MB`) when missing;
    returns the build's figures (peak resident memory, seconds), or None when the index was already there.
    Rows added later join it through `optimize()`."""
    if has_index(table, column):
        return None
    return build_fts(table, column, cap_mb)


def ensure_scalar(table, column: str, kind: str) -> None:
    """BTREE / BITMAP / LABEL_LIST index so that lookups by id and filters read a few pages, not the table."""
    from lancedb.index import BTree, LabelList

    if not has_index(table, column):
        table.create_index(column, config={"BTREE": BTree(), "LABEL_LIST": LabelList()}[kind], replace=True)


def ensure_search_indexes(table, scalar: dict[str, str]) -> bool:
    """A non-empty table's full-text index on `search_text` and its `scalar` {column: kind} indexes, then
    `optimize()` (new rows join the indexes); False for an empty table."""
    if not table.count_rows():
        return False
    ensure_fts(table, "search_text")
    for column, kind in scalar.items():
        ensure_scalar(table, column, kind)
    table.optimize()
    return True


def ann_trained_rows(table, column: str) -> int:
    metadata = table.schema.field(column).metadata or {}
    return int(metadata.get(ANN_TRAINED_ROWS.encode(), b"0") or 0)


ANN_INDEX_TYPE = "IvfSq"  # what `ensure_ann` builds; a vector index of another kind is retrained to it


def ann_partitions(rows: int) -> int:
    """IVF partitions for `rows` vectors: about sqrt(rows), the usual IVF rule."""
    return max(1, round(math.sqrt(rows)))


def ann_probes(table, column: str, minimum: int, share: float) -> int:
    """IVF partitions a query probes: `share` of those the index was trained with (a fixed count would
    probe a shrinking share as the table grows), at least `minimum`; `minimum` where no training size was
    recorded."""
    trained = ann_trained_rows(table, column)
    return max(minimum, math.ceil(share * ann_partitions(trained))) if trained else minimum


def ann_index_type(table, column: str) -> str | None:
    for index in table.list_indices():
        if column in (index.columns or []):
            return index.index_type
    return None


def ensure_ann(
    table, column: str, rows: int, *, min_rows: int, retrain_growth: float
) -> tuple[bool, str | None]:
    """IVF_SQ once the table passes `min_rows`; returns (an ANN index exists, what was done or None). New
    rows join it through `optimize()`; it is retrained once the table has grown `retrain_growth` times past
    its training rows, and an index of another kind once (IVF_SQ over IVF_HNSW_SQ and IVF_PQ:
    docs/search-at-scale.md)."""
    kind = ann_index_type(table, column)
    trained = ann_trained_rows(table, column) if kind else 0
    current = kind == ANN_INDEX_TYPE and (not trained or rows < retrain_growth * trained)
    if rows < min_rows or current:
        return kind is not None, None
    from lancedb.index import IvfSq

    partitions = ann_partitions(rows)
    table.create_index(column, config=IvfSq(distance_type="cosine", num_partitions=partitions), replace=True)
    table.update_field_metadata({"path": column, "metadata": {ANN_TRAINED_ROWS: str(rows)}})
    done = "trained" if kind is None else "retrained" if kind == ANN_INDEX_TYPE else f"rebuilt from {kind}"
    return True, f"ANN index (IVF_SQ, {partitions} partitions) {done} on {column}"


def upsert(db, name: str, table, data: pa.Table, key: str):
    if table is None:
        return db.create_table(name, data=data, schema=data.schema)
    if data.num_rows:
        table.merge_insert(key).when_matched_update_all().when_not_matched_insert_all().execute(data)
    return table
