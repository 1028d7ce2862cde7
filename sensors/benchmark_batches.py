"""Watches the judge's open batches (`judge_batch`): each tick polls them, puts the answers of an ended batch in
the LLM cache, resubmits what an expired or partly failed batch did not answer, records each batch's state on
`judge_batch` (an observation, shown in the UI) and requests `judgments` for a provider once none of its batches
is open."""

from __future__ import annotations

import dagster as dg

from evals import batch
from resources.llm import LLMResource

JUDGE_BATCH = dg.AssetKey("judge_batch")
JUDGMENTS = dg.AssetKey("judgments")


def _observation(record: dict) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=JUDGE_BATCH,
        partition=record["partition"],
        metadata={
            "batch_id": record["id"],
            "status": record["status"],
            "state": record["state"],
            "requests": len(record["requests"]),
            "answered": record["answered"],
            "missing": len(record["missing"]),
            "resubmitted_as": record["resubmitted_as"] or "",
        },
    )


@dg.sensor(
    name="judge_batch_sensor",
    asset_selection=[JUDGMENTS],
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def judge_batch_sensor(context: dg.SensorEvaluationContext, judge_llm: LLMResource) -> dg.SensorResult:
    records = batch.open_records()
    if not records:
        return dg.SensorResult(skip_reason="no open judge batch")
    client = judge_llm.get_client()
    events, requests = [], []
    for record in records:
        record = batch.poll(client, record)
        events.append(_observation(record))
        if record["state"] != batch.ENDED:
            continue
        new = batch.resubmit_missing(client, record)
        if new is not None:
            events += [_observation(record), _observation(new)]
        elif batch.partition_done(record["partition"]):
            requests.append(
                dg.RunRequest(
                    run_key=f"judgments-after-{record['id']}",
                    partition_key=record["partition"],
                    asset_selection=[JUDGMENTS],
                )
            )
    return dg.SensorResult(run_requests=requests, asset_events=events)
