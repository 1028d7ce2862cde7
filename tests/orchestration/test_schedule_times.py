"""The schedules tick on the day, hour and timezone docs/production.md promises, as Dagster's own scheduler daemon
evaluates them: the code location is loaded the way the daemon loads it (workspace.yaml's module), and the
daemon's scheduler iteration (`launch_scheduled_runs`) runs at frozen times over eight days, so every tick it
records is one the deployed daemon would record. Runs go to a queued run coordinator and are never launched.

The promised times are read from the docs' automation table (`at 02:00 UTC`, `Sunday 04:00 UTC`), not from the code,
so a cron string, a weekday or a timezone that drifts from the docs fails here."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time, instance_for_test
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._scheduler.scheduler import launch_scheduled_runs

from lumina_assets.core import settings

PROJECT = settings.PROJECT_ROOT
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
PROMISE = re.compile(rf"(?:({'|'.join(WEEKDAYS)}) )?(\d\d):(\d\d) (UTC)\b")


def _docs_lines() -> list[str]:
    return (PROJECT / "docs" / "production.md").read_text(encoding="utf-8").splitlines()


def promised_time(schedule_name: str) -> tuple[str | None, int, int, str]:
    """(weekday or None for daily, hour, minute, timezone) from the schedule's row of the docs' automation table."""
    rows = [line for line in _docs_lines() if line.startswith(f"| `{schedule_name}` |")]
    assert len(rows) == 1, f"docs/production.md has no single row for {schedule_name}"
    found = PROMISE.search(rows[0])
    assert found, f"the docs' row for {schedule_name} names no time"
    weekday, hour, minute, zone = found.groups()
    return weekday, int(hour), int(minute), zone


def test_the_docs_promise_is_read_as_written():
    assert promised_time("nightly_crawl_schedule") == (None, 2, 0, "UTC")
    assert promised_time("weekly_benchmark_schedule") == ("Sunday", 4, 0, "UTC")


def _expected_ticks(start: datetime, end: datetime, promise) -> list[datetime]:
    weekday, hour, minute, _ = promise
    day = start.replace(hour=hour, minute=minute, second=0, microsecond=0)
    ticks = []
    while day <= end:
        if day > start and (weekday is None or WEEKDAYS[day.weekday()] == weekday):
            ticks.append(day)
        day += timedelta(days=1)
    return ticks


@pytest.fixture
def daemon_workspace(tmp_path, monkeypatch):
    """The code location as the daemon loads it, over an instance whose runs only queue."""
    monkeypatch.setenv("LUMINA_CORPUS", str(tmp_path))  # offline mode: the nightly tick asks no source
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="lumina_assets.definitions", working_directory=str(PROJECT)),
        location_name="lumina",
    )
    coordinator = {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"}
    with instance_for_test(overrides={"run_coordinator": coordinator}) as instance:
        with create_test_daemon_workspace_context(InProcessWorkspaceLoadTarget(origin), instance) as context:
            entry = next(iter(context.create_request_context().get_code_location_entries().values()))
            assert entry.code_location, entry.load_error
            [repository] = entry.code_location.get_repositories().values()
            yield instance, context, repository


def test_the_scheduler_daemon_ticks_when_the_docs_say(daemon_workspace):
    instance, context, repository = daemon_workspace
    nightly = repository.get_schedule("nightly_crawl_schedule")
    weekly = repository.get_schedule("weekly_benchmark_schedule")

    # a Wednesday noon to the next Thursday noon, one daemon iteration every six hours (the real daemon checks
    # every few seconds; what matters is which scheduled times it records, and it catches up on missed ones)
    start = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    end = start + timedelta(days=8)
    logger = logging.getLogger("test_schedule_times")
    with freeze_time(start):
        instance.start_schedule(weekly)  # shipped stopped; a user switches it on in the UI
    now = start
    while now <= end:
        with freeze_time(now):
            list(launch_scheduled_runs(context, logger, now, {}))
        now += timedelta(hours=6)

    for schedule in (nightly, weekly):
        promise = promised_time(schedule.name)
        assert schedule.execution_timezone == promise[3], schedule.name
        ticks = instance.get_ticks(schedule.get_remote_origin_id(), schedule.selector_id)
        recorded = sorted(datetime.fromtimestamp(t.timestamp, UTC) for t in ticks)
        assert recorded == _expected_ticks(start, end, promise), schedule.name
        assert all(t.status.value == "SUCCESS" for t in ticks), [(t.status, t.error) for t in ticks]

    runs = instance.get_runs()
    nightly_keys = sorted(r.tags["dagster/run_key"] for r in runs if r.job_name == "crawl_corpus")
    assert nightly_keys == [f"crawl-202611{day}" for day in range(19, 27)]
    # the job the docs name, once, on the one Sunday in the window (benchmark_shards_sensor follows it)
    row = next(line for line in _docs_lines() if line.startswith("| `weekly_benchmark_schedule` |"))
    job = re.search(r"\| `(\w+)` job", row).group(1)
    weekly_runs = [r for r in runs if r.job_name == job]
    assert [r.tags["lumina/week"] for r in weekly_runs] == ["2026-W47"]


def test_next_ticks_stay_on_utc_across_daylight_saving(daemon_workspace):
    """The daemon's next-tick iterator, from a start just before Europe's and North America's clock changes:
    a schedule on UTC keeps its hour; one left on a local zone would move by an hour."""
    _, _, repository = daemon_workspace
    for name, start in (
        ("nightly_crawl_schedule", datetime(2027, 3, 25, 12, 0, tzinfo=UTC)),  # Europe: 28 March 2027
        ("nightly_crawl_schedule", datetime(2026, 10, 30, 12, 0, tzinfo=UTC)),  # US: 1 November 2026
        ("weekly_benchmark_schedule", datetime(2027, 3, 1, 0, 0, tzinfo=UTC)),  # US: 14 March 2027
    ):
        schedule = repository.get_schedule(name)
        weekday, hour, minute, _ = promised_time(name)
        ticks = schedule.execution_time_iterator(start.timestamp())
        upcoming = [next(ticks).astimezone(UTC) for _ in range(5)]
        assert all((t.hour, t.minute) == (hour, minute) for t in upcoming), (name, upcoming)
        if weekday is not None:
            assert {WEEKDAYS[t.weekday()] for t in upcoming} == {weekday}
        gap = timedelta(days=1 if weekday is None else 7)
        assert [b - a for a, b in zip(upcoming, upcoming[1:], strict=False)] == [gap] * 4
