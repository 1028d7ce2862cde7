"""Progress lines of long steps: said on a clock, with done / total, rate and ETA, and once at the end."""

from __future__ import annotations

from lumina_assets.core.progress import Progress


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_every_interval_with_rate_and_eta():
    clock, lines = FakeClock(), []
    progress = Progress("embedding passages", 1000, lines.append, unit="passages", every_s=10, clock=clock)
    for _ in range(9):  # 9 s of work, 100 passages a second: nothing said yet
        clock.now += 1
        progress.advance(100)
    assert lines == []
    clock.now += 1
    progress.advance(50)  # 950 done after 10 s
    assert lines == ["embedding passages: 950/1000 passages (95%), 95.0 passages/s, elapsed 10s, ETA 1s"]
    clock.now += 1
    progress.advance(50)
    assert len(lines) == 1  # the next line waits for the interval; the end is said by finish()
    progress.finish()
    progress.finish()
    assert lines[-1].startswith("embedding passages: 1000/1000 passages (100%)") and lines[-1].endswith(
        "ETA 0s"
    )
    assert len(lines) == 2


def test_long_durations_read_as_minutes_and_hours():
    clock, lines = FakeClock(), []
    progress = Progress("parsing", 10_000, lines.append, unit="PDFs", every_s=10, clock=clock)
    clock.now += 60
    progress.advance(10)  # 1 PDF every 6 s: 9,990 left
    assert "elapsed 1m00s" in lines[0] and "ETA 16h39m" in lines[0]


def test_nothing_to_do_says_nothing():
    lines = []
    Progress("embedding passages", 0, lines.append).finish()
    assert lines == []
