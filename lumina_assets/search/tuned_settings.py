"""The search setting chosen for an index (by `search.tuning` at index time), stored with the index and applied to
every search process that opens it.

The record lives in the index itself (a one-row LanceDB table beside `passages` and `papers`), so it travels with
the index to object storage and a fresh process reads it without any other state. Only fields the caller left at
their defaults take the recorded value: a setting passed explicitly (`--set`, an API config) always wins.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from lumina_assets.search.config import SearchConfig

log = logging.getLogger(__name__)

TUNING_TABLE = "search_tuning"
# the SearchConfig fields a recorded setting may change (anything else in a record is ignored)
TUNABLE_FIELDS = ("weights", "candidates", "fusion", "rrf_k")
TUNER_VERSION = "2"  # how pseudo-queries are made and settings chosen: a record of another version is redone


@dataclass
class TuningRecord:
    """What tuning chose and why. `setting` holds SearchConfig changes ({} = the global defaults)."""

    setting: dict[str, Any] = field(default_factory=dict)
    adopted: bool = False
    reason: str = ""
    best: dict[str, Any] = field(default_factory=dict)  # the best setting on pseudo-queries, adopted or not
    score: float = 0.0  # pseudo-query nDCG@10 of the setting in force (setting, or the defaults)
    default_score: float = 0.0
    best_score: float = 0.0
    margin: float = 0.0  # best - default on the held-out half of the pseudo-queries
    margin_low: float = 0.0  # lower end of its 95 % bootstrap interval
    queries: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    passages: int = 0  # passages in the index when tuned (re-tuned once it has grown enough)
    sampled_passages: int = 0  # passages the tuning searched (a sample of a large index)
    seconds: float = 0.0
    tuned_at: str = ""
    version: str = TUNER_VERSION

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TuningRecord:
        raw = json.loads(text)
        return cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})

    def describe(self) -> str:
        chosen = _describe_setting(self.setting) if self.adopted else "defaults"
        return f"{chosen} ({self.reason})"


def _describe_setting(setting: dict[str, Any]) -> str:
    parts = []
    for key, value in sorted(setting.items()):
        if isinstance(value, dict):
            parts += [
                f"{key}.{k}={v:g}" if isinstance(v, float) else f"{key}.{k}={v}"
                for k, v in sorted(value.items())
            ]
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts) or "defaults"


def write_record(db, record: TuningRecord) -> None:
    """Replace the index's tuning record."""
    import pyarrow as pa

    data = pa.table({"record": [record.to_json()]})
    db.create_table(TUNING_TABLE, data=data, mode="overwrite")


def read_record(db) -> TuningRecord | None:
    """The index's tuning record, or None (an index built before tuning existed, or never tuned)."""
    from lumina_assets.indexing.table_ops import open_table

    try:
        table = open_table(db, TUNING_TABLE)
        if table is None:
            return None
        rows = table.to_arrow()["record"].to_pylist()
        return TuningRecord.from_json(rows[0]) if rows else None
    except Exception as error:  # an unreadable record must not stop search: the defaults answer
        log.warning("search tuning record unreadable, searching with the defaults: %s", error)
        return None


def apply(config: SearchConfig, record: TuningRecord | None) -> SearchConfig:
    """`config` with the recorded setting in the fields it left at their defaults (weights merge per retriever)."""
    if record is None or not record.adopted or not config.index_tuning:
        return config
    defaults = SearchConfig()
    changes: dict[str, Any] = {}
    for name, value in record.setting.items():
        if name not in TUNABLE_FIELDS:
            continue
        current, default = getattr(config, name), getattr(defaults, name)
        if isinstance(value, dict) and isinstance(current, dict):
            merged = dict(current)
            for key, item in value.items():
                if current.get(key) == default.get(key):
                    merged[key] = item
            changes[name] = merged
        elif current == default:
            changes[name] = value
    return config.replace(**changes) if changes else config


class TunedConfig:
    """Keeps an engine's config in step with its index's record (re-read whenever the engine re-checks its
    indexes), applied to the config the caller gave, never to an already tuned one."""

    def __init__(self) -> None:
        self.record: TuningRecord | None = None
        self._given: SearchConfig | None = None
        self._tuned: SearchConfig | None = None

    def config_for(self, config: SearchConfig, db) -> SearchConfig:
        given = self._given if config is self._tuned else config
        self.record = read_record(db)
        self._given, self._tuned = given, apply(given, self.record)
        return self._tuned
