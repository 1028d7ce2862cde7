"""Everything that runs without a person: jobs, schedules and sensors, collected for definitions.py."""

from __future__ import annotations

import dagster as dg

from lumina_assets.core import settings
from sensors.alerts import alerts_job, alerts_sensor
from sensors.benchmark_batches import judge_batch_sensor
from sensors.inbox import inbox_sensor
from sensors.jobs import JOBS as PIPELINE_JOBS
from sensors.polling import polling_sensor
from sensors.schedules import SCHEDULES as SCHEDULES
from sensors.schedules import SENSORS as SCHEDULED_SENSORS

# Evaluates the assets' automation conditions; shipped RUNNING, where OSS's built-in one starts stopped.
automation_condition_sensor = dg.AutomationConditionSensorDefinition(
    "lumina_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=10,  # a tick is cheap; a short one keeps the wait between ingest and index short
    description="Eager automation: new ingest batches go through parsing, passages and the index.",
)


def executor_from_env() -> dg.ExecutorDefinition:
    """How a run launched by the UI or the daemon runs its steps (`LUMINA_EXECUTOR`, docs/production.md); settings
    refuse any other value."""
    choice = settings.get().orchestration.executor
    if choice == "k8s":
        from sensors.k8s import k8s_executor  # dagster-k8s: the `k8s` extra, installed in the image

        return k8s_executor()
    return dg.multiprocess_executor if choice == "multiprocess" else dg.in_process_executor


SENSORS = [
    inbox_sensor,
    polling_sensor,
    automation_condition_sensor,
    alerts_sensor,
    judge_batch_sensor,
    *SCHEDULED_SENSORS,
]
JOBS = [*PIPELINE_JOBS, alerts_job]
