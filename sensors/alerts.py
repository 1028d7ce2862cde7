"""Alerts sensor: after each `passage_index` materialization, one `run_alerts` run of `alert_hits`, keyed by the
index run's id so one index run starts at most one alerts run."""

from __future__ import annotations

import dagster as dg

from lumina_assets.defs.alerts import INDEX_RUN_TAG
from lumina_assets.defs.partitions import INGEST_BATCH_TAG
from lumina_assets.search import saved_searches

INDEX_ASSET = dg.AssetKey("passage_index")

alerts_job = dg.define_asset_job(
    name="run_alerts",
    selection=dg.AssetSelection.assets("alert_hits"),
    description="Run every saved search against the index and record the papers that newly entered its top k.",
    tags={"lumina/job": "alerts"},
)


def alert_request(
    index_event: dg.EventLogEntry, instance: dg.DagsterInstance
) -> dg.RunRequest | dg.SkipReason:
    """The run for one passage_index materialization, tagged with the index run's id and its ingest batch."""
    try:
        searches = saved_searches.load()
    except saved_searches.StoreUnreadable as error:
        return dg.SkipReason(str(error))
    if not searches:
        return dg.SkipReason("no saved searches (`lumina alerts add`, or save one on the search page)")
    tags = {INDEX_RUN_TAG: index_event.run_id, "lumina/trigger": "alerts"}
    index_run = instance.get_run_by_id(index_event.run_id)
    if index_run is not None and index_run.tags.get(INGEST_BATCH_TAG):
        tags[INGEST_BATCH_TAG] = index_run.tags[INGEST_BATCH_TAG]
    return dg.RunRequest(run_key=f"alerts-{index_event.run_id}", tags=tags)


@dg.asset_sensor(
    asset_key=INDEX_ASSET,
    job=alerts_job,
    name="alerts_sensor",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After each passage_index materialization: run the saved searches (alert_hits).",
)
def alerts_sensor(context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry):
    return alert_request(asset_event, context.instance)
