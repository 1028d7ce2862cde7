"""`kill -9` of a running benchmark's whole process group at three moments, then a rerun: the run completes, and the stand-in API
saw no successful request twice beyond those in flight at the kill (every answer is on disk as it arrives).
The stand-ins throttle with 429 + Retry-After and fail a share of requests with 5xx meanwhile."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from api_standins import StandInServer
from benchmark_slice import write_scifact_slice

from lumina_assets.core import settings

pytestmark = pytest.mark.slow

JUDGE_WORKERS = 4  # the judge's configured concurrency (--judge-concurrency): the most in flight at a kill


def _env(data_dir: Path, home: Path, server: StandInServer, scifact: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        {
            "LUMINA_DATA_DIR": str(data_dir),
            "DAGSTER_HOME": str(home),
            "LUMINA_CORPUS": str(scifact),
            "LUMINA_ALLOW_PRIVATE_URLS": "1",
            "OPENAI_COMPATIBLE_BASE_URL": server.url + "/v1",
            "LUMINA_JUDGE_MODEL": "gpt-4o",
            "LUMINA_QUESTION_BACKEND": "offline",
            "PYTHONPATH": str(settings.PROJECT_ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    return env


COMMAND = [
    sys.executable,
    "-c",
    "import sys; from lumina_assets.cli.main import main; sys.exit(main(sys.argv[1:]))",
    "benchmark",
    "run",
    "--providers",
    "bm25",
    "--synthetic",
    "0",
    "--beir-queries",
    "8",
    "--depths",
    "0",
    "--page-sizes",
    "5",
    "--calibration-queries",
    "3",
    "--judge-concurrency",
    str(JUDGE_WORKERS),
]


def _successes(server: StandInServer) -> collections.Counter:
    return collections.Counter(
        r["key"] for r in server.requests() if r["api"] == "openai" and r["status"] == 200
    )


def test_kill_and_resume_repeats_only_in_flight_requests(shared_data, data_dir, tmp_path):
    scifact = write_scifact_slice(shared_data, claims=8, distractors=40)
    home = tmp_path / "dagster_home"
    home.mkdir()
    with StandInServer(
        tmp_path / "requests.jsonl", latency_ms=30, throttle_every=7, error_rate=0.03
    ) as server:
        env = _env(data_dir, home, server, scifact)
        kills = []
        # kill three times, at seeded random moments: once the judge has been answered this often
        for threshold in sorted(random.Random(36).sample(range(5, 70), 3)):
            process = subprocess.Popen(
                COMMAND, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            deadline = time.monotonic() + 240
            while sum(_successes(server).values()) < threshold and process.poll() is None:
                assert time.monotonic() < deadline, "the run never reached the judge"
                time.sleep(0.05)
            assert process.poll() is None, process.stderr.read().decode()[-2000:]
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            process.stderr.close()
            kills.append(sum(_successes(server).values()))
        done = subprocess.run(
            COMMAND, env=env, start_new_session=True, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]

        successes = _successes(server)
        repeated = sum(n - 1 for n in successes.values() if n > 1)
        statuses = collections.Counter(r["status"] for r in server.requests())
    assert statuses[429] > 0 and statuses[500] + statuses[503] > 0  # faults were injected and survived
    assert sum(successes.values()) > kills[-1]  # the rerun went on from where the kills left it
    assert repeated <= JUDGE_WORKERS * len(kills)
    report = (data_dir / "reports" / "benchmark.md").read_text(encoding="utf-8")
    assert "| bm25 |" in report and "llm:openai-compatible:gpt-4o" in report
