"""`lumina bench judge`: calibrate the offline judge and print its agreement with SciFact's human qrels."""

from __future__ import annotations

import argparse
import time


def add_commands(commands, bench_commands) -> None:
    from evals import defaults

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
