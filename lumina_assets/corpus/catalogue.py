"""The catalogue behind `papers`: every record any source ever contributed, kept by origin, so the corpus only grows;
papers leave only by an explicit removal (`remove`, `prune`), in force until `restore`. Origins: `openalex`, `arxiv`,
`inbox`, `corpus:<absolute path>` and `zotero:<absolute path>` (docs/corpus.md)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa

from lumina_assets.core import tables
from lumina_assets.core.hygiene import path_text
from lumina_assets.core.schemas import PAPER_FIELDS, Paper, rows_to_table
from lumina_assets.corpus.normalize import NormalizeResult, Rejection, normalize

INBOX_ORIGIN = "inbox"
EARLIER_RUNS_ORIGIN = "earlier_runs"  # rows of a papers table written before the catalogue kept records
CORPUS_ORIGIN_PREFIX = "corpus:"
ZOTERO_ORIGIN_PREFIX = "zotero:"
RECORD_SCHEMA = pa.schema(
    [*PAPER_FIELDS, pa.field("origin", pa.string(), nullable=False), pa.field("recorded_at", pa.string())]
)
REMOVED_SCHEMA = pa.schema(
    [
        pa.field("paper_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("origins", pa.string()),  # origins of the records behind the paper, comma-separated
        pa.field("action", pa.string()),  # remove | prune
        pa.field("reason", pa.string()),
        pa.field("removed_at", pa.string()),
    ]
)
_PAPER_NAMES = {f.name for f in dataclasses.fields(Paper)}


def corpus_origin(path: Path | str) -> str:
    """The origin of a `LUMINA_CORPUS` folder: its resolved path, so the same folder is one origin however named;
    a reference library (a Zotero data folder or export, corpus.library) is `zotero:<path>`."""
    from lumina_assets.corpus.library import is_library

    resolved = Path(path).expanduser().resolve()
    prefix = ZOTERO_ORIGIN_PREFIX if is_library(resolved) else CORPUS_ORIGIN_PREFIX
    return prefix + path_text(resolved)  # valid UTF-8, still unique


def resolve_origin(name: str, known: list[str]) -> str:
    """`openalex`, `inbox`, `corpus:/abs/path`, `zotero:/abs/path` or a bare path (as given to LUMINA_CORPUS) →
    the origin."""
    if name in known:
        return name
    bare = name.removeprefix(CORPUS_ORIGIN_PREFIX).removeprefix(ZOTERO_ORIGIN_PREFIX)
    resolved = path_text(Path(bare).expanduser().resolve())
    for candidate in (CORPUS_ORIGIN_PREFIX + resolved, ZOTERO_ORIGIN_PREFIX + resolved):
        if candidate in known:
            return candidate
    return name


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Record:
    origin: str
    paper: Paper


def read_records() -> list[Record]:
    frame = tables.read(tables.CATALOGUE_RECORDS)
    if frame is None:
        return []
    return [
        Record(row["origin"], Paper(**{k: v for k, v in row.items() if k in _PAPER_NAMES}))
        for row in frame.iter_rows(named=True)
    ]


def write_records(records: list[Record]) -> None:
    recorded = {}
    previous = tables.read(tables.CATALOGUE_RECORDS)
    if previous is not None:
        recorded = {(o, p): t for o, p, t in previous.select("origin", "paper_id", "recorded_at").iter_rows()}
    now = _now()
    rows = [
        {
            **r.paper.to_row(),
            "origin": r.origin,
            "recorded_at": recorded.get((r.origin, r.paper.paper_id), now),
        }
        for r in records
    ]
    tables.write(tables.CATALOGUE_RECORDS, rows_to_table(rows, RECORD_SCHEMA))


def merge_records(known: list[Record], incoming: list[Record]) -> tuple[list[Record], int]:
    """Upsert by (origin, raw paper id): a source's new answer replaces its old record of the same work and adds
    new works; records this run did not see are kept. Returns the records and how many were new or changed."""
    by_key = {(r.origin, r.paper.paper_id): r for r in known}
    changed = 0
    for record in incoming:
        key = (record.origin, record.paper.paper_id)
        if key not in by_key or by_key[key].paper != record.paper:
            changed += 1
        by_key[key] = record
    return list(by_key.values()), changed


def origin_counts(records: list[Record]) -> dict[str, int]:
    return dict(sorted(Counter(record.origin for record in records).items()))


def read_removed() -> pl.DataFrame:
    frame = tables.read(tables.REMOVED_PAPERS)
    return frame if frame is not None else pl.from_arrow(REMOVED_SCHEMA.empty_table())


def removed_ids() -> set[str]:
    return set(read_removed()["paper_id"].to_list())


def record_removals(entries: list[dict]) -> None:
    """Append to `removed_papers` (a paper removed twice keeps its first entry)."""
    if not entries:
        return
    previous = read_removed()
    fresh = [e for e in entries if e["paper_id"] not in set(previous["paper_id"].to_list())]
    rows = previous.to_dicts() + [{**e, "removed_at": e.get("removed_at") or _now()} for e in fresh]
    tables.write(tables.REMOVED_PAPERS, rows_to_table(rows, REMOVED_SCHEMA))


def restore(paper_ids: list[str] | None = None, *, origin: str | None = None) -> list[str]:
    """Lift removals (by id, or every paper removed with `origin` among its origins); returns the ids lifted."""
    frame = read_removed()
    wanted = set(paper_ids or [])
    lifted = [
        row["paper_id"]
        for row in frame.iter_rows(named=True)
        if row["paper_id"] in wanted or (origin and origin in (row["origins"] or "").split(","))
    ]
    kept = frame.filter(~pl.col("paper_id").is_in(lifted))
    tables.write(tables.REMOVED_PAPERS, kept.to_arrow().cast(REMOVED_SCHEMA))
    return lifted


@dataclass
class Catalogue:
    papers: list[Paper] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    origins: dict[str, list[str]] = field(default_factory=dict)  # paper id -> origins of its records


def build(
    records: list[Record], *, removed: set[str], languages: list[str] | None, require_abstract: bool
) -> Catalogue:
    """Normalize every record (dedupe, merge, filter) and keep removed papers out, with reason `removed`."""
    result: NormalizeResult = normalize(
        [r.paper for r in records], languages=languages, require_abstract=require_abstract
    )
    origins = _origins_by_paper(records, result)
    catalogue = Catalogue(rejected=list(result.rejected), origins=origins)
    for paper in result.papers:
        if paper.paper_id in removed:
            catalogue.rejected.append(Rejection(paper.paper_id, paper.title, paper.source, "removed"))
        else:
            catalogue.papers.append(paper)
    return catalogue


def _origins_by_paper(records: list[Record], result: NormalizeResult) -> dict[str, list[str]]:
    """Which origins each catalogue paper came from: a record belongs to the paper whose id or strong id it shares,
    or to the paper it was folded into as a duplicate."""
    folded = {r.paper_id: r.duplicate_of for r in result.rejected if r.duplicate_of}
    owner: dict[str, str] = {}
    for paper in result.papers:
        for key in (paper.paper_id, paper.doi, paper.arxiv_id, paper.openalex_id):
            if key:
                owner.setdefault(key, paper.paper_id)
    found: dict[str, set[str]] = {}
    for record in records:
        raw = record.paper
        target = folded.get(raw.paper_id)
        for key in (raw.paper_id, raw.doi, raw.arxiv_id, raw.openalex_id):
            target = target or (owner.get(key) if key else None)
        if target:
            found.setdefault(target, set()).add(record.origin)
    return {pid: sorted(o) for pid, o in found.items()}


@dataclass
class RemovalPlan:
    """What a removal would take out: papers (id, title, origins) and, for a prune, the records dropped."""

    papers: list[dict] = field(default_factory=list)
    records_dropped: int = 0
    unknown_ids: list[str] = field(default_factory=list)


def plan_remove(
    paper_ids: list[str], current: pl.DataFrame | None, origins: dict[str, list[str]]
) -> RemovalPlan:
    plan = RemovalPlan()
    known = dict(current.select("paper_id", "title").iter_rows()) if current is not None else {}
    for pid in dict.fromkeys(paper_ids):
        if pid in known:
            plan.papers.append(
                {"paper_id": pid, "title": known[pid], "origins": ",".join(origins.get(pid, []))}
            )
        else:
            plan.unknown_ids.append(pid)
    return plan


def plan_prune(
    origin: str,
    records: list[Record],
    *,
    removed: set[str],
    languages: list[str] | None,
    require_abstract: bool,
) -> tuple[RemovalPlan, list[Record]]:
    """Drop every record of `origin`; the papers that then have no record left are the ones removed (a paper that
    another source also knows stays, without the pruned source's record). Returns the plan and the kept records."""
    kept = [r for r in records if r.origin != origin]
    before = build(records, removed=removed, languages=languages, require_abstract=require_abstract)
    after = build(kept, removed=removed, languages=languages, require_abstract=require_abstract)
    remaining = {p.paper_id for p in after.papers}
    plan = RemovalPlan(records_dropped=len(records) - len(kept))
    for paper in before.papers:
        if paper.paper_id not in remaining:
            plan.papers.append(
                {
                    "paper_id": paper.paper_id,
                    "title": paper.title,
                    "origins": ",".join(before.origins.get(paper.paper_id, [origin])),
                }
            )
    return plan, kept
