"""Watches the open judge and question batches: each tick polls them, caches the answers of an ended batch,
resubmits what it missed, observes each batch's state on its asset and, once a partition's batches are done,
requests the synchronous asset that reads them (`judgments`, `synthetic_questions`)."""

from __future__ import annotations

import dagster as dg

from evals import batch
from resources.llm import LLMResource

BATCH_ASSETS = {"judge": dg.AssetKey("judge_batch"), "questions": dg.AssetKey("question_batch")}
READERS = {"judge": dg.AssetKey("judgments"), "questions": dg.AssetKey("synthetic_questions")}
CLIENTS = {"judge": "judge_llm", "questions": "question_llm"}


def _observation(record: dict) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=BATCH_ASSETS[record["role"]],
        partition=record["partition"] or None,
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
    asset_selection=list(READERS.values()),
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.STOPPED,
)
def judge_batch_sensor(
    context: dg.SensorEvaluationContext, judge_llm: LLMResource, question_llm: LLMResource
) -> dg.SensorResult:
    records = batch.open_records()
    if not records:
        return dg.SensorResult(skip_reason="no open batch")
    clients = {"judge_llm": judge_llm.get_client(), "question_llm": question_llm.get_client()}
    events, requests = [], []
    for record in records:
        client = clients[CLIENTS[record["role"]]]
        record = batch.poll(client, record)
        events.append(_observation(record))
        if record["state"] != batch.ENDED:
            continue
        new = batch.resubmit_missing(client, record)
        if new is not None:
            events += [_observation(record), _observation(new)]
        elif batch.partition_done(record["partition"], record["role"]):
            requests.append(
                dg.RunRequest(
                    run_key=f"{record['role']}-after-{record['id']}",
                    partition_key=record["partition"] or None,
                    asset_selection=[READERS[record["role"]]],
                    run_config=record.get("run_config") or {},
                )
            )
    return dg.SensorResult(run_requests=requests, asset_events=events)
