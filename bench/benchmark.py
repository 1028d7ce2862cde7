"""`python bench/benchmark.py --questions 1000`: the benchmark at size against local stand-ins of its APIs.

Writes the SciFact corpus as the collection, N user questions (SciFact claims, repeated with a variant number
past the 1,109 there are), starts the stand-ins (tests/support/api_standins.py: OpenAI chat for the judge and the
refiner, Exa; latency, 429 + Retry-After, 5xx), prints `lumina benchmark plan`, runs `lumina benchmark run` with
providers bm25 and exa, and prints wall time, requests per API and status, repeated successful requests, the
judge's achieved rate against its configured limit, the run's peak RSS and plan vs actual.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]


def write_inputs(data_dir: Path, questions: int) -> Path:
    """The SciFact corpus as papers + passages, and a user query file of `questions` claims; returns the file."""
    os.environ["LUMINA_DATA_DIR"] = str(data_dir)
    from benchmark_slice import write_scifact_slice

    from lumina_assets.core import settings

    folder = write_scifact_slice(settings.shared_data_dir(), claims=0, distractors=10_000)
    claims = [
        json.loads(line)["text"] for line in (folder / "queries.jsonl").read_text().splitlines() if line
    ]
    lines = [
        claims[i % len(claims)] + ("" if i < len(claims) else f" (variant {i // len(claims)})")
        for i in range(questions)
    ]
    path = data_dir.parent / "questions.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main() -> int:
    if "--batch" in sys.argv[1:]:  # the batch path at size: bench/benchmark_batch.py
        sys.path.insert(0, str(ROOT / "bench"))
        from benchmark_batch import main as batch_main

        return batch_main(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--providers", default="bm25,exa")
    parser.add_argument("--depths", default="0,1")
    parser.add_argument("--page-sizes", default="10")
    parser.add_argument("--judge-rpm", type=float, default=6000.0, help="the judge's configured limit")
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--throttle-every", type=int, default=50)
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--work", default="", help="working folder (default: a new temporary one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from api_standins import StandInServer

    work = Path(args.work or tempfile.mkdtemp(prefix="lumina-bench-benchmark-"))
    data_dir = work / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (work / "dagster_home").mkdir(exist_ok=True)
    query_file = write_inputs(data_dir, args.questions)
    options = [
        "--providers", args.providers, "--synthetic", "0", "--beir-queries", "-1", "--depths", args.depths,
        "--page-sizes", args.page_sizes, "--judge-rpm", str(args.judge_rpm), "--calibration-queries", "3",
    ]  # fmt: skip
    cli = [
        sys.executable,
        "-c",
        "import sys; from lumina_assets.cli.main import main; sys.exit(main(sys.argv[1:]))",
    ]
    with StandInServer(
        work / "requests.jsonl",
        latency_ms=args.latency_ms,
        throttle_every=args.throttle_every,
        error_rate=args.error_rate,
    ) as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(
            {
                "LUMINA_DATA_DIR": str(data_dir),
                "DAGSTER_HOME": str(work / "dagster_home"),
                "LUMINA_USER_QUERIES": str(query_file),
                "LUMINA_ALLOW_PRIVATE_URLS": "1",
                "OPENAI_COMPATIBLE_BASE_URL": server.url + "/v1",
                "LUMINA_JUDGE_MODEL": "gpt-4o",
                "LUMINA_QUESTION_BACKEND": "offline",
                "LUMINA_EXA_URL": server.url,
                "EXA_API_KEY": "stand-in",
                "PYTHONPATH": str(ROOT),
            }
        )
        env.pop("LUMINA_CORPUS", None)
        planned = subprocess.run(
            [*cli, "benchmark", "plan", *options, "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        plan = json.loads(planned.stdout)
        started = time.monotonic()
        run = subprocess.run([*cli, "benchmark", "run", *options], env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        requests = server.requests()
    peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
        return run.returncode

    from evals import ledger

    actual = ledger.actual_by_plan_role([p.strip() for p in args.providers.split(",")])
    by_status = collections.Counter((r["api"], r["status"]) for r in requests)
    successes = collections.Counter((r["api"], r["key"]) for r in requests if r["status"] == 200)
    judge = [r["t"] for r in requests if r["api"] == "openai"]
    judge_minutes = (max(judge) - min(judge)) / 60 if len(judge) > 1 else 0.0
    achieved = len(judge) / judge_minutes if judge_minutes else 0.0
    figures = {
        "questions": args.questions,
        "providers": args.providers,
        "depths": args.depths,
        "page_sizes": args.page_sizes,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(peak_rss_mb),
        "requests": {f"{api} {status}": n for (api, status), n in sorted(by_status.items())},
        "repeated_successes": sum(n - 1 for n in successes.values() if n > 1),
        "judge_rpm_configured": args.judge_rpm,
        "judge_rpm_achieved": round(achieved),
        "plan_llm_calls": plan["llm_calls"],
        "actual_llm_calls": {r: v["calls"] + v["cache_hits"] for r, v in actual["llm"].items()},
        "plan_input_tokens": {r: v["input_tokens"] for r, v in plan["llm"].items()},
        "actual_input_tokens": {r: v["input_tokens"] for r, v in actual["llm"].items()},
        "plan_provider_requests": plan["provider_requests"],
        "actual_provider_requests": actual["provider_requests"],
        "load": os.getloadavg(),
        "work": str(work),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:>26}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
