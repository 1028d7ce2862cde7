"""Placeholder for sensors, schedules and jobs (orchestration issue)."""

JOBS: list = []
SCHEDULES: list = []
SENSORS: list = []
