"""The search setting chosen for an index (by `search.tuning` at index time), stored with the index and applied to
every search process that opens it.

The record lives in the index itself (a one-row LanceDB table beside `passages` and `papers`), so it travels with
the index to object storage and a fresh process reads it without any other state. Only fields the caller did not set
take the recorded value: a setting passed explicitly (`--set`, an API config) always wins, even one equal to the
default (`SearchConfig.explicit`).
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
    """`config` with the recorded setting in every field its caller did not set (`SearchConfig.explicit`), weights
    retriever by retriever. A value set explicitly wins even when it equals the default."""
    if record is None or not record.adopted or not config.index_tuning:
        return config
    changes: dict[str, Any] = {}
    for name, value in record.setting.items():
        if name not in TUNABLE_FIELDS:
            continue
        if isinstance(value, dict):
            tuned = {k: v for k, v in value.items() if f"{name}.{k}" not in config.explicit}
            if tuned:
                changes[name] = tuned
        elif name not in config.explicit:
            changes[name] = value
    return config.filled(**changes) if changes else config


def effective(
    config: SearchConfig, given: SearchConfig | None, record: TuningRecord | None
) -> dict[str, Any]:
    """The configuration a search ran with, for `explain` and `lumina status`: every field's value, where each
    tunable field's value came from (`explicit`, `tuned` or `default`) and the index's record in words."""
    given = given or config
    sources = {}
    for name in TUNABLE_FIELDS:
        if isinstance(getattr(config, name), dict):
            for key, value in getattr(config, name).items():
                sources[f"{name}.{key}"] = _source(
                    f"{name}.{key}", value, getattr(given, name).get(key), given
                )
        else:
            sources[name] = _source(name, getattr(config, name), getattr(given, name), given)
    return {
        "config": config.as_json(),
        "sources": sources,
        "index_tuning": config.index_tuning,
        "tuned_record": record.describe() if record is not None else None,
    }


def _source(name: str, value: Any, given: Any, config: SearchConfig) -> str:
    if name in config.explicit:
        return "explicit"
    return "default" if value == given else "tuned"


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

    def effective(self, config: SearchConfig) -> dict[str, Any]:
        """`effective()` of the config an engine searches with (`config`, tuned from what its caller gave)."""
        return effective(config, self._given if config is self._tuned else None, self.record)
