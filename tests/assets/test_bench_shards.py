"""Sharded stages: questions added later run only in new shards, a shard that did not finish reruns alone, and the
partition's table is every shard's rows."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest
from benchmark_slice import write_scifact_slice
from mocked_benchmark_apis import StandInLLM, resources_with

from lumina_assets.core import settings, tables
from lumina_assets.defs import benchmark

pytestmark = pytest.mark.slow

STAGES = ("provider_results", "recursive_results", "judgments")


def _config(folder, beir):
    config = benchmark.default_run_config(
        synthetic=0, beir_queries=beir, depths=[0, 1], page_sizes=[3], calibration_queries=3, shard_size=2
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    config["ops"]["judgments"]["config"]["calibration_dir"] = str(folder)
    return config


def _materialize(resources, config, instance) -> dict[str, dict]:
    """Questions, then the three sharded stages for exa; each stage's shard counts."""
    selections = [
        ([benchmark.user_queries, benchmark.synthetic_questions, benchmark.questions], None),
        ([benchmark.provider_results], "exa"),
        ([benchmark.recursive_results], "exa"),
        ([benchmark.judgments], "exa"),
    ]
    counts = {}
    for selection, partition in selections:
        names = {a.key.to_user_string() for a in selection}
        result = dg.materialize(
            benchmark.ASSETS + benchmark.CHECKS,
            selection=selection,
            partition_key=partition,
            resources=resources,
            instance=instance,
            run_config={"ops": {k: v for k, v in config["ops"].items() if k in names}},
        )
        assert result.success
        for name in names & set(STAGES):
            metadata = result.asset_materializations_for_node(name)[0].metadata
            counts[name] = {k: metadata[k].value for k in ("shards", "shards_computed", "shards_reused")}
    return counts


def test_new_questions_run_only_new_shards(shared_data, data_dir):
    folder = write_scifact_slice(shared_data, claims=6, distractors=30)
    llm = StandInLLM()
    resources = resources_with(llm)
    instance = dg.DagsterInstance.ephemeral()

    first = _materialize(resources, _config(folder, 4), instance)
    assert all(first[s] == {"shards": 2, "shards_computed": 2, "shards_reused": 0} for s in STAGES)
    calls = llm.calls

    second = _materialize(resources, _config(folder, 6), instance)  # two more questions: one new shard
    assert all(second[s] == {"shards": 3, "shards_computed": 1, "shards_reused": 2} for s in STAGES)
    # the partition's tables hold every shard's questions
    levels = pl.read_parquet(tables.RECURSIVE_RESULTS.path("exa"))
    assert levels["question_id"].n_unique() == 6
    verdicts = pl.read_parquet(tables.JUDGMENTS.path("exa"))
    assert set(verdicts["question_id"]) == set(levels["question_id"])
    sent_for_new_shard = llm.calls - calls
    assert 0 < sent_for_new_shard < calls  # not the whole run again

    # a shard that did not finish (its file is gone) reruns alone
    (settings.benchmark_dir() / "shards" / "judgments" / "exa" / "00001.parquet").unlink()
    third = _materialize(resources, _config(folder, 6), instance)
    assert third["judgments"] == {"shards": 3, "shards_computed": 1, "shards_reused": 2}
    assert third["provider_results"]["shards_computed"] == 0
    assert pl.read_parquet(tables.JUDGMENTS.path("exa")).height == verdicts.height
