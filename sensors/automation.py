"""Everything that runs without a person: jobs, schedules and sensors, collected for definitions.py."""

from __future__ import annotations

import dagster as dg

from lumina_assets.core import settings
from sensors.alerts import alerts_job, alerts_sensor
from sensors.benchmark_batches import judge_batch_sensor
from sensors.inbox import inbox_sensor
from sensors.jobs import JOBS as PIPELINE_JOBS
from sensors.polling import polling_sensor
from sensors.schedules import SCHEDULES
from sensors.schedules import SENSORS as SCHEDULED_SENSORS

# Evaluates the assets' automation conditions (AutomationCondition.eager(), and for the partitioned parse assets
# those in sensors/conditions.py), so a new ingest batch flows from `papers` to the index with no manual step. Shipped RUNNING: in OSS
# the built-in default automation sensor starts stopped.
automation_condition_sensor = dg.AutomationConditionSensorDefinition(
    "lumina_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    # a tick is cheap (a handful of conditions); a short interval keeps the wait
    # between an ingest run and its parse and index runs short
    minimum_interval_seconds=10,
    description="Eager automation: new ingest batches go through parsing, passages and the index.",
)


def executor_from_env() -> dg.ExecutorDefinition:
    """How a run launched by the UI or the daemon runs its steps (`LUMINA_EXECUTOR`).

    `in_process` (the default): one after another in the run's process. On one machine a step in a process of its
    own only adds a start (one to three seconds each: an inbox drop passes through about ten steps) and its parts
    share the cores one process already uses. `multiprocess`: a process per step. `k8s`: a pod per step
    (sensors/k8s.py; `LUMINA_K8S_GPU` puts the embedding step on GPU nodes), where the fan-out pays."""
    choice = settings.get().orchestration.executor
    if choice == "in_process":
        return dg.in_process_executor
    if choice == "multiprocess":
        return dg.multiprocess_executor
    if choice == "k8s":
        from sensors.k8s import k8s_executor  # dagster-k8s: the `k8s` extra, installed in the image

        return k8s_executor()
    raise ValueError(f"LUMINA_EXECUTOR={choice!r}: use in_process, multiprocess or k8s")


SENSORS = [
    inbox_sensor,
    polling_sensor,
    automation_condition_sensor,
    alerts_sensor,
    judge_batch_sensor,
    *SCHEDULED_SENSORS,
]
JOBS = [*PIPELINE_JOBS, alerts_job]

__all__ = ["JOBS", "SCHEDULES", "SENSORS", "executor_from_env"]
