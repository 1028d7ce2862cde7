"""`python bench/benchmark.py --questions 1000`: the benchmark at size against local stand-ins of its APIs.

Writes the SciFact corpus as the collection, N user questions (SciFact claims, repeated with a variant number
past the 1,109 there are), starts the stand-ins (tests/support/api_standins.py: OpenAI chat for the judge and the
refiner, Exa; latency, 429 + Retry-After, 5xx, and each API held to the rate it allows: the OpenAI stand-in to
--judge-rpm, which Lumina's judge is configured with, Exa to --exa-rpm, Exa's documented 10 requests/s that Lumina
ships with), prints `lumina benchmark plan`, runs `lumina benchmark run` with providers bm25 and exa, and prints
wall time, requests per API and status, repeated successful requests, per role (judge, refiner, graded, exa) the
requests per minute achieved against the rate allowed, over its whole span and while it was busy (its stages:
bursts of requests), each API's share of its rate over the run (first request to last), the pooled-judging
share, the run's peak RSS and plan vs actual. `--shard-size` and `--workers` are passed to the run.
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
    return write_questions(folder, data_dir.parent / "questions.txt", questions)


def write_questions(folder: Path, path: Path, questions: int) -> Path:
    """`questions` user queries at `path`: the BEIR folder's claims, repeated with a variant number past its count."""
    claims = [
        json.loads(line)["text"] for line in (folder / "queries.jsonl").read_text().splitlines() if line
    ]
    lines = [
        claims[i % len(claims)] + ("" if i < len(claims) else f" (variant {i // len(claims)})")
        for i in range(questions)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GAP_S = 3.0  # a pause this long between two requests of one role ends a burst (a stage of the run)


def bursts(times: list[float]) -> list[tuple[float, float, int]]:
    """(start, end, requests) of each run of requests with no pause longer than GAP_S."""
    out: list[tuple[float, float, int]] = []
    for t in sorted(times):
        if out and t - out[-1][1] <= GAP_S:
            out[-1] = (out[-1][0], t, out[-1][2] + 1)
        else:
            out.append((t, t, 1))
    return out


def achieved_rates(times: list[float], allowed_rpm: float) -> dict[str, float | int]:
    """Requests per minute over the whole span of `times` and over its bursts only (idle gaps left out), each
    also as a share of the rate allowed."""
    spans = bursts(times)
    span_min = (max(times) - min(times)) / 60 if len(times) > 1 else 0.0
    busy_min = sum(b - a for a, b, n in spans if n > 1) / 60
    busy_n = sum(n for _, _, n in spans if n > 1)
    over_span = len(times) / span_min if span_min else 0.0
    while_busy = busy_n / busy_min if busy_min else 0.0
    return {
        "requests": len(times),
        "rpm_over_span": round(over_span),
        "share_over_span": round(over_span / allowed_rpm, 3) if allowed_rpm else 0.0,
        "rpm_while_busy": round(while_busy),
        "share_while_busy": round(while_busy / allowed_rpm, 3) if allowed_rpm else 0.0,
    }


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
    parser.add_argument(
        "--judge-concurrency",
        type=int,
        default=0,
        help="judge requests in flight (default: derived from the rate)",
    )
    parser.add_argument(
        "--exa-rpm", type=float, default=600.0, help="the rate the Exa stand-in allows (Lumina's Exa default)"
    )
    parser.add_argument("--shard-size", type=int, default=500, help="questions per shard (a unit of work)")
    parser.add_argument("--workers", type=int, default=2, help="provider × shard steps at once")
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
        "--shard-size", str(args.shard_size), "--workers", str(args.workers),
        *(["--judge-concurrency", str(args.judge_concurrency)] if args.judge_concurrency else []),
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
        rpm={"openai": args.judge_rpm, "exa": args.exa_rpm},
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
    by_status = collections.Counter(
        (r["api"], f"{r['status']}{' ' + r['why'] if r.get('why') else ''}") for r in requests
    )
    successes = collections.Counter((r["api"], r["key"]) for r in requests if r["status"] == 200)
    allowed = {"openai": args.judge_rpm, "exa": args.exa_rpm}
    rates = {}
    for role, api in (("judge", "openai"), ("refiner", "openai"), ("graded", "openai"), ("exa", "exa")):
        times = [r["t"] for r in requests if r["api"] == api and r.get("role", "exa") == role]
        rates[role] = achieved_rates(times, allowed[api])
    rates["openai (every role)"] = achieved_rates(
        [r["t"] for r in requests if r["api"] == "openai"], allowed["openai"]
    )
    t0 = min((r["t"] for r in requests), default=0.0)
    run_min = (max((r["t"] for r in requests), default=t0) - t0) / 60
    for api in allowed:  # over the run: from the first request to any API to the last
        sent = sum(1 for r in requests if r["api"] == api)
        rates[f"{api} over the run"] = round(sent / run_min / allowed[api], 3) if run_min else 0.0
    stages = {
        role: [(round(a - t0), round(b - t0), n) for a, b, n in bursts([r["t"] for r in requests if r.get("role", r["api"]) == role])]
        for role in ("refiner", "judge", "graded", "exa")
    }  # fmt: skip
    from evals import runs

    run_id = runs.latest()
    pooled = runs.read_run(run_id)[0].get("pooled") or {} if run_id else {}
    providers = [p.strip() for p in args.providers.split(",")]
    top = max(int(p) for p in args.page_sizes.split(","))
    graded_sent = len({r["key"] for r in requests if r.get("role") == "graded" and r["status"] == 200})
    figures = {
        "questions": args.questions,
        "shard_size": args.shard_size,
        "workers": args.workers,
        "providers": args.providers,
        "depths": args.depths,
        "page_sizes": args.page_sizes,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(peak_rss_mb),
        "requests": {f"{api} {status}": n for (api, status), n in sorted(by_status.items())},
        "repeated_successes": sum(n - 1 for n in successes.values() if n > 1),
        "allowed_rpm": allowed,
        "judge_concurrency": args.judge_concurrency or "derived",
        "achieved_rpm": rates,
        "stages (start s, end s, requests)": stages,
        "pool_items": pooled.get("pool_items"),
        "pooled_graded_prompts_sent": graded_sent,
        "pooled_share": round(graded_sent / (args.questions * len(providers) * top), 3),
        **plan_vs_actual(plan, actual),
        "load": os.getloadavg(),
        "work": str(work),
    }
    print_figures(figures, as_json=args.json)
    return 0


def plan_vs_actual(plan: dict, actual: dict) -> dict:
    """The plan's calls, tokens and provider requests beside the run's (`ledger.actual_by_plan_role`)."""
    return {
        "plan_llm_calls": plan["llm_calls"],
        "actual_llm_calls": {r: v["calls"] + v["cache_hits"] for r, v in actual["llm"].items()},
        "plan_input_tokens": {r: v["input_tokens"] for r, v in plan["llm"].items()},
        "actual_input_tokens": {r: v["input_tokens"] for r, v in actual["llm"].items()},
        "plan_provider_requests": plan["provider_requests"],
        "actual_provider_requests": actual["provider_requests"],
    }


def print_figures(figures: dict, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:>26}: {value}")


if __name__ == "__main__":
    sys.exit(main())
