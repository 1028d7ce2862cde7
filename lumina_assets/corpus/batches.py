"""Which ingest batch each catalogue paper belongs to: a new work joins the run's batch, a known one keeps its batch
and `first_seen`. A row's content hash says whether a known paper changed; the inputs fingerprint lets a run skip."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from lumina_assets.core.schemas import PAPER_FIELDS, Paper
from lumina_assets.corpus.catalogue import Record

PAPER_COLUMNS = [f.name for f in PAPER_FIELDS]
# columns added after rows were first hashed: they count only where a paper has a value, so older rows keep their hash
LATER_COLUMNS = ("tags", "collections", "pages", "arxiv_primary_class")


def row_hash(row: dict) -> str:
    """A paper row's content hash over the paper columns (not the batch bookkeeping); LATER_COLUMNS count only
    where a paper has a value."""
    relevant = {k: row.get(k) for k in PAPER_COLUMNS if k not in LATER_COLUMNS or row.get(k)}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:20]


def inputs_fingerprint(records: Iterable[Record], removed_ids: Iterable[str]) -> str:
    """Every source record (origin and content) and every removal in force: equal fingerprints, equal catalogue."""
    fingerprints = sorted(r.origin + row_hash(r.paper.to_row()) for r in records)
    fingerprints += sorted(removed_ids)  # a restore changes the catalogue too
    return hashlib.sha256("|".join(fingerprints).encode()).hexdigest()[:24]


def new_batch_key(tagged: str | None, now: datetime) -> str:
    """The batch new papers join: the one a run tag names (the inbox sensor's), else one named after the time."""
    return tagged or f"batch-{now:%Y%m%d-%H%M%S}"


@dataclass
class BatchAssignment:
    """The `papers` rows with `first_seen`, `ingest_batch` and `content_hash`, which of them are new, how many
    known papers changed, and the previous table's ids that have no row any more (removed or merged away)."""

    rows: list[dict] = field(default_factory=list)
    new_ids: list[str] = field(default_factory=list)
    changed: int = 0
    left: list[str] = field(default_factory=list)


def assign_batches(
    papers: Iterable[Paper], previous: pl.DataFrame | None, *, batch: str, now: str
) -> BatchAssignment:
    """Rows for `papers`: a paper the previous table held keeps its `first_seen` and batch; a new one gets `now`
    and `batch`."""
    known = {}
    if previous is not None:
        columns = previous.select("paper_id", "first_seen", "ingest_batch", "content_hash")
        known = {row["paper_id"]: row for row in columns.iter_rows(named=True)}
    result = BatchAssignment()
    for paper in papers:
        row = paper.to_row()
        digest = row_hash(row)
        before = known.get(paper.paper_id)
        if before is None:
            result.new_ids.append(paper.paper_id)
            row.update(first_seen=now, ingest_batch=batch)
        else:
            row.update(first_seen=before["first_seen"], ingest_batch=before["ingest_batch"])
            result.changed += before["content_hash"] != digest
        row["content_hash"] = digest
        result.rows.append(row)
    result.left = sorted(set(known) - {row["paper_id"] for row in result.rows})
    return result
