"""docs/production.md's PostgreSQL `dagster.yaml`, copied as written out of the page, against a real local
PostgreSQL that requires the password (scram-sha-256), and the inbox sensor's cursor surviving a restart of the
daemon's sensor loop.

The daemon here is Dagster's own sensor iteration (`execute_sensor_iteration`, what `dagster-daemon run` calls
every few seconds) over the shipped code location loaded the way the daemon loads it. A restart is the loop,
its workspace and its instance all dropped, and a new instance opened from the same `dagster.yaml` in a fresh
DAGSTER_HOME folder (a redeploy): all that survives is what PostgreSQL holds. Runs only queue (the docs' `concurrency.runs` makes the queued coordinator)
and are never launched."""

from __future__ import annotations

import logging
import os
import shutil
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.sensor import execute_sensor_iteration
from docs_blocks import documented_postgres_dagster_yaml
from orchestration_servers import local_postgres

from lumina_assets.core import settings
from sensors.inbox import load_cursor

PROJECT = settings.PROJECT_ROOT
PASSWORD = "pg-secret-for-the-docs-test"


@pytest.fixture
def postgres_env(monkeypatch):
    with local_postgres(password=PASSWORD) as server:
        monkeypatch.setenv("DAGSTER_PG_HOST", server.host)
        monkeypatch.setenv("DAGSTER_PG_PORT", str(server.port))
        monkeypatch.setenv("DAGSTER_PG_USER", server.username)
        monkeypatch.setenv("DAGSTER_PG_PASSWORD", PASSWORD)
        yield server


def _home(tmp_path, name: str = "dagster_home") -> str:
    home = tmp_path / name
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text(documented_postgres_dagster_yaml(), encoding="utf-8")
    return str(home)


def test_documented_dagster_yaml_loads_against_postgres(postgres_env, tmp_path, monkeypatch, caplog):
    home = _home(tmp_path)
    instance = dg.DagsterInstance.from_config(home)
    for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage):
        assert type(storage).__name__.startswith("Postgres"), storage
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
    assert instance.run_monitoring_enabled and instance.run_retries_enabled
    assert instance.run_retries_max_retries == 1
    assert instance.telemetry_enabled is False
    assert instance.get_runs() == []  # a real query through PostgreSQL
    instance.dispose()

    # the password really comes from DAGSTER_PG_PASSWORD: without it the server refuses the instance
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "not-the-password")
    with pytest.raises(Exception, match="DB connection"):
        dg.DagsterInstance.from_config(home).get_runs()
    assert 'password authentication failed for user "dagster"' in caplog.text


@contextmanager
def _daemon(home: str):
    """An instance from `home`'s dagster.yaml and the shipped code location as the daemon loads it."""
    instance = dg.DagsterInstance.from_config(home)
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="lumina_assets.definitions", working_directory=str(PROJECT)),
        location_name="lumina",
    )
    try:
        with create_test_daemon_workspace_context(InProcessWorkspaceLoadTarget(origin), instance) as context:
            entry = next(iter(context.create_request_context().get_code_location_entries().values()))
            assert entry.code_location, entry.load_error
            [repository] = entry.code_location.get_repositories().values()
            yield instance, context, repository
    finally:
        instance.dispose()


def _tick(context, when: datetime) -> None:
    with freeze_time(when):
        list(execute_sensor_iteration(context, logging.getLogger("sensor-daemon"), None, None))


def _drop(name: str, shared_data, inbox) -> None:
    shutil.copyfile(shared_data / "pdfs" / name, inbox / name)
    old = time.time() - 120  # past the sensor's settle time
    os.utime(inbox / name, (old, old))


def test_inbox_sensor_cursor_survives_a_daemon_restart(postgres_env, shared_data, tmp_path):
    home = _home(tmp_path)
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True)
    _drop("N18-3011.pdf", shared_data, inbox)
    start = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)

    with _daemon(home) as (instance, context, repository):
        sensor = repository.get_sensor("inbox_sensor")
        # only the inbox sensor ticks here; the shipped code location's other sensors are switched off
        for other in repository.get_sensors():
            if other.name != sensor.name:
                with freeze_time(start):
                    instance.stop_sensor(other.get_remote_origin_id(), other.selector_id, other)
        _tick(context, start)
        state = instance.get_instigator_state(sensor.get_remote_origin_id(), sensor.selector_id)
        written = state.instigator_data.cursor
        assert set(load_cursor(written)) == {"N18-3011.pdf"}
        [run] = instance.get_runs()
        assert run.job_name == "ingest_inbox" and run.status == dg.DagsterRunStatus.QUEUED

    # the daemon restarts, redeployed with a fresh DAGSTER_HOME folder holding the same dagster.yaml: nothing in
    # this process or on the first home's disk survives, only PostgreSQL
    with _daemon(_home(tmp_path, "redeployed_dagster_home")) as (instance, context, repository):
        sensor = repository.get_sensor("inbox_sensor")
        state = instance.get_instigator_state(sensor.get_remote_origin_id(), sensor.selector_id)
        assert state.instigator_data.cursor == written
        _tick(context, start + timedelta(minutes=1))
        ticks = instance.get_ticks(sensor.get_remote_origin_id(), sensor.selector_id)
        latest = ticks[0]
        # skipped by the cursor (it names the file already taken), not by Dagster's run-key deduplication
        assert latest.status == TickStatus.SKIPPED
        assert "1 already ingested" in (latest.skip_reason or ""), latest.skip_reason
        assert len(instance.get_runs()) == 1

        _drop("2304.02623v1.pdf", shared_data, inbox)
        _tick(context, start + timedelta(minutes=2))
        runs = instance.get_runs()
        assert len(runs) == 2 and runs[0].job_name == "ingest_inbox"
        state = instance.get_instigator_state(sensor.get_remote_origin_id(), sensor.selector_id)
        assert set(load_cursor(state.instigator_data.cursor)) == {"N18-3011.pdf", "2304.02623v1.pdf"}
