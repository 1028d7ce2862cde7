"""Everything that runs without a person: jobs, schedules and sensors, collected for definitions.py."""

from __future__ import annotations

import dagster as dg

from sensors.inbox import inbox_sensor
from sensors.polling import polling_sensor
from sensors.schedules import JOBS, SCHEDULES

# Evaluates the assets' automation conditions (AutomationCondition.eager() on the partitioned parse / index
# assets), so a new ingest batch flows from `papers` to the index with no manual step. Shipped RUNNING: in OSS
# the built-in default automation sensor starts stopped.
automation_condition_sensor = dg.AutomationConditionSensorDefinition(
    "lumina_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Eager automation: new ingest batches go through parsing, passages and the index.",
)

SENSORS = [inbox_sensor, polling_sensor, automation_condition_sensor]

__all__ = ["JOBS", "SCHEDULES", "SENSORS"]
