"""Run the asset graph in order, as `make demo` does: one run per asset group (split where partitioning changes), by
the stage's named job where there is one, recorded in the Dagster instance so the UI shows the same runs."""

import graphlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg

from lumina_assets.core import settings
from lumina_assets.defs.loggers import TERMINAL_LOGGER
from lumina_assets.defs.partitions import PROVIDER_SHARDS, current_provider_shards


def live_source_urls() -> list[str]:
    return [settings.get().network.openalex_url, settings.get().network.arxiv_url]


def network_available(urls: list[str] | None = None, timeout: float = 5.0) -> bool:
    """True when at least one live source answers an HTTP request, any status; through the HTTP layer, so proxies
    and mirrors count."""
    from lumina_assets.core.http import unreachable_reason

    return any(
        unreachable_reason(url, timeout) is None for url in (urls if urls is not None else live_source_urls())
    )


@dataclass
class StepReport:
    assets: list[str]
    partition: str | None
    seconds: float
    success: bool
    metadata: dict[str, dict] = field(default_factory=dict)
    error: str | None = None
    failed_checks: list[str] = field(default_factory=list)
    job: str | None = None  # the named job that ran, when there is one


def _layers(defs: dg.Definitions, groups: list[str] | None) -> list[tuple[list[dg.AssetKey], object]]:
    """Runs in pipeline order: groups in dependency order, each group's assets topologically, split where the
    partitions definition changes."""
    graph = defs.resolve_asset_graph()
    order = graph.toposorted_asset_keys
    by_group: dict[str, list[dg.AssetKey]] = {}
    group_deps: dict[str, set[str]] = {}
    for key in order:
        node = graph.get(key)
        if not node.is_materializable or (groups and node.group_name not in groups):
            continue
        by_group.setdefault(node.group_name, []).append(key)
        group_deps.setdefault(node.group_name, set())
        for parent in node.parent_keys:
            parent_group = graph.get(parent).group_name if graph.has(parent) else None
            if parent_group and parent_group != node.group_name and (not groups or parent_group in groups):
                group_deps[node.group_name].add(parent_group)
    sorter = graphlib.TopologicalSorter(group_deps)
    first_seen = {group: i for i, group in enumerate(by_group)}
    sorter.prepare()
    ordered_groups: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=first_seen.get)
        ordered_groups += ready
        sorter.done(*ready)
    layers: list[tuple[list[dg.AssetKey], object]] = []
    for group in ordered_groups:
        start = len(layers)
        for key in by_group[group]:
            partitions = graph.get(key).partitions_def
            if len(layers) > start and layers[-1][1] == partitions:
                layers[-1][0].append(key)
            else:
                layers.append(([key], partitions))
    return layers


def job_for(defs: dg.Definitions, keys: list[dg.AssetKey]) -> str | None:
    """The named job whose selection is exactly these assets, if the Definitions have one."""
    wanted = set(keys)
    for job in defs.resolve_all_job_defs():
        if job.name.startswith("__"):
            continue
        if set(job.asset_layer.selected_asset_keys) == wanted:
            return job.name
    return None


def _partition_keys(partitions, instance: dg.DagsterInstance) -> list[str | None]:
    if partitions is None:
        return [None]
    if partitions == PROVIDER_SHARDS:  # the shards of the current questions, not every shard ever recorded
        return list(current_provider_shards())
    return list(partitions.get_partition_keys(dynamic_partitions_store=instance))


def materialize_step(
    assets: list,
    selection,
    *,
    instance: dg.DagsterInstance,
    resources: dict,
    partition: str | None = None,
    run_config: dict | None = None,
) -> StepReport:
    """One run of `selection` (asset keys or definitions) on `instance`; failures are reported, not raised."""
    started = time.perf_counter()
    config = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}, **(run_config or {})}
    result = dg.materialize(
        assets,
        selection=selection,
        instance=instance,
        resources=resources,
        partition_key=partition,
        raise_on_error=False,
        run_config=config,
    )
    names = [getattr(item, "key", item).to_user_string() for item in selection]
    return _report(result, names, partition, started)


def run_job(
    defs: dg.Definitions,
    job_name: str,
    *,
    instance: dg.DagsterInstance,
    partition: str | None = None,
    run_config: dict | None = None,
    tags: dict[str, str] | None = None,
    terminal: bool = False,
) -> StepReport:
    """One run of a named job of `defs` on `instance`; with `terminal`, the assets' INFO lines are printed."""
    started = time.perf_counter()
    loggers = {"console": {"config": {"log_level": "CRITICAL" if terminal else "WARNING"}}}
    if terminal:
        loggers[TERMINAL_LOGGER] = {}
    job = defs.resolve_job_def(job_name)
    result = job.execute_in_process(
        run_config={"loggers": loggers, **(run_config or {})},
        instance=instance,
        partition_key=partition,
        tags={"lumina/trigger": "cli", **(tags or {})},
        raise_on_error=False,
    )
    keys = sorted(job.asset_layer.selected_asset_keys)
    report = _report(result, [k.to_user_string() for k in keys], partition, started)
    report.job = job_name
    return report


def _report(result, names: list[str], partition, started) -> StepReport:
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
            shown = [f"{k}={getattr(v, 'value', v)}" for k, v in list(evaluation.metadata.items())[:6]]
            why = evaluation.description or ", ".join(shown) or "failed"
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
    """The innermost error of Dagster's chain (the one that says what failed and why), as `Type: message`."""
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


def run_graph(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    *,
    groups: list[str] | None = None,
    on_step: Callable[[StepReport], None] | None = None,
    terminal: bool = False,
    on_start: Callable[[list[str], str | None, str | None], None] | None = None,
) -> list[StepReport]:
    """Materialize the selected groups in dependency order; a failed step is reported and the rest go on
    unless they depend on it (Dagster skips those), so what was done is kept."""
    assets = [*defs.assets, *(defs.asset_checks or [])]
    reports = []
    for keys, partitions in _layers(defs, groups):
        for partition in _partition_keys(partitions, instance):
            name = job_for(defs, keys)
            if on_start:
                on_start([k.to_user_string() for k in keys], partition, name)
            if name is not None:
                report = run_job(defs, name, instance=instance, partition=partition, terminal=terminal)
                report.assets = [k.to_user_string() for k in keys]
            else:
                report = materialize_step(
                    assets, keys, instance=instance, resources=defs.resources, partition=partition
                )
            reports.append(report)
            if on_step:
                on_step(report)
    return reports


def instance() -> dg.DagsterInstance:
    """The project's persistent instance (DAGSTER_HOME), so `make ui` shows every run the CLI started."""
    settings.dagster_home().mkdir(parents=True, exist_ok=True)
    return dg.DagsterInstance.get()
