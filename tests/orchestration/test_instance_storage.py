"""The calls into Dagster's non-public event-log storage (lumina_assets/defs/instance_storage.py), against a real
instance: an upgrade that renames or reshapes them fails here, not in a held batch or a pool limit."""

from __future__ import annotations

import warnings

import dagster as dg

from lumina_assets.defs.instance_storage import latest_check_executions, pool_limits, set_pool_limit

PARTS = dg.StaticPartitionsDefinition(["good", "bad"])
with warnings.catch_warnings():  # partitioned checks are a Dagster preview feature
    warnings.simplefilter("ignore", dg.PreviewWarning)
    SANE = dg.AssetCheckSpec("sane", asset="part", blocking=True, partitions_def=PARTS)


@dg.asset(partitions_def=PARTS, check_specs=[SANE])
def part(context):
    yield dg.Output(1)
    passed = context.partition_key == "good"
    yield dg.AssetCheckResult(check_name="sane", passed=passed, description=None if passed else "not sane")


def test_pool_limits_round_trip(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        set_pool_limit(instance, "llm", 3)
        set_pool_limit(instance, "arxiv", 1)
        set_pool_limit(instance, "llm", 4)
        assert pool_limits(instance) == {"arxiv": 1, "llm": 4}


def test_latest_check_execution_per_partition(tmp_path):
    key = dg.AssetCheckKey(dg.AssetKey("part"), "sane")
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert latest_check_executions(instance, [key]) == []
        runs = {}
        for partition in ("good", "bad"):
            result = dg.materialize([part], instance=instance, partition_key=partition, raise_on_error=False)
            runs[partition] = result.run_id
        executions = {e.partition: e for e in latest_check_executions(instance, [key])}
        assert set(executions) == {"good", "bad"}
        assert executions["good"].status == "SUCCEEDED" and executions["bad"].status == "FAILED"
        assert {p: e.run_id for p, e in executions.items()} == runs
        assert all(e.check_key == key for e in executions.values())
