"""`lumina benchmark run` (materialize the benchmark group: questions, providers, recursion, judge, scores, report)
and `lumina bench judge` (calibrate the offline judge and print its agreement with SciFact's human qrels)."""

from __future__ import annotations

import argparse
import sys
import time


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def add_commands(commands, bench_commands) -> None:
    """Register subcommands on `lumina` and `lumina bench`; defaults from `evals.defaults` and `evals.registry`."""
    from evals import defaults, registry

    bench = commands.add_parser(
        "benchmark", help="run the CR/CP benchmark (questions → providers → judge → report)"
    )
    sub = bench.add_subparsers(dest="benchmark_command", required=True)
    run = sub.add_parser("run", help="materialize the benchmark group and print the headline table")
    run.add_argument(
        "--synthetic",
        type=int,
        default=defaults.SYNTHETIC_QUESTIONS,
        help="synthetic questions from sampled passages",
    )
    run.add_argument(
        "--beir-queries",
        type=int,
        default=defaults.BEIR_QUERIES,
        help="BEIR queries with qrels (LUMINA_CORPUS or the catalogue's BEIR folder): 0 = all held-out ones, "
        "N = a seeded sample of N, -1 = none",
    )
    run.add_argument(
        "--beir-subset",
        default=defaults.BEIR_SUBSET,
        choices=["heldout", "tuning", "all"],
        help="of a train-only split: the held-out half (default), the tuning half, or all (not headlined)",
    )
    run.add_argument(
        "--depths", type=_int_list, default=list(defaults.DEPTHS), help="recursion depths, e.g. 0,1,2"
    )
    run.add_argument(
        "--page-sizes", type=_int_list, default=list(defaults.PAGE_SIZES), help="page sizes p, e.g. 5,10"
    )
    run.add_argument(
        "--providers",
        default=",".join(registry.provider_names()),
        help="comma-separated; providers without a key are skipped with the reason",
    )
    run.add_argument(
        "--calibration-queries",
        type=int,
        default=defaults.CALIBRATION_QUERIES,
        help="SciFact queries per split for the offline judge",
    )
    run.set_defaults(handler=run_benchmark)
    listing = sub.add_parser("runs", help="list stored benchmark runs (each has its own report)")
    listing.set_defaults(handler=list_benchmark_runs)
    compare = sub.add_parser(
        "compare", help="two stored runs side by side (run ids from `lumina benchmark runs`)"
    )
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    compare.set_defaults(handler=compare_benchmark_runs)

    judge = bench_commands.add_parser(
        "judge", help="calibrate the offline judge and print judge agreement (kappa)"
    )
    judge.add_argument(
        "--queries", type=int, default=100, help="SciFact train queries per split (calibrate / validate)"
    )
    judge.add_argument("--dir", default="", help="BEIR folder with qrels (default ../shared/data/scifact)")
    judge.add_argument(
        "--llm", action="store_true", help="also validate the configured LLM judge (needs its key)"
    )
    judge.add_argument(
        "--llm-queries",
        type=int,
        default=defaults.LLM_VALIDATION_QUERIES,
        help="held-out queries the LLM judge validates on",
    )
    judge.add_argument(
        "--write-packaged",
        action="store_true",
        help="store the calibration in evals/calibration/ so runs on the same files reuse it",
    )
    judge.set_defaults(handler=bench_judge)


def _step(assets, selection, run_config, *, partition_key=None, instance, resources) -> bool:
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


def run_benchmark(args: argparse.Namespace) -> int:
    from evals import ledger
    from lumina_assets.cli.runner import instance as project_instance
    from lumina_assets.core import settings
    from lumina_assets.defs import benchmark

    instance = project_instance()
    resources = benchmark.build_resources()
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    config = benchmark.default_run_config(
        synthetic=args.synthetic,
        beir_queries=args.beir_queries,
        depths=args.depths,
        page_sizes=args.page_sizes,
        calibration_queries=args.calibration_queries,
        providers=providers,
        beir_subset=args.beir_subset,
    )
    assets = benchmark.ASSETS + benchmark.CHECKS
    started = time.monotonic()
    question_assets = [benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions]
    if not _step(assets, question_assets, config, instance=instance, resources=resources):
        return 1
    provider_assets = [benchmark.provider_results, benchmark.recursive_results, benchmark.judgments]
    for provider in providers:
        print(f"[benchmark] provider {provider}", flush=True)
        _step(assets, provider_assets, config, partition_key=provider, instance=instance, resources=resources)
    if not _step(
        assets,
        [benchmark.benchmark_scores, benchmark.benchmark_report],
        config,
        instance=instance,
        resources=resources,
    ):
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
        headline = [
            line
            for line in report.read_text(encoding="utf-8").splitlines()
            if line.startswith("**Headline.**")
        ]
        print("\n" + "\n".join(headline))
    if run is not None:
        manifest, scores, _ = runs.read_run(run)
        for name in ("synthetic", "beir", "user"):
            if name in set(scores["question_set"].to_list()):
                print(f"\n{name}:\n" + headline_table(scores, name, offline=manifest["judge_offline"]))
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
        print(exc, file=sys.stderr)
        return 1
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200):
        print(table)
    return 0


def bench_judge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from evals import judge as judge_lib
    from evals import judge_calibration as calibration
    from lumina_assets.core import settings

    folder = Path(args.dir) if args.dir else settings.shared_data_dir() / "scifact"
    started = time.monotonic()
    embedder = calibration.default_embedder()
    thresholds, validation = calibration.calibrate_offline_judge(
        embedder, folder, queries_per_split=args.queries
    )
    offline = judge_lib.OfflineJudge(embedder, thresholds)
    result = calibration.validate_judge(offline, validation)
    print(f"offline judge calibrated on {thresholds.calibrated_on}: {thresholds.calibration_pairs} pairs")
    print(
        f"  thresholds: CR cosine >= {thresholds.relevance:.3f}, CP sentence cosine >= {thresholds.precision:.3f}"
    )
    print(f"  calibration kappa {thresholds.calibration_kappa:.3f}")
    print(f"  held-out agreement with human qrels: {result['summary']}")
    print(f"  ({time.monotonic() - started:.1f}s)")
    if args.write_packaged:
        fingerprint = calibration.calibration_fingerprint(folder, args.queries)
        thresholds.validation = {**result, "fingerprint": fingerprint}
        target = calibration.PACKAGED_CALIBRATIONS / f"offline_judge_{fingerprint}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(thresholds.to_json() + "\n", encoding="utf-8")
        print(f"  written to {target}")
    if args.llm:
        from lumina_assets.cli.llm_client import env_llm_client

        client = env_llm_client("judge_llm")
        if client.is_offline:
            print(f"LLM judge not validated: {client.label}")
        else:
            keep = sorted({p.query_id for p in validation})[: args.llm_queries]
            llm = judge_lib.LLMJudge(client)
            result = calibration.validate_judge(llm, [p for p in validation if p.query_id in keep])
            print(f"LLM judge {llm.name}: {result['summary']}; {client.usage.as_metadata('judge_llm')}")
    return 0
