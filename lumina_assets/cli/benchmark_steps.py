"""How `lumina benchmark run` runs its steps: one materialization (`step`), the provider × shard chains in
`--workers` processes (`shard_steps`), and the batch sensor's ticks until no batch is open (`await_batches`)."""

from __future__ import annotations

import argparse
import sys
import time


def step(assets, selection, run_config, *, partition_key=None, instance, resources) -> bool:
    from lumina_assets.cli.runner import materialize_step

    names = {a.key.to_user_string() for a in selection}
    ops = {k: v for k, v in run_config["ops"].items() if k in names}
    report = materialize_step(
        assets,
        selection,
        instance=instance,
        resources=resources,
        partition=partition_key,
        run_config={"ops": ops},
    )
    if not report.success:
        print(f"step {sorted(names)} {partition_key or ''} failed: {report.error}", file=sys.stderr)
    return report.success


def run_resources(args: argparse.Namespace, judge_concurrency: int | None = None, **budget) -> dict:
    """The benchmark's resources with the command's limits; `judge_concurrency` (default `--judge-concurrency`)
    replaces the judge's."""
    from resources.llm import build_llm_resources
    from resources.providers import build_provider_resources

    llms = build_llm_resources(
        **budget,
        judge_rpm=args.judge_rpm,
        question_rpm=args.question_rpm,
        judge_concurrency=judge_concurrency or getattr(args, "judge_concurrency", None),
    )
    return {**llms, **build_provider_resources()}


SEARCHING = ("provider_results", "recursive_results")  # the steps that call the provider's search API
_WORKER: dict = {}  # a step process's resources and instance, built once (`_init_worker`)


def _init_worker(args: argparse.Namespace, budget: dict) -> None:
    """A step process: the run's resources, the judge's concurrency split between the `--workers` processes."""
    from lumina_assets.cli.runner import instance

    judge = run_resources(args, **budget)["judge_llm"]
    share = max(1, judge.resolved_concurrency() // max(1, args.workers))
    _WORKER.update(resources=run_resources(args, share, **budget), instance=instance())


def _worker_step(stage: str, partition: str, run_config: dict) -> bool:
    from lumina_assets.defs import benchmark

    selection = [a for a in benchmark.ASSETS if a.key.to_user_string() == stage]
    return step(
        benchmark.ASSETS + benchmark.CHECKS, selection, run_config, partition_key=partition, **_WORKER
    )


def next_step(chains, stages, progress: dict, running: list) -> tuple | None:
    """The next (chain, stage) to start: a searching step first (they pace the slower APIs), never a second one of a
    provider already searching, nor a chain already running."""
    busy = {chain for chain, _ in running}
    searching = {chain[0] for chain, stage in running if stage in SEARCHING}
    ready = [(c, stages[progress[c]]) for c in chains if c not in busy and progress[c] < len(stages)]
    ready = [(c, stage) for c, stage in ready if stage not in SEARCHING or c[0] not in searching]
    return min(ready, key=lambda item: item[1] not in SEARCHING, default=None)


def shard_steps(args, chains, stages, run_config, budget: dict, stop) -> bool:
    """Each (provider, shard) chain's `stages` in order, `args.workers` steps at once in as many processes, so one
    shard is judged while another is searched. A failed step ends its chain, the others go on; `stop()` (the
    budget) ends the submitting. Returns whether every step succeeded."""
    import concurrent.futures as cf
    import multiprocessing

    from lumina_assets.defs.partitions import provider_shard_key

    workers = max(1, args.workers)
    pool = None
    if workers > 1:
        pool = cf.ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(args, budget),
        )
    else:
        _init_worker(args, budget)
    progress = dict.fromkeys(chains, 0)
    running: dict[cf.Future, tuple[tuple[str, str], str, float]] = {}
    ok, stopped = True, False

    try:
        while True:
            while not stopped and len(running) < workers:
                ready = next_step(chains, stages, progress, [(c, stage) for c, stage, _ in running.values()])
                if ready is None:
                    break
                chain, stage = ready
                key = provider_shard_key(*chain)
                future: cf.Future = cf.Future()
                if pool is not None:
                    future = pool.submit(_worker_step, stage, key, run_config)
                else:
                    future.set_result(_worker_step(stage, key, run_config))
                running[future] = (chain, stage, time.monotonic())
            if not running:
                return ok
            for future in cf.wait(running, return_when=cf.FIRST_COMPLETED)[0]:
                chain, stage, began = running.pop(future)
                done = future.result()
                progress[chain] = progress[chain] + 1 if done else len(stages)
                ok = ok and done
                state = "done" if done else "failed"
                print(f"[benchmark] {stage} {provider_shard_key(*chain)} {state} in {time.monotonic() - began:.0f}s", flush=True)  # fmt: skip
            stopped = stopped or stop()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def await_batches(resources, instance, partitions: list[str], poll_seconds: float) -> None:
    """Ticks of `judge_batch_sensor` until no batch of these partitions is open."""
    import dagster as dg

    from evals import batch
    from lumina_assets.defs import benchmark
    from sensors.benchmark_batches import judge_batch_sensor

    definitions = dg.Definitions(assets=benchmark.ASSETS, sensors=[judge_batch_sensor], resources=resources)
    llms = {k: resources[k] for k in ("judge_llm", "question_llm")}
    while True:
        context = dg.build_sensor_context(
            instance=instance, instance_ref=instance.get_ref(), definitions=definitions, resources=llms
        )
        for event in judge_batch_sensor.evaluate_tick(context).asset_events or []:
            shown = {k: event.metadata[k].value for k in ("batch_id", "status", "answered", "missing")}
            print(f"[benchmark] batch {shown}", flush=True)
        if not any(r["partition"] in partitions for r in batch.open_records()):
            return
        time.sleep(poll_seconds)
