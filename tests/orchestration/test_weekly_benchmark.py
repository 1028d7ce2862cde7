"""The weekly benchmark schedule switched on, through the daemon's code path: evaluate the schedule at its tick
(`build_schedule_context`) and `benchmark_shards_sensor` after it, then launch every run they request, as
requested (job, partition, tags): the questions, one run per provider × shard, the scoring. Offline: lumina and
bm25 run over a small real index; semantic_scholar, google_scholar and exa have no key and are skipped with a
message, which is a successful run."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
from benchmark_slice import write_scifact_slice

from lumina_assets.core import settings, tables
from lumina_assets.defs.partitions import PROVIDERS
from lumina_assets.indexing import lancedb_tables as indexing
from sensors.schedules import benchmark_shards_sensor, weekly_benchmark_schedule

pytestmark = pytest.mark.slow
PROVIDER_KEYS = (
    "SEMANTIC_SCHOLAR_API_KEY",
    "SERPAPI_API_KEY",
    "EXA_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
)


@pytest.fixture
def small_index(shared_data, data_dir):
    """papers + passages for the relevant docs of a few SciFact queries and some distractors, indexed with the
    bundled model (the one the lumina provider queries with)."""
    from lumina_assets.indexing.embedding import Embedder

    write_scifact_slice(shared_data, claims=8, distractors=60)
    import lancedb

    db = lancedb.connect(settings.lancedb_uri())
    indexing.index_corpus(
        db, tables.read_all(tables.PASSAGES), tables.read(tables.PAPERS), Embedder(batch_size=32)
    )
    return shared_data / "scifact"


def _launch(defs, instance, requests) -> dict[str, dict]:
    """Each request as the daemon launches it (job, partition, tags); partition -> provider_results' metadata."""
    outcomes = {}
    for request in requests:
        job = defs.resolve_job_def(request.job_name or weekly_benchmark_schedule.job_name)
        result = job.execute_in_process(
            instance=instance,
            partition_key=request.partition_key,
            tags=request.tags,
            run_config=request.run_config,
            raise_on_error=False,
        )
        failures = [e.message for e in result.all_events if e.is_step_failure]
        assert result.success, (request.partition_key, failures)
        if request.partition_key:
            metadata = result.asset_materializations_for_node("provider_results")[0].metadata
            outcomes[request.partition_key.split("|")[0]] = metadata
    return outcomes


def test_weekly_benchmark_runs_every_provider_to_success(small_index, monkeypatch, tmp_path):
    for name in PROVIDER_KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LUMINA_CORPUS", str(small_index))  # BEIR queries with qrels join the questions
    # every held-out query by default (388 of SciFact train); the schedule's mechanics need a dozen of them
    monkeypatch.setenv("LUMINA_BEIR_QUERIES", "12")
    from lumina_assets.definitions import build_definitions

    defs = build_definitions()
    instance = dg.DagsterInstance.local_temp(str(tmp_path))  # persistent, as the daemon's: sensors read it
    tick = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=tick)
    _launch(defs, instance, [weekly_benchmark_schedule(context)])  # the questions, with their shards

    def sensor_tick(cursor):
        context = dg.build_sensor_context(
            instance=instance, instance_ref=instance.get_ref(), definitions=defs, cursor=cursor
        )
        return benchmark_shards_sensor.evaluate_tick(context)

    shards = sensor_tick(None)
    keys = sorted(r.partition_key for r in shards.run_requests)
    assert keys == sorted(f"{p}|00000" for p in PROVIDERS.get_partition_keys())  # 12 questions: one shard
    assert len({r.run_key for r in shards.run_requests}) == len(keys)
    assert not sensor_tick(shards.cursor).run_requests  # the shard runs have not run yet: no scoring
    outcomes = _launch(defs, instance, shards.run_requests)
    scoring = sensor_tick(shards.cursor)
    assert [r.job_name for r in scoring.run_requests] == ["benchmark_scoring"]
    _launch(defs, instance, scoring.run_requests)
    assert not sensor_tick(scoring.cursor).run_requests  # once per week's questions

    for provider in ("semantic_scholar", "google_scholar", "exa"):
        assert outcomes[provider]["skipped"].value is True
        assert "_API_KEY is not set" in outcomes[provider]["reason"].value
    for provider in ("lumina", "bm25"):
        assert outcomes[provider]["questions"].value > 0 and outcomes[provider]["errors"].value == 0
    # The scoring run scored every provider that ran.
    scores = tables.read(tables.BENCHMARK_SCORES)
    assert {"lumina", "bm25"} <= set(scores["provider"].to_list())
    runs = instance.get_runs()
    assert {r.job_name for r in runs} == {"benchmark_questions", "benchmark_providers", "benchmark_scoring"}
    assert {r.tags["lumina/trigger"] for r in runs} == {"weekly_benchmark"}
