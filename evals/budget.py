"""A run's spending limit, shared by every LLM client of the run's processes through one small ledger file of the
USD counted so far (list prices of sent calls). At the limit every client raises `BudgetExhausted`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from filelock import FileLock

from lumina_assets.core.llm import BudgetExhausted


class Budget:
    def __init__(self, path: str | Path, limit_usd: float):
        self.path = Path(path)
        self.limit_usd = float(limit_usd)
        self._lock = FileLock(str(self.path) + ".lock")

    def read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"limit_usd": self.limit_usd, "spent_usd": 0.0, "calls": 0, "unpriced_calls": 0}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def spent(self) -> float:
        return float(self.read()["spent_usd"])

    def check(self) -> None:
        spent = self.spent()
        if spent >= self.limit_usd:
            raise BudgetExhausted(
                f"budget of ${self.limit_usd:,.2f} reached (${spent:,.4f} counted): stopped; rerun with a larger "
                "--budget to resume (answers so far are cached)"
            )

    def spend(self, usd: float | None) -> None:
        from lumina_assets.core.tables import atomic_replace

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            state = self.read()
            state["limit_usd"] = self.limit_usd
            state["calls"] = int(state.get("calls", 0)) + 1
            if usd is None:
                state["unpriced_calls"] = int(state.get("unpriced_calls", 0)) + 1
            else:
                state["spent_usd"] = float(state["spent_usd"]) + usd
            text = json.dumps(state)
            atomic_replace(self.path, lambda temp: temp.write_text(text, encoding="utf-8"))
