"""Questions cut into shards, the benchmark's unit of work: each provider × shard is one Dagster partition. The
shard list is append-only; each stage writes one stamped file per provider and shard, reused while its stamp
matches, and a provider's table is its shards' files streamed together under a lock."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from filelock import FileLock

from lumina_assets.core import settings
from lumina_assets.core.ids import short_hash
from lumina_assets.core.tables import atomic_replace, atomic_write_text

ROW_GROUP = 500  # rows per row group of a combined table


def _root() -> Path:
    return settings.benchmark_dir() / "shards"


def _recorded() -> list[list[str]]:
    path = _root() / "shards.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def key(index: int) -> str:
    return f"{index:05d}"


def assign(question_ids: Sequence[str], size: int) -> list[str]:
    """The keys of the shards holding `question_ids`, new shards of `size` appended for questions in none."""
    shards = _recorded()
    known = {q for shard in shards for q in shard}
    new = [q for q in dict.fromkeys(question_ids) if q not in known]
    for start in range(0, len(new), max(size, 1)):
        shards.append(new[start : start + size])
    if new:
        with FileLock(str(_root() / "shards.json.lock")):
            atomic_write_text(_root() / "shards.json", json.dumps(shards))
    return current(question_ids, shards)


def current(question_ids: Sequence[str], shards: list[list[str]] | None = None) -> list[str]:
    """The keys of the recorded shards holding any of `question_ids`, in order."""
    wanted = set(question_ids)
    return [key(i) for i, shard in enumerate(shards or _recorded()) if wanted.intersection(shard)]


def part(questions: pl.DataFrame, shard: str) -> pl.DataFrame:
    """The rows of `questions` in `shard`, in the shard's order."""
    shards = _recorded()
    ids = shards[int(shard)] if int(shard) < len(shards) else []
    order = pl.DataFrame(
        {"question_id": ids, "_order": range(len(ids))}, schema_overrides={"_order": pl.Int64}
    )
    return questions.join(order, on="question_id").sort("_order").drop("_order")


def path(stage: str, provider: str, shard: str) -> Path:
    return _root() / stage / provider / f"{shard}.parquet"


def stamp_of(stage: str, provider: str, shard: str) -> dict[str, Any]:
    stamp = path(stage, provider, shard).with_suffix(".json")
    return json.loads(stamp.read_text(encoding="utf-8")) if stamp.exists() else {}


def questions_hash(part: pl.DataFrame) -> str:
    return short_hash(*[f"{q}\x1f{t}" for q, t in zip(part["question_id"], part["text"], strict=True)])


def run(
    stage: str,
    provider: str,
    shard: str,
    part: pl.DataFrame,
    settings_stamp: dict[str, Any],
    compute: Callable[[pl.DataFrame], pl.DataFrame],
) -> bool:
    """`compute(part)` into the shard's file unless its file and stamp are already there; True when reused."""
    from evals.runs import frame_fingerprint

    target = path(stage, provider, shard)
    stamp = json.loads(json.dumps({"questions": questions_hash(part), **settings_stamp}, default=str))
    stored = stamp_of(stage, provider, shard)
    if target.exists() and {k: v for k, v in stored.items() if k != "data"} == stamp:
        return True
    frame = compute(part)
    atomic_replace(target, frame.write_parquet)
    atomic_write_text(target.with_suffix(".json"), json.dumps({**stamp, "data": frame_fingerprint(frame)}))
    return False


def lock(stage: str, provider: str) -> FileLock:
    """Held while a provider's table of a stage is rewritten, so the last shard to finish writes every finished one."""
    (_root() / stage).mkdir(parents=True, exist_ok=True)
    return FileLock(str(_root() / stage / f"{provider}.lock"))


def combine(stage: str, provider: str, shards: Sequence[str], target: Path, schema: dict[str, Any]) -> None:
    """The files of `shards` that exist, as one table at `target`, streamed (hold `lock`)."""
    paths = [p for p in (path(stage, provider, s) for s in shards) if p.exists()]
    if not paths:
        atomic_replace(target, pl.DataFrame(schema=schema).write_parquet)
        return
    lazy = pl.concat([pl.scan_parquet(p) for p in paths], how="diagonal_relaxed")
    # row groups of a shard's size: a later read of some questions (or an aggregate) decodes a group at a time
    atomic_replace(target, lambda temp: lazy.sink_parquet(temp, row_group_size=ROW_GROUP))


PER_SHARD = ("questions", "data", "level0", "levels")  # stamp fields that differ from shard to shard


def complete(stage: str, provider: str, questions: pl.DataFrame) -> bool:
    """Every shard of `questions` computed for its current questions, all with the same settings."""
    settings_seen = set()
    for shard in current(questions["question_id"].to_list()):
        stamp = stamp_of(stage, provider, shard)
        if stamp.get("questions") != questions_hash(part(questions, shard)):
            return False
        settings_seen.add(json.dumps({k: v for k, v in stamp.items() if k not in PER_SHARD}, sort_keys=True))
    return len(settings_seen) <= 1


def version(file: Path) -> str:
    """A content version of a file: the SHA-256 of its bytes, read in blocks."""
    with file.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()[:24]


def fingerprint(stage: str, provider: str, shards: Sequence[str], field: str = "data") -> str:
    """One hash of a stamp field (`data` or `levels`) over `shards`, missing stamps counted as missing."""
    return short_hash(*[str(stamp_of(stage, provider, s).get(field, "missing")) for s in shards], length=16)
