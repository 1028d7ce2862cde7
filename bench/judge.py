"""`lumina bench judge`: the configured LLM judge's agreement with SciFact's human qrels (its key needed)."""

from __future__ import annotations

import argparse
import time


def add_commands(commands, bench_commands) -> None:
    from evals import defaults

    judge = bench_commands.add_parser("judge", help="validate the configured LLM judge against qrels (kappa)")
    judge.add_argument(
        "--queries",
        type=int,
        default=defaults.CALIBRATION_QUERIES,
        help="SciFact train queries per half of the seeded split (the judge validates on the second half)",
    )
    judge.add_argument("--dir", default="", help="BEIR folder with qrels (default ../shared/data/scifact)")
    judge.add_argument(
        "--llm-queries",
        type=int,
        default=defaults.LLM_VALIDATION_QUERIES,
        help="held-out queries the LLM judge validates on",
    )
    judge.set_defaults(handler=bench_judge)


def bench_judge(args: argparse.Namespace) -> int:
    from pathlib import Path

    from evals import judge as judge_lib
    from evals import judge_validation
    from lumina_assets.cli.llm_client import env_llm_client
    from lumina_assets.core import settings

    client = env_llm_client("judge_llm")
    if client.is_offline:
        print(f"LLM judge not validated: {client.label} (set the judge's key; offline nothing is judged)")
        return 2
    folder = Path(args.dir) if args.dir else settings.shared_data_dir() / "scifact"
    started = time.monotonic()
    _, validation = judge_validation.labelled_pairs(folder, queries_per_split=args.queries)
    keep = sorted({p.query_id for p in validation})[: args.llm_queries]
    llm = judge_lib.LLMJudge(client)
    result = judge_validation.validate_judge(llm, [p for p in validation if p.query_id in keep])
    print(f"LLM judge {llm.name}: {result['summary']}; {client.usage.as_metadata('judge_llm')}")
    print(f"  ({time.monotonic() - started:.1f}s)")
    return 0
