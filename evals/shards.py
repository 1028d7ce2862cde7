"""Questions cut into shards, so a large run is done (and redone) a shard at a time.

A shard is a fixed list of question ids. The list of shards is append-only (`shards.json` under
data/benchmark/shards/): questions added later fill new shards and never move an old one, so a rerun with more
questions computes only the new shards. Each stage writes one file per provider and shard, atomically, with a
stamp of what it was computed from (the shard's question texts and the stage's settings); a shard whose file and
stamp match is skipped, so a rerun after a failure redoes only the shards that did not finish. The stage's table is
then the shards' files concatenated by polars' streaming engine: no frame of the whole run is built by the stage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from lumina_assets.core import settings
from lumina_assets.core.ids import short_hash
from lumina_assets.core.tables import atomic_replace

ROW_GROUP = 500  # rows per row group of a combined table


def _write_text(path: Path, text: str) -> None:
    atomic_replace(path, lambda temp: temp.write_text(text, encoding="utf-8"))


def _root() -> Path:
    return settings.benchmark_dir() / "shards"


def assign(question_ids: Sequence[str], size: int) -> list[list[str]]:
    """The shards holding `question_ids`: the recorded ones first (unchanged), then new shards of `size` for
    questions in none of them, in the order given."""
    path = _root() / "shards.json"
    shards: list[list[str]] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    known = {q for shard in shards for q in shard}
    new = [q for q in dict.fromkeys(question_ids) if q not in known]
    for start in range(0, len(new), size):
        shards.append(new[start : start + size])
    if new:
        _write_text(path, json.dumps(shards))
    wanted = set(question_ids)
    return [shard for shard in shards if wanted.intersection(shard)]


@dataclass
class ShardRun:
    computed: list[int] = field(default_factory=list)
    reused: list[int] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        return {
            "shards": len(self.paths),
            "shards_computed": len(self.computed),
            "shards_reused": len(self.reused),
        }

    def version(self) -> str:
        """A content version of the combined table: the SHA-256 of its shards' files, in shard order, each read
        in blocks (a shard reused or recomputed to the same content keeps it; no frame is built)."""
        digest = hashlib.sha256()
        for path in self.paths:
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()[:24]


def run(
    stage: str,
    provider: str,
    questions: pl.DataFrame,
    shards: list[list[str]],
    settings_stamp: Callable[[pl.DataFrame], dict[str, Any]],
    compute: Callable[[pl.DataFrame], pl.DataFrame],
    on_shard: Callable[[int, int, bool], None] | None = None,
) -> ShardRun:
    """`compute(questions of one shard)` for every shard whose file is missing or stale (`settings_stamp(questions
    of the shard)`: what else its result depends on); returns which shards were computed and reused and the files
    in shard order."""
    result = ShardRun()
    by_id = {qid: i for i, qid in enumerate(questions["question_id"].to_list())}
    folder = _root() / stage / provider
    for index, shard in enumerate(shards):
        rows = [by_id[q] for q in shard if q in by_id]
        part = questions[rows]
        stamp = {
            "questions": short_hash(
                *[f"{q}\x1f{t}" for q, t in zip(part["question_id"], part["text"], strict=True)]
            ),
            **settings_stamp(part),
        }
        path = folder / f"{index:05d}.parquet"
        stamp_path = path.with_suffix(".json")
        fresh = (
            path.exists()
            and stamp_path.exists()
            and json.loads(stamp_path.read_text(encoding="utf-8"))
            == json.loads(json.dumps(stamp, default=str))
        )
        if fresh:
            result.reused.append(index)
        else:
            frame = compute(part)
            atomic_replace(path, frame.write_parquet)
            _write_text(stamp_path, json.dumps(stamp, default=str))
            result.computed.append(index)
        result.paths.append(path)
        if on_shard:
            on_shard(index, len(shards), fresh)
    return result


def combine(paths: Sequence[Path], target: Path, schema: dict[str, Any]) -> None:
    """The shards' files as one table at `target`, streamed (atomic)."""
    if not paths:
        atomic_replace(target, pl.DataFrame(schema=schema).write_parquet)
        return
    lazy = pl.concat([pl.scan_parquet(p) for p in paths], how="diagonal_relaxed")
    # row groups of a shard's size: a later read of some questions (or an aggregate) decodes a group at a time
    atomic_replace(target, lambda temp: lazy.sink_parquet(temp, row_group_size=ROW_GROUP))
