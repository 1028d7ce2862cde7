"""Schedules, jobs, the shipped automation and instance config: what runs without a person, and when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
import yaml

from lumina_assets.core import settings
from lumina_assets.defs.instance_storage import pool_limits
from lumina_assets.defs.partitions import INGEST_BATCH_TAG
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from sensors.automation import SCHEDULES, SENSORS, executor_from_env
from sensors.pools import POOL_LIMITS, apply_pool_limits
from sensors.schedules import nightly_crawl_schedule, weekly_benchmark_schedule

PROJECT = settings.PROJECT_ROOT


@pytest.fixture(scope="module")
def repository():
    from lumina_assets.definitions import defs

    return defs.get_repository_def()


def _group_keys(repository, group: str) -> set[dg.AssetKey]:
    graph = repository.asset_graph
    return {k for k in graph.materializable_asset_keys if graph.get(k).group_name == group}


def test_jobs_cover_their_groups(repository):
    crawl = repository.get_job("crawl_corpus")
    assert set(crawl.asset_layer.selected_asset_keys) == _group_keys(repository, "corpus")
    benchmark = repository.get_job("run_benchmark")
    assert set(benchmark.asset_layer.selected_asset_keys) == _group_keys(repository, "benchmark")
    assert _group_keys(repository, "benchmark"), "benchmark group is empty"


def test_nightly_crawl_names_its_batch_after_the_day(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMINA_CORPUS", str(tmp_path))  # offline mode: the tick asks no source
    resources = {"corpus": CorpusResource(), "openalex": OpenAlexResource(), "arxiv": ArxivResource()}
    when = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
    request = nightly_crawl_schedule(
        dg.build_schedule_context(scheduled_execution_time=when, resources=resources)
    )
    assert request.run_key == "crawl-20261122"
    assert request.tags[INGEST_BATCH_TAG] == "crawl-20261122"
    next_day = nightly_crawl_schedule(
        dg.build_schedule_context(scheduled_execution_time=when + timedelta(days=1), resources=resources)
    )
    assert next_day.run_key != request.run_key


def _ticks(schedule: dg.ScheduleDefinition, start: datetime, count: int) -> list[datetime]:
    from dagster._utils.schedules import cron_string_iterator

    ticks = cron_string_iterator(start.timestamp(), schedule.cron_schedule, schedule.execution_timezone)
    return [next(ticks) for _ in range(count)]


def test_schedule_cadence():
    start = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    nightly = _ticks(nightly_crawl_schedule, start, 3)
    assert [b - a for a, b in zip(nightly, nightly[1:], strict=False)] == [timedelta(days=1)] * 2
    assert all(t.hour == 2 for t in nightly)
    weekly = _ticks(weekly_benchmark_schedule, start, 3)
    assert [b - a for a, b in zip(weekly, weekly[1:], strict=False)] == [timedelta(days=7)] * 2
    one_week = weekly_benchmark_schedule(dg.build_schedule_context(scheduled_execution_time=weekly[0]))
    same_week = weekly_benchmark_schedule(
        dg.build_schedule_context(scheduled_execution_time=weekly[0] + timedelta(hours=1))
    )
    next_week = weekly_benchmark_schedule(dg.build_schedule_context(scheduled_execution_time=weekly[1]))
    # a second evaluation in the same week launches nothing new; the next week does
    assert one_week.run_key == same_week.run_key
    assert one_week.run_key != next_week.run_key


def test_shipped_automation_is_on_and_live_calls_are_opt_in():
    by_name = {s.name: s for s in SENSORS}
    automation = [s for s in SENSORS if isinstance(s, dg.AutomationConditionSensorDefinition)]
    assert len(automation) == 1 and automation[0].default_status == dg.DefaultSensorStatus.RUNNING
    assert by_name["inbox_sensor"].default_status == dg.DefaultSensorStatus.RUNNING
    assert by_name["openalex_arxiv_polling_sensor"].default_status == dg.DefaultSensorStatus.STOPPED
    schedules = {s.name: s for s in SCHEDULES}
    assert schedules["nightly_crawl_schedule"].default_status == dg.DefaultScheduleStatus.RUNNING
    assert schedules["weekly_benchmark_schedule"].default_status == dg.DefaultScheduleStatus.STOPPED


def test_eager_assets_are_covered_by_the_automation_sensor(repository):
    graph = repository.asset_graph
    eager = {k for k in graph.materializable_asset_keys if graph.get(k).automation_condition is not None}
    assert {dg.AssetKey("pdf_files"), dg.AssetKey("parsed_papers"), dg.AssetKey("passages")} <= eager
    assert dg.AssetKey("passage_index") in eager
    sensor = next(s for s in SENSORS if isinstance(s, dg.AutomationConditionSensorDefinition))
    assert eager <= set(sensor.asset_selection.resolve(graph))


def test_shipped_instance_config_loads(tmp_path):
    """The committed .dagster_home/dagster.yaml is valid for this Dagster and sets what the docs say."""
    shipped = PROJECT / ".dagster_home" / "dagster.yaml"
    config = yaml.safe_load(shipped.read_text())
    assert config["telemetry"]["enabled"] is False
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(shipped.read_text())
    instance = dg.DagsterInstance.from_config(str(home))
    assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
    assert instance.run_retries_enabled and instance.run_monitoring_enabled
    assert apply_pool_limits(instance) == POOL_LIMITS
    assert pool_limits(instance) == POOL_LIMITS
    instance.dispose()


def test_executor_choice(monkeypatch):
    monkeypatch.delenv("LUMINA_EXECUTOR", raising=False)
    assert executor_from_env() is dg.in_process_executor  # one machine: no process start per step
    monkeypatch.setenv("LUMINA_EXECUTOR", "multiprocess")
    assert executor_from_env() is dg.multiprocess_executor
    monkeypatch.setenv("LUMINA_EXECUTOR", "celery-maybe")
    with pytest.raises(ValueError, match="LUMINA_EXECUTOR"):
        executor_from_env()
