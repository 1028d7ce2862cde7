"""`python bench/benchmark.py --batch --questions 10000`: the benchmark's batch path at size against local stand-ins.

Writes N user questions (SciFact claims, repeated with a variant number past the 1,109 there are) into a fresh data
dir holding an indexed collection (`--index-from`: a data dir whose papers, passages and lancedb index are copied;
default: the SciFact corpus written as papers + passages, which serves bm25 but not lumina), starts the stand-ins
(tests/support/api_standins.py: the OpenAI Batch API with its files endpoint for the judge, Exa), prints
`lumina benchmark plan`, then `lumina benchmark run --batch`: the questions, each provider × shard's
`provider_results`, `recursive_results` and `judge_batch`, ticks of `judge_batch_sensor` until no batch is open,
`judgments` from the cache, `benchmark_scores` and `benchmark_report`. Prints wall time, the peak RSS of the run's
processes, requests per API, batches submitted, and plan vs actual.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]

CLI = [
    sys.executable,
    "-c",
    "import sys; from lumina_assets.cli.main import main; sys.exit(main(sys.argv[1:]))",
]


def _options(args: argparse.Namespace) -> list[str]:
    return [
        "--providers", args.providers, "--synthetic", "0", "--beir-queries", "-1", "--depths", args.depths,
        "--page-sizes", args.page_sizes, "--judge-rpm", str(args.judge_rpm), "--calibration-queries", "3",
        "--shard-size", str(args.shard_size),
    ]  # fmt: skip


def write_inputs(data_dir: Path, questions: int, index_from: str) -> Path:
    """The collection (copied from `index_from`, else the SciFact corpus as papers + passages) and a user query
    file of `questions` claims; returns the file."""
    os.environ["LUMINA_DATA_DIR"] = str(data_dir)
    from lumina_assets.core import settings

    folder = settings.shared_data_dir() / "scifact"
    if index_from:
        source = Path(index_from)
        shutil.copytree(source / "lancedb", data_dir / "lancedb")
        for name in ("models",):
            if (source / name).exists():
                shutil.copytree(source / name, data_dir / name)
        (data_dir / "tables").mkdir(exist_ok=True)
        for name in ("papers.parquet", "passages", "passages_state", "papers.inputs"):
            path = source / "tables" / name
            if path.is_dir():
                shutil.copytree(path, data_dir / "tables" / name)
            elif path.exists():
                shutil.copy2(path, data_dir / "tables" / name)
    else:
        from benchmark_slice import write_scifact_slice

        folder = write_scifact_slice(settings.shared_data_dir(), claims=0, distractors=10_000)
    from bench.benchmark import write_questions

    return write_questions(folder, data_dir.parent / "questions.txt", questions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", action="store_true", help="(the flag bench/benchmark.py hands over with)")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--providers", default="lumina,exa")
    parser.add_argument("--depths", default="0")
    parser.add_argument("--page-sizes", default="10")
    parser.add_argument("--shard-size", type=int, default=500)
    parser.add_argument("--judge-rpm", type=float, default=6000.0, help="the synchronous judge's limit")
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--throttle-every", type=int, default=50)
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--batch-polls", type=int, default=1, help="polls a stand-in batch stays in progress")
    parser.add_argument("--poll-seconds", type=float, default=2.0, help="between the sensor's ticks")
    parser.add_argument("--index-from", default="", help="a data dir with an indexed collection to copy")
    parser.add_argument("--work", default="", help="working folder (default: a new temporary one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workers", type=int, default=2, help="provider × shard steps at once")
    args = parser.parse_args(argv)

    from api_standins import StandInServer

    work = Path(args.work or tempfile.mkdtemp(prefix="lumina-bench-batch-"))
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (work / "dagster_home").mkdir(exist_ok=True)
    query_file = write_inputs(data_dir, args.questions, args.index_from)
    load_start = os.getloadavg()
    with StandInServer(
        work / "requests.jsonl",
        latency_ms=args.latency_ms,
        throttle_every=args.throttle_every,
        error_rate=args.error_rate,
        extra=("--batch-polls", str(args.batch_polls)),
    ) as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            {
                "LUMINA_DATA_DIR": str(data_dir),
                "DAGSTER_HOME": str(work / "dagster_home"),
                "LUMINA_USER_QUERIES": str(query_file),
                "LUMINA_ALLOW_PRIVATE_URLS": "1",
                "LUMINA_JUDGE_BACKEND": "openai",
                "LUMINA_JUDGE_MODEL": "gpt-4o",
                "OPENAI_API_KEY": "stand-in",
                "OPENAI_BASE_URL": server.url + "/v1",
                "LUMINA_QUESTION_BACKEND": "offline",
                "LUMINA_EXA_URL": server.url,
                "EXA_API_KEY": "stand-in",
                "PYTHONPATH": str(ROOT),
            }
        )
        env.pop("LUMINA_CORPUS", None)
        env.pop("OPENAI_COMPATIBLE_BASE_URL", None)
        planned = subprocess.run(
            [*CLI, "benchmark", "plan", *_options(args), "--json"], env=env, capture_output=True, text=True
        )
        if planned.returncode != 0:
            print(planned.stderr[-3000:], file=sys.stderr)
            return planned.returncode
        plan = json.loads(planned.stdout)
        started = time.monotonic()
        run = subprocess.run(
            [*CLI, "benchmark", "run", *_options(args), "--batch", "--workers", str(args.workers),
             "--poll-seconds", str(args.poll_seconds)],
            env=env,
        )  # fmt: skip
        wall = time.monotonic() - started
        requests = server.requests()
    peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if run.returncode != 0:
        return run.returncode

    from bench.benchmark import plan_vs_actual, print_figures
    from evals import ledger

    actual = ledger.actual_by_plan_role([p.strip() for p in args.providers.split(",")])
    records = [
        json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((data_dir / "benchmark" / "batches").glob("*.json"))
    ]
    by_status = collections.Counter((r["api"], r["status"]) for r in requests)
    successes = collections.Counter((r["api"], r["key"]) for r in requests if r["status"] == 200)
    figures = {
        "questions": args.questions,
        "providers": args.providers,
        "depths": args.depths,
        "page_sizes": args.page_sizes,
        "shard_size": args.shard_size,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(peak_rss_mb),
        "batches": len(records),
        "batch_requests": sum(len(r["requests"]) for r in records),
        "batch_answered": sum(r["answered"] for r in records),
        "largest_batch": max((len(r["requests"]) for r in records), default=0),
        "batch_input_tokens": sum(r.get("input_tokens", 0) for r in records),
        "batch_output_tokens": sum(r.get("output_tokens", 0) for r in records),
        "requests": {f"{api} {status}": n for (api, status), n in sorted(by_status.items())},
        "repeated_successes": sum(
            n - 1
            for (api, _), n in successes.items()
            if n > 1 and api not in ("openai_batches", "openai_files")
        ),
        **plan_vs_actual(plan, actual),
        "plan_usd_batch": plan.get("usd_batch"),
        "load_start": load_start,
        "load_end": os.getloadavg(),
        "work": str(work),
    }
    print_figures(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
