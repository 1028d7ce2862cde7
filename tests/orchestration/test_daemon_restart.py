"""A real `dagster-daemon run` on docs/production.md's PostgreSQL `dagster.yaml`, stopped and started again: the inbox
sensor's cursor lives in PostgreSQL, so the restarted daemon (a fresh DAGSTER_HOME folder holding the same file, as
after a redeploy) does not take a file again, and takes a new one.

The daemon loads the shipped code location through workspace.yaml, in its own process group, stopped by PID
(SIGTERM, as a container stop sends it). Its run queue is closed (`max_concurrent_runs: 0`), the one change to the
documented file: the sensor's runs stay queued, so nothing but the sensor runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import TickStatus
from docs_blocks import documented_postgres_dagster_yaml
from orchestration_servers import local_postgres, stop_process_group
from tools import missing_tool

from lumina_assets.core import settings
from sensors.inbox import load_cursor

pytestmark = pytest.mark.slow

PROJECT = settings.PROJECT_ROOT
WAIT_S = 300  # a loaded 2-core machine starts the daemon and its code server in well under this


def _home(root: Path) -> str:
    root.mkdir()
    config = yaml.safe_load(documented_postgres_dagster_yaml())
    config["concurrency"]["runs"]["max_concurrent_runs"] = 0  # runs stay queued
    (root / "dagster.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(root)


def _start_daemon(home: str, log: Path) -> subprocess.Popen:
    daemon = Path(sys.executable).parent / "dagster-daemon"
    if not daemon.is_file():
        missing_tool("dagster-daemon not found beside the Python running the tests")
    with log.open("ab") as handle:
        return subprocess.Popen(
            [str(daemon), "run", "-w", str(PROJECT / "workspace.yaml")],
            cwd=PROJECT,
            env={**os.environ, "DAGSTER_HOME": home},
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _inbox_state(instance: dg.DagsterInstance):
    states = instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
    return next((s for s in states if s.instigator_name == "inbox_sensor"), None)


def _wait(what: str, check, daemon: subprocess.Popen, log: Path):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise AssertionError(
                f"the daemon exited ({daemon.returncode}): {log.read_text(errors='replace')[-3000:]}"
            )
        found = check()
        if found:
            return found
        time.sleep(2)
    raise AssertionError(f"no {what} within {WAIT_S}s: {log.read_text(errors='replace')[-3000:]}")


def _drop(shared_data, inbox: Path, name: str) -> None:
    shutil.copyfile(shared_data / "pdfs" / name, inbox / name)
    old = time.time() - 120  # past the sensor's settle time
    os.utime(inbox / name, (old, old))


def test_inbox_cursor_survives_a_real_daemon_restart(shared_data, data_dir, tmp_path, monkeypatch):
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True)
    _drop(shared_data, inbox, "N18-3011.pdf")
    log = tmp_path / "daemon.log"
    with local_postgres() as server:
        monkeypatch.setenv("DAGSTER_PG_HOST", server.host)
        monkeypatch.setenv("DAGSTER_PG_PORT", str(server.port))
        monkeypatch.setenv("DAGSTER_PG_USER", server.username)
        monkeypatch.setenv("DAGSTER_PG_PASSWORD", "")
        first_home = _home(tmp_path / "first_home")
        reader = dg.DagsterInstance.from_config(first_home)  # the test's own view of PostgreSQL
        daemon = _start_daemon(first_home, log)
        try:

            def first_cursor():
                state = _inbox_state(reader)
                cursor = state and state.instigator_data and state.instigator_data.cursor
                return cursor if cursor and "N18-3011.pdf" in load_cursor(cursor) else None

            written = _wait("inbox sensor cursor", first_cursor, daemon, log)
            assert [r.job_name for r in reader.get_runs()] == ["ingest_inbox"]
        finally:
            stop_process_group(daemon, signal.SIGTERM, timeout=60)
        assert daemon.returncode is not None

        restarted_at = time.time()
        second_home = _home(tmp_path / "second_home")
        daemon = _start_daemon(second_home, log)
        try:
            state = _inbox_state(reader)
            assert state.instigator_data.cursor == written

            def tick_after_restart():
                state = _inbox_state(reader)
                ticks = reader.get_ticks(state.instigator_origin_id, state.selector_id, limit=1)
                done = ticks and ticks[0].timestamp > restarted_at and ticks[0].status != TickStatus.STARTED
                return ticks[0] if done else None

            tick = _wait("sensor tick after the restart", tick_after_restart, daemon, log)
            # skipped by the cursor (it names the file already taken), not by run-key deduplication
            assert tick.status == TickStatus.SKIPPED, (tick.status, tick.error)
            assert "1 already ingested" in (tick.skip_reason or ""), tick.skip_reason
            assert len(reader.get_runs()) == 1

            _drop(shared_data, inbox, "2304.02623v1.pdf")

            def both_files():  # the tick writes its cursor after submitting its run
                cursor = load_cursor(_inbox_state(reader).instigator_data.cursor)
                return set(cursor) == {"N18-3011.pdf", "2304.02623v1.pdf"}

            _wait("the new file in the cursor", both_files, daemon, log)
            assert len(reader.get_runs()) == 2
        finally:
            stop_process_group(daemon, signal.SIGTERM, timeout=60)
            reader.dispose()
