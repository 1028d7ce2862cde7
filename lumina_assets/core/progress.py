"""Progress of a long step (embedding, parsing) as log lines: done / total, rate and ETA, at most every few seconds,
so a 10-minute step shows it is moving in the Dagster log and on the `lumina demo` terminal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """Counts work done and says `<label>: done/total (pct), rate/s, ETA` every `every_s` seconds and at
    the end; thread-safe. `detail`: more for the end of each line; `share_done`: the share of the whole
    work done, where the counted items are not all of it (the ETA then comes from it)."""

    def __init__(
        self,
        label: str,
        total: int,
        say: Callable[[str], None],
        *,
        unit: str = "items",
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        detail: Callable[[], str] | None = None,
        share_done: Callable[[], float] | None = None,
    ):
        self.label, self.total, self.say, self.unit = label, total, say, unit
        self.every_s, self.clock, self.detail, self.share_done = every_s, clock, detail, share_done
        self.done = 0
        self.started = self.last = clock()
        self._lock = threading.Lock()
        self._finished = False

    def line(self) -> str:
        elapsed = self.clock() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        remaining = self.total - self.done
        eta = _duration(remaining / rate) if rate > 0 and remaining > 0 else ("0s" if remaining <= 0 else "?")
        if self.share_done is not None:
            fraction = min(max(self.share_done(), 0.0), 1.0)
            eta = (
                _duration(elapsed * (1 - fraction) / fraction)
                if 0 < fraction < 1
                else "0s"
                if fraction
                else "?"
            )
        line = (
            f"{self.label}: {self.done}/{self.total} {self.unit}{share}, {rate:.1f} {self.unit}/s, "
            f"elapsed {_duration(elapsed)}, ETA {eta}"
        )
        return f"{line}; {self.detail()}" if self.detail is not None else line

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self.done += count
            now = self.clock()
            if now - self.last >= self.every_s and self.done < self.total:
                self.last = now
                self.say(self.line())

    def tick(self) -> None:
        """A line if `every_s` has passed, though nothing was counted (work beside the counted items goes on)."""
        with self._lock:
            now = self.clock()
            if now - self.last >= self.every_s and not self._finished:
                self.last = now
                self.say(self.line())

    def finish(self) -> None:
        with self._lock:
            if not self._finished and self.total:
                self._finished = True
                self.say(self.line())
