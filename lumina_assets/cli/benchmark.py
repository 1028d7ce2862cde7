"""`lumina benchmark run|plan|snapshot|replay|runs|compare`: the benchmark group materialized, planned and its
stored runs read."""

from __future__ import annotations

import argparse
import sys
import time

from lumina_assets.cli.benchmark_steps import await_batches, run_resources, shard_steps, step
from lumina_assets.cli.messages import fail


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def add_commands(commands, bench_commands) -> None:
    bench = commands.add_parser(
        "benchmark", help="run the CR/CP benchmark (questions → providers → judge → report)"
    )
    sub = bench.add_subparsers(dest="benchmark_command", required=True)
    run = sub.add_parser("run", help="materialize the benchmark group and print the headline table")
    _add_run_options(run)
    run.add_argument(
        "--poll-seconds",
        type=float,
        default=60.0,
        help="with --batch: seconds between polls of the open batches",
    )
    run.set_defaults(handler=run_benchmark)
    plan = sub.add_parser(
        "plan", help="calls, tokens, USD and wall time the run with these options would take (calls nothing)"
    )
    _add_run_options(plan)
    plan.add_argument(
        "--user-queries",
        type=int,
        default=None,
        help="plan for N user queries (default: the count in LUMINA_USER_QUERIES' files)",
    )
    plan.add_argument(
        "--assume-keys",
        action="store_true",
        help="plan the run as if every provider's and LLM's key were set (the configured backends and models)",
    )
    plan.add_argument("--json", action="store_true", help="the plan as JSON")
    plan.set_defaults(handler=plan_benchmark)
    snapshot = sub.add_parser(
        "snapshot", help="one archive of a stored run: questions, responses, verdicts, qrels, scores, report"
    )
    snapshot.add_argument("run", help="a run id from `lumina benchmark runs` (or `latest`)")
    snapshot.add_argument("-o", "--output", required=True, help="the archive to write (.tar.gz)")
    snapshot.set_defaults(handler=snapshot_benchmark)
    replay = sub.add_parser(
        "replay", help="score an archived run again offline and write its report into the data dir's reports/"
    )
    replay.add_argument("archive")
    replay.set_defaults(handler=replay_benchmark)
    listing = sub.add_parser("runs", help="list stored benchmark runs (each has its own report)")
    listing.set_defaults(handler=list_benchmark_runs)
    compare = sub.add_parser(
        "compare", help="two stored runs side by side (run ids from `lumina benchmark runs`)"
    )
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.set_defaults(handler=compare_benchmark_runs)


