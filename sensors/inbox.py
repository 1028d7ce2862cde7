"""Inbox sensor: PDFs dropped into `data/inbox/` become a new ingest batch and one ingestion run. The cursor keeps
each file handed to a run (name, size, mtime) and the run key hashes the same, so a lost cursor launches no
duplicate run."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from lumina_assets.core import settings
from lumina_assets.corpus.local import iter_pdf_files
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from sensors.jobs import ingest_inbox_job

INBOX_ASSETS = (dg.AssetKey("local_papers"), dg.AssetKey("papers"))
CURSOR_VERSION = 1


@dataclass(frozen=True, order=True)
class InboxFile:
    name: str  # path relative to the inbox, POSIX separators
    size: int
    mtime_ns: int

    @property
    def fingerprint(self) -> str:
        return f"{self.size}:{self.mtime_ns}"


def scan_inbox(inbox: Path, *, settle_seconds: float = 0.0, now: float | None = None) -> list[InboxFile]:
    """PDFs under the inbox, sorted by name, less those modified in the last `settle_seconds` (still being copied)
    and links out of the inbox (`local_papers` reports them)."""
    if not inbox.is_dir():
        return []
    cutoff_ns = int(((now if now is not None else time.time()) - settle_seconds) * 1e9)
    found = []
    files, _links_out = iter_pdf_files(inbox)
    for path in files:
        if path.name.startswith("."):
            continue
        try:
            stat = path.stat()
        except OSError:
            continue  # moved away between listing and stat
        if stat.st_size == 0 or stat.st_mtime_ns > cutoff_ns:
            continue
        found.append(InboxFile(path.relative_to(inbox).as_posix(), stat.st_size, stat.st_mtime_ns))
    return sorted(found)


def load_cursor(cursor: str | None) -> dict[str, str]:
    """{relative name: fingerprint} of files already sent to a run; an unreadable cursor starts empty."""
    if not cursor:
        return {}
    try:
        data = json.loads(cursor)
    except json.JSONDecodeError:
        return {}
    seen = data.get("seen") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in seen.items()} if isinstance(seen, dict) else {}


def dump_cursor(seen: dict[str, str]) -> str:
    return json.dumps({"version": CURSOR_VERSION, "seen": dict(sorted(seen.items()))}, separators=(",", ":"))


def batch_key_for(files: list[InboxFile]) -> str:
    """Deterministic batch key: newest file time (readable order in the UI) plus a hash of the fingerprints."""
    digest = hashlib.sha256(
        # surrogateescape: a name that is not UTF-8 hashes by its bytes instead of failing every tick
        "\n".join(f"{f.name}\t{f.size}\t{f.mtime_ns}" for f in sorted(files)).encode(
            "utf-8", "surrogateescape"
        )
    ).hexdigest()
    newest = datetime.fromtimestamp(max(f.mtime_ns for f in files) / 1e9, tz=UTC)
    return f"inbox-{newest:%Y%m%dT%H%M%S}-{digest[:12]}"


def evaluate_inbox(
    inbox: Path,
    cursor: str | None,
    *,
    settle_seconds: float = 0.0,
    max_files: int = 1000,
    now: float | None = None,
) -> dg.SensorResult:
    files = scan_inbox(inbox, settle_seconds=settle_seconds, now=now)
    seen = load_cursor(cursor)
    # a file moved out of the inbox is forgotten, so the cursor stays as small as the inbox
    seen = {name: fp for name, fp in seen.items() if (inbox / name).is_file()}
    new = [f for f in files if seen.get(f.name) != f.fingerprint][:max_files]
    if not new:
        return dg.SensorResult(
            skip_reason=f"no new PDFs in {inbox} ({len(files)} already ingested)", cursor=dump_cursor(seen)
        )
    batch_key = batch_key_for(new)
    for f in new:
        seen[f.name] = f.fingerprint
    run_request = dg.RunRequest(
        run_key=batch_key,
        asset_selection=list(INBOX_ASSETS),
        tags={INGEST_BATCH_TAG: batch_key, "lumina/trigger": "inbox", "lumina/inbox_files": str(len(new))},
    )
    return dg.SensorResult(
        run_requests=[run_request],
        dynamic_partitions_requests=[INGEST_BATCHES.build_add_request([batch_key])],
        cursor=dump_cursor(seen),
    )


INBOX_SETTLE_SECONDS = 3.0  # a copy in progress keeps changing the file's mtime


def build_inbox_sensor(*, settle_seconds: float = INBOX_SETTLE_SECONDS) -> dg.SensorDefinition:
    """A scan is one directory listing, so it looks often; a file unchanged for `settle_seconds` is taken."""

    @dg.sensor(
        name="inbox_sensor",
        job=ingest_inbox_job,  # the Runs page shows `ingest_inbox`, not __ASSET_JOB
        minimum_interval_seconds=5,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            "New PDFs in the inbox folder (LUMINA_DATA_DIR/inbox) -> a new ingest_batches partition and one run "
            "of local_papers + papers tagged with that batch; eager automation carries it on to the index."
        ),
    )
    def _inbox_sensor(context: dg.SensorEvaluationContext):
        return evaluate_inbox(settings.inbox_dir(), context.cursor, settle_seconds=settle_seconds)

    return _inbox_sensor


inbox_sensor = build_inbox_sensor()
