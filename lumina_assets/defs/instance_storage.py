"""The only calls into the Dagster instance's event-log storage (not public API): per-pool limits and the latest
execution of each partitioned asset check have no public accessor. tests/orchestration/test_instance_storage.py
catches an upgrade that moves them."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg


@dataclass(frozen=True)
class CheckExecution:
    """The latest execution of one asset check on one partition."""

    check_key: dg.AssetCheckKey
    partition: str | None
    status: str  # PLANNED, SUCCEEDED or FAILED
    run_id: str  # the run that planned (and, unless PLANNED, evaluated) it


def latest_check_executions(
    instance: dg.DagsterInstance, check_keys: list[dg.AssetCheckKey]
) -> list[CheckExecution]:
    return [
        CheckExecution(
            check_key=info.check_key,
            partition=info.partition_key,
            status=info.latest_execution_status.value,
            run_id=info.latest_planned_run_id,
        )
        for info in instance.event_log_storage.get_asset_check_partition_info(check_keys)
    ]


def set_pool_limit(instance: dg.DagsterInstance, pool: str, limit: int) -> None:
    """Same as `dagster instance concurrency set POOL LIMIT`."""
    instance.event_log_storage.set_concurrency_slots(pool, limit)


def pool_limits(instance: dg.DagsterInstance) -> dict[str, int]:
    storage = instance.event_log_storage
    return {
        pool: storage.get_concurrency_info(pool).slot_count for pool in sorted(storage.get_concurrency_keys())
    }