def _add_run_options(parser) -> None:
    """The options `run` and `plan` share."""
    from evals import defaults, registry

    parser.add_argument(
        "--budget",
        type=float,
        default=0.0,
        help="USD: refuse a run whose plan costs more, and stop (resumable) once the counted spend reaches it",
    )
    parser.add_argument(
        "--shard-size",
        type=int,
        default=defaults.SHARD_SIZE,
        help="questions per new shard (each provider × shard is a partition; recorded shards never change)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="provider × shard steps run at once, in as many processes (a provider's searches one at a time; "
        "the judge's concurrency is split between them)",
    )
    parser.add_argument(
        "--batch",
        action="store_true",
        help="judge through the batch APIs: submit, poll until every batch ended, then judge from the cache",
    )
    parser.add_argument(
        "--judge-rpm",
        type=float,
        default=None,
        help="requests per minute to the judge's API, shared by the run's processes (default: judge_llm's)",
    )
    parser.add_argument(
        "--judge-concurrency",
        type=int,
        default=None,
        help="judge / refiner requests in flight at once (default: judge_llm's, derived from its rate limit)",
    )
    parser.add_argument(
        "--question-rpm",
        type=float,
        default=None,
        help="requests per minute to the question generator's API (default: question_llm's)",
    )
    parser.add_argument(
        "--synthetic",
        type=int,
        default=defaults.SYNTHETIC_QUESTIONS,
        help="synthetic questions from sampled passages",
    )
    parser.add_argument(
        "--beir-queries",
        type=int,
        default=defaults.BEIR_QUERIES,
        help="BEIR queries with qrels (LUMINA_CORPUS or the catalogue's BEIR folder): 0 = all held-out ones, "
        "N = a seeded sample of N, -1 = none",
    )
    parser.add_argument(
        "--beir-subset",
        default=defaults.BEIR_SUBSET,
        choices=["heldout", "tuning", "all"],
        help="of a train-only split: the held-out half (default), the tuning half, or all (not headlined)",
    )
    parser.add_argument(
        "--depths", type=_int_list, default=list(defaults.DEPTHS), help="recursion depths, e.g. 0,1,2"
    )
    parser.add_argument(
        "--page-sizes", type=_int_list, default=list(defaults.PAGE_SIZES), help="page sizes p, e.g. 5,10"
    )
    parser.add_argument(
        "--providers",
        default=",".join(registry.provider_names()),
        help="comma-separated; providers without a key are skipped with the reason",
    )
    parser.add_argument(
        "--calibration-queries",
        type=int,
        default=defaults.CALIBRATION_QUERIES,
        help="SciFact train queries per half of the LLM judge's validation split (it validates on the second half)",
    )


def _providers(args: argparse.Namespace) -> list[str]:
    return [p.strip() for p in args.providers.split(",") if p.strip()]


def _plan(args: argparse.Namespace, resources, *, exact: bool = True) -> dict:
    from evals import plan as plan_lib
    from evals import plan_inputs
    from lumina_assets.core import settings

    inputs = plan_inputs.inputs_from_environment(
        resources,
        synthetic=args.synthetic,
        beir_queries=args.beir_queries,
        beir_subset=args.beir_subset,
        providers=_providers(args),
        depths=args.depths,
        page_sizes=args.page_sizes,
        user_queries=getattr(args, "user_queries", None),
        recursion_llm=settings.get().benchmark.recursion_llm,
        assume_keys=getattr(args, "assume_keys", False),
        count_stored=exact,
    )
    return plan_lib.build_plan(inputs)


def plan_benchmark(args: argparse.Namespace) -> int:
    import json

    from evals import plan as plan_lib

    plan = _plan(args, run_resources(args))
    print(json.dumps(plan, indent=2) if args.json else plan_lib.format_plan(plan))
    if args.budget > 0 and plan["usd_sync"] > args.budget:
        print(f"over the budget of ${args.budget:,.2f}: `run` would refuse it", file=sys.stderr)
    return 0


def _budget_file(args: argparse.Namespace) -> str:
    """One spend ledger per run grid, so a rerun of a stopped run goes on counting where it stopped."""
    from lumina_assets.core import settings
    from lumina_assets.core.ids import short_hash

    grid = f"{sorted(_providers(args))}|{args.synthetic}|{args.beir_queries}|{args.beir_subset}|{args.depths}|{args.page_sizes}"
    return str(settings.benchmark_dir() / "budget" / f"{short_hash(grid, length=16)}.json")


def _check_budget(args: argparse.Namespace, plan: dict) -> str | None:
    """Why the run is refused under --budget, or None."""
    from evals.budget import Budget

    spent = Budget(_budget_file(args), args.budget).spent()
    if spent >= args.budget:
        return f"budget ${args.budget:,.2f} already spent on this run (${spent:,.4f} counted); raise --budget to resume"
    if plan["usd_sync"] > args.budget:
        return (
            f"the plan costs ${plan['usd_sync']:,.2f} at synchronous list prices, over the budget of "
            f"${args.budget:,.2f} (see `lumina benchmark plan`)"
        )
    return None


def run_benchmark(args: argparse.Namespace) -> int:
    from evals import ledger, shards
    from evals.budget import Budget
    from lumina_assets.cli.runner import instance as project_instance
    from lumina_assets.core import settings, tables
    from lumina_assets.defs import benchmark
    from lumina_assets.defs.partitions import provider_shard_key

    instance = project_instance()
    budget_file = _budget_file(args) if args.budget > 0 else ""
    budget = {"budget_usd": args.budget, "budget_file": budget_file}
    resources = run_resources(args, **budget)
    providers = _providers(args)
    plan = _plan(args, resources, exact=False)  # the estimate: quick whatever the size of what is stored
    if args.budget > 0:
        refused = _check_budget(args, plan)
        if refused:
            return fail(f"[benchmark] refused: {refused}")
        if not plan["usd_sync_complete"]:
            print(
                "[benchmark] some prices are unknown: the budget counts only the priced calls",
                file=sys.stderr,
            )
    ledger.write_plan(plan)
    calls = ", ".join(f"{role} {n:,}" for role, n in plan["llm_calls"].items())
    print(
        f"[benchmark] plan: LLM calls {calls}; provider requests {sum(plan['provider_requests'].values()):,}; "
        f"${plan['usd_sync']:,.2f}{'' if plan['usd_sync_complete'] else ' + unknown'} at list price",
        flush=True,
    )

    def budget_spent() -> bool:
        return bool(budget_file) and Budget(budget_file, args.budget).spent() >= args.budget

    def stopped() -> int:
        return fail(
            f"[benchmark] budget ${args.budget:,.2f} reached: stopped; every answer so far is cached, so "
            "rerunning with a larger --budget resumes without repeating a call",
            3,
        )

    config = benchmark.default_run_config(
        synthetic=args.synthetic,
        beir_queries=args.beir_queries,
        depths=args.depths,
        page_sizes=args.page_sizes,
        calibration_queries=args.calibration_queries,
        providers=providers,
        beir_subset=args.beir_subset,
        shard_size=args.shard_size,
    )
    assets = benchmark.ASSETS + benchmark.CHECKS
    started = time.monotonic()
    question_assets = [benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions]
    if not step(assets, question_assets, config, instance=instance, resources=resources):
        return stopped() if budget_spent() else 1
    current = shards.current(tables.read(tables.QUESTIONS)["question_id"].to_list())
    chains = [(provider, shard) for shard in current for provider in providers]
    print(f"[benchmark] {len(current)} shards × {len(providers)} providers", flush=True)
    stages = ("provider_results", "recursive_results", "judge_batch" if args.batch else "judgments")
    shard_steps(args, chains, stages, config, budget, budget_spent)
    if args.batch and not budget_spent():
        await_batches(resources, instance, [provider_shard_key(*c) for c in chains], args.poll_seconds)
        shard_steps(args, chains, ("judgments",), config, budget, budget_spent)
    if budget_spent():
        return stopped()
    scoring = [benchmark.benchmark_scores, benchmark.benchmark_report]
    if not step(assets, scoring, config, instance=instance, resources=resources):
        return 1
    from evals import runs
    from evals.report import headline_table

    run = runs.latest()
    report = settings.reports_dir() / "runs" / str(run) / "benchmark.md"
    print(f"\nbenchmark finished in {time.monotonic() - started:.0f}s; run {run}; report: {report}")
    agreement = ledger.read_agreement()
    if agreement:
        print(f"judge: {agreement.get('judge')}\njudge agreement: {agreement.get('summary')}")
    if report.exists():
        lines = report.read_text(encoding="utf-8").splitlines()
        print("\n" + "\n".join(line for line in lines if line.startswith("**Headline.**")))
    if run is not None:
        manifest, scores, _ = runs.read_run(run)
        for name in ("synthetic", "beir", "user"):
            if name in set(scores["question_set"].to_list()):
                print(f"\n{name}:\n" + headline_table(scores, name, offline=manifest["judge_offline"]))
    return 0


def snapshot_benchmark(args: argparse.Namespace) -> int:
    from pathlib import Path

    from evals import runs, snapshot

    run = runs.latest() if args.run == "latest" else args.run
    try:
        contents = snapshot.write_snapshot(run or "", Path(args.output))
    except (FileNotFoundError, ValueError) as exc:
        return fail(exc, 1)
    print(f"run {run}: {len(contents['files'])} files in {args.output}")
    return 0


def replay_benchmark(args: argparse.Namespace) -> int:
    from pathlib import Path

    from evals import snapshot

    result = snapshot.replay(Path(args.archive))
    print(f"run {result['run_id']} replayed offline; report: {result['report']}")
    if not result["identical"]:
        print(
            "score tables differ from the archived ones: " + "; ".join(result["differences"]), file=sys.stderr
        )
        return 1
    print("score tables identical to the archived ones")
    return 0


def list_benchmark_runs(args: argparse.Namespace) -> int:
    from evals import runs
    from lumina_assets.core import settings

    for manifest in runs.list_runs():
        print(
            f"{manifest['run_id']}  {manifest.get('created', '')[:16]}  providers={','.join(manifest['providers'])}  "
            f"depths={manifest['depths']}  p={manifest['page_sizes']}  judge={manifest['judge']}  "
            f"report={settings.reports_dir() / 'runs' / manifest['run_id'] / 'benchmark.md'}"
        )
    return 0


def compare_benchmark_runs(args: argparse.Namespace) -> int:
    import polars as pl

    from evals import runs

    try:
        table = runs.compare_runs(args.run_a, args.run_b)
    except FileNotFoundError as exc:
        return fail(exc, 1)
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200):
        print(table)
    return 0
