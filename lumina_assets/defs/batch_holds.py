"""Which ingest batches the index holds back: those whose latest evaluation of a blocking check did not pass, read
from the instance where the index reads its input (why not a run-scoped check or an automation condition:
docs/production.md#held-batches)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import dagster as dg

from lumina_assets.defs.instance_storage import latest_check_executions


@dataclass(frozen=True)
class Hold:
    """One failed (or never finished) blocking check of one batch."""

    batch: str
    check: str  # "<asset>.<check>"
    reason: str
    run_id: str


def blocking_check_keys(assets: Iterable) -> list[dg.AssetCheckKey]:
    keys = []
    for asset in assets:
        for spec in asset.check_specs:
            if spec.blocking:
                keys.append(spec.key)
    return sorted(keys, key=lambda key: key.to_user_string())


def _reason(instance: dg.DagsterInstance, run_id: str, check_key: dg.AssetCheckKey, batch: str) -> str:
    """The failed evaluation's description (or its metadata), read from the run that evaluated it."""
    evaluation = None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        data = entry.dagster_event.event_specific_data
        if data.asset_check_key == check_key and getattr(data, "partition", batch) == batch:
            evaluation = data
    if evaluation is None:
        return "check failed"
    if evaluation.description:
        return evaluation.description
    shown = ", ".join(
        f"{name}={getattr(value, 'value', value)}" for name, value in evaluation.metadata.items()
    )
    return f"check failed ({shown})" if shown else "check failed"


def held_batches(instance: dg.DagsterInstance, check_keys: list[dg.AssetCheckKey]) -> dict[str, list[Hold]]:
    """{batch: its holds}; a check planned but never evaluated holds the batch too (its file was never checked)."""
    holds: dict[str, list[Hold]] = {}
    for execution in latest_check_executions(instance, check_keys):
        if execution.partition is None or execution.status == "SUCCEEDED":
            continue
        if execution.status == "FAILED":
            reason = _reason(instance, execution.run_id, execution.check_key, execution.partition)
        else:
            reason = "planned by a run that never evaluated it (its step failed, was skipped or is running)"
        holds.setdefault(execution.partition, []).append(
            Hold(
                batch=execution.partition,
                check=execution.check_key.to_user_string(),
                reason=reason,
                run_id=execution.run_id,
            )
        )
    return holds


def holds_markdown(holds: dict[str, list[Hold]], papers_held: dict[str, int]) -> str:
    """What the index left out, one line per failed check."""
    if not holds:
        return "_none_"
    lines = []
    for batch in sorted(holds):
        for hold in holds[batch]:
            lines.append(
                f"- `{batch}` ({papers_held.get(batch, 0)} papers): `{hold.check}` failed in run "
                f"`{hold.run_id[:8]}`: {hold.reason}"
            )
    return "\n".join(lines)
