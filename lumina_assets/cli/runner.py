"""Run the whole asset graph in order, the way `make demo` does: every asset in topological order, grouped into
runs by partitioning (unpartitioned, per ingest batch, per provider), recorded in the Dagster instance so the UI
shows the same runs, lineage and metadata."""

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg

from lumina_assets.core import settings
from lumina_assets.defs.partitions import INGEST_BATCHES

LIVE_HOSTS = (("api.openalex.org", 443), ("export.arxiv.org", 443))


def network_available(hosts=LIVE_HOSTS, timeout: float = 2.0) -> bool:
    """True when at least one live source answers a TCP connect (the demo's default mode crawls them)."""
    for host, port in hosts:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return True
        except OSError:
            continue
    return False


@dataclass
class StepReport:
    assets: list[str]
    partition: str | None
    seconds: float
    success: bool
    metadata: dict[str, dict] = field(default_factory=dict)
    error: str | None = None
    failed_checks: list[str] = field(default_factory=list)


def _layers(defs: dg.Definitions, groups: list[str] | None) -> list[tuple[list[dg.AssetKey], object]]:
    """Consecutive assets (topological order) that share a partitions definition run together."""
    graph = defs.resolve_asset_graph()
    layers: list[tuple[list[dg.AssetKey], object]] = []
    for key in graph.toposorted_asset_keys:
        node = graph.get(key)
        if not node.is_materializable or (groups and node.group_name not in groups):
            continue
        partitions = node.partitions_def
        if layers and layers[-1][1] == partitions:
            layers[-1][0].append(key)
        else:
            layers.append(([key], partitions))
    return layers


def _partition_keys(partitions, instance: dg.DagsterInstance) -> list[str | None]:
    if partitions is None:
        return [None]
    if isinstance(partitions, dg.DynamicPartitionsDefinition):
        return list(instance.get_dynamic_partitions(partitions.name))
    return list(partitions.get_partition_keys())


def materialize_step(
    assets: list,
    selection,
    *,
    instance: dg.DagsterInstance,
    resources: dict,
    partition: str | None = None,
    run_config: dict | None = None,
    log_level: str = "WARNING",
) -> StepReport:
    """One run of `selection` (asset keys or asset definitions) recorded on `instance`; failures are reported, not
    raised, with the cause of each failed step."""
    started = time.perf_counter()
    config = {"loggers": {"console": {"config": {"log_level": log_level}}}, **(run_config or {})}
    result = dg.materialize(
        assets,
        selection=selection,
        instance=instance,
        resources=resources,
        partition_key=partition,
        raise_on_error=False,
        run_config=config,
    )
    keys = selection.resolve(assets) if isinstance(selection, dg.AssetSelection) else None
    names = (
        sorted(k.to_user_string() for k in keys)
        if keys
        else [getattr(item, "key", item).to_user_string() for item in selection]
    )
    report = StepReport(
        assets=names, partition=partition, seconds=time.perf_counter() - started, success=result.success
    )
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        report.metadata[materialization.asset_key.to_user_string()] = {
            k: v.value for k, v in materialization.metadata.items()
        }
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            why = evaluation.description or _metadata_summary(evaluation.metadata)
            report.failed_checks.append(
                f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name}: {why}"
            )
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        report.error = "; ".join(f"{e.step_key}: {root_cause(e.step_failure_data.error)}" for e in failures)
        report.error = report.error or "run failed"
        if report.failed_checks:
            report.error += " (" + "; ".join(report.failed_checks) + ")"
    return report


def root_cause(error) -> str:
    """The innermost error of Dagster's chain ("Error occurred while executing op ..." wraps the exception
    that says which item failed and why), as `Type: message`, with the wrapper's last line when they differ."""
    if error is None:
        return "unknown error"
    innermost = error
    while getattr(innermost, "cause", None) is not None:
        innermost = innermost.cause

    def last_line(info) -> str:
        lines = (info.message or "").strip().splitlines()
        return lines[-1].strip() if lines else info.cls_name or "error"

    cause = last_line(innermost)
    if innermost is error:
        return cause
    return cause if innermost.cls_name in cause else f"{innermost.cls_name}: {cause}"


def _metadata_summary(metadata) -> str:
    shown = [f"{k}={getattr(v, 'value', v)}" for k, v in list(metadata.items())[:6]]
    return ", ".join(shown) or "failed"


def run_graph(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    *,
    groups: list[str] | None = None,
    on_step: Callable[[StepReport], None] | None = None,
    skip_partitions: Callable[[object, str], bool] | None = None,
    log_level: str = "WARNING",
) -> list[StepReport]:
    """Materialize the selected groups in dependency order; a failed step is reported and the rest go on
    unless they depend on it (Dagster skips those), so what was done is kept."""
    assets = [*defs.assets, *(defs.asset_checks or [])]
    reports = []
    for keys, partitions in _layers(defs, groups):
        for partition in _partition_keys(partitions, instance):
            if partition is not None and skip_partitions and skip_partitions(partitions, partition):
                continue
            report = materialize_step(
                assets,
                dg.AssetSelection.assets(*keys),
                instance=instance,
                resources=defs.resources,
                partition=partition,
                log_level=log_level,
            )
            report.assets = [k.to_user_string() for k in keys]
            reports.append(report)
            if on_step:
                on_step(report)
    return reports


def instance() -> dg.DagsterInstance:
    """The project's persistent instance (DAGSTER_HOME, default .dagster_home), so `make ui` shows every run the
    CLI started; the one way the CLI gets an instance."""
    settings.dagster_home().mkdir(parents=True, exist_ok=True)
    return dg.DagsterInstance.get()


__all__ = ["INGEST_BATCHES", "StepReport", "instance", "materialize_step", "network_available", "run_graph"]
