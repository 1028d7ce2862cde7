"""The weekly benchmark schedule switched on, through the daemon's code path: evaluate the schedule at its tick
(`build_schedule_context`), then launch every run it requests, as requested (job, partition, tags), on an
ephemeral instance. Offline: lumina and bm25 run over a small real index; semantic_scholar, google_scholar and exa
have no key and are skipped with a message, which is a successful run."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
from benchmark_slice import write_scifact_slice

from lumina_assets.core import settings, tables
from lumina_assets.defs.partitions import PROVIDERS
from lumina_assets.indexing import lancedb_tables as indexing
from sensors.schedules import weekly_benchmark_schedule

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


def test_weekly_benchmark_runs_every_provider_to_success(small_index, monkeypatch):
    for name in PROVIDER_KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LUMINA_CORPUS", str(small_index))  # BEIR queries with qrels join the questions
    # every held-out query by default (388 of SciFact train); the schedule's mechanics need a dozen of them
    monkeypatch.setenv("LUMINA_BEIR_QUERIES", "12")
    from lumina_assets.definitions import build_definitions

    defs = build_definitions()
    instance = dg.DagsterInstance.ephemeral()
    tick = datetime(2026, 11, 22, 4, 0, tzinfo=UTC)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=tick)
    requests = list(weekly_benchmark_schedule(context))

    assert sorted(r.partition_key for r in requests) == sorted(PROVIDERS.get_partition_keys())
    assert len({r.run_key for r in requests}) == len(requests)
    job = defs.resolve_job_def(weekly_benchmark_schedule.job_name)
    outcomes = {}
    for request in requests:
        result = job.execute_in_process(
            instance=instance,
            partition_key=request.partition_key,
            tags=request.tags,
            run_config=request.run_config,
            raise_on_error=False,
        )
        failures = [e.message for e in result.all_events if e.is_step_failure]
        assert result.success, (request.partition_key, failures)
        outcomes[request.partition_key] = result.asset_materializations_for_node("provider_results")[
            0
        ].metadata

    for provider in ("semantic_scholar", "google_scholar", "exa"):
        assert outcomes[provider]["skipped"].value is True
        assert "_API_KEY is not set" in outcomes[provider]["reason"].value
    for provider in ("lumina", "bm25"):
        assert outcomes[provider]["questions"].value > 0 and outcomes[provider]["errors"].value == 0
    # The week's last run scored every provider that ran.
    scores = tables.read(tables.BENCHMARK_SCORES)
    assert {"lumina", "bm25"} <= set(scores["provider"].to_list())
    runs = instance.get_runs()
    assert {r.job_name for r in runs} == {"run_benchmark"}
    assert sorted(r.tags["dagster/partition"] for r in runs) == sorted(PROVIDERS.get_partition_keys())
