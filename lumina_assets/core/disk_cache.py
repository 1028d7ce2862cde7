"""A content store of JSON-serializable values keyed by a hash: the response cache of the HTTP layer and of LLM
calls, so a rematerialization repeats no call."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class DiskCache:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    @staticmethod
    def key_for(*parts: Any) -> str:
        blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            log.warning("ignoring unreadable cache entry %s", path)
            return None

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def put(self, key: str, value: Any) -> None:
        from lumina_assets.core.tables import atomic_replace

        text = json.dumps(value, ensure_ascii=False)
        # atomic: a killed run never leaves half an entry
        atomic_replace(self._path(key), lambda temp: temp.write_text(text, encoding="utf-8"))
