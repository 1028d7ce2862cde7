"""snapshot → replay: a judged run archived in one file is scored again in a fresh data dir, in a process whose
every socket connection raises, into identical score tables and a report under that data dir's reports/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

import dagster as dg
import polars as pl
import pytest
from benchmark_slice import materialize_stages, write_scifact_slice
from mocked_benchmark_apis import StandInLLM, resources_with

from evals import runs
from lumina_assets.cli.main import main
from lumina_assets.core import settings
from lumina_assets.defs import benchmark

pytestmark = pytest.mark.slow

REPLAY_WITHOUT_NETWORK = """
import socket, sys

def refuse(*args, **kwargs):
    raise OSError("network refused: replay must not connect")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
from lumina_assets.cli.main import main
sys.exit(main(["benchmark", "replay", sys.argv[1]]))
"""


def test_snapshot_replays_offline_into_identical_scores(shared_data, data_dir, tmp_path):
    folder = write_scifact_slice(shared_data, claims=6, distractors=40)
    config = benchmark.default_run_config(
        synthetic=2, beir_queries=3, depths=[0, 1], page_sizes=[3], calibration_queries=3
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    config["ops"]["benchmark_scores"]["config"].update(
        {
            "providers": ["exa", "bm25"],
            "bootstrap_resamples": 200,
            "permutation_resamples": 500,
            "validation_queries_llm": 1,
            "calibration_dir": str(folder),
        }
    )
    stages = [
        ([benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions], [None]),
        ([benchmark.provider_results, benchmark.recursive_results, benchmark.judgments], ["exa", "bm25"]),
        ([benchmark.benchmark_scores, benchmark.benchmark_report], [None]),
    ]
    materialize_stages(resources_with(StandInLLM()), config, stages, dg.DagsterInstance.ephemeral())
    run = runs.latest()
    _, scores, _ = runs.read_run(run)
    assert scores["cr"].drop_nans().drop_nulls().len() > 0  # judged by the stand-in LLM

    archive = tmp_path / "run.tar.gz"
    assert main(["benchmark", "snapshot", "latest", "-o", str(archive)]) == 0
    with tarfile.open(archive) as packed:
        names = set(packed.getnames())
        verdicts = pl.read_parquet(packed.extractfile("verdicts/exa.parquet"))
    assert {
        "questions.parquet",
        "qrels.parquet",
        "run.json",
        "scores.parquet",
        "report/benchmark.md",
    } <= names
    assert any(n.startswith("raw/exa/") for n in names)  # Exa's raw responses
    with tarfile.open(archive) as packed:
        blob = b"".join(packed.extractfile(m).read() for m in packed.getmembers() if m.isfile())
    assert b"exa-test" not in blob and b"sk-test" not in blob  # no key in what a reader receives
    assert verdicts["relevance_prompt_sha256"].null_count() == 0 and set(verdicts["judge"]) == {
        "llm:openai:gpt-4o"
    }

    fresh = tmp_path / "reader"
    fresh.mkdir()
    env = {
        **os.environ,
        "LUMINA_DATA_DIR": str(fresh),
        "DAGSTER_HOME": str(tmp_path / "reader_home"),
        "PYTHONPATH": str(settings.PROJECT_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    done = subprocess.run(
        [sys.executable, "-c", REPLAY_WITHOUT_NETWORK, str(archive)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "score tables identical" in done.stdout
    replayed = pl.read_parquet(fresh / "benchmark" / "runs" / run / "scores.parquet")
    from polars.testing import assert_frame_equal

    assert_frame_equal(replayed, scores, check_exact=True)
    report = (fresh / "reports" / "runs" / run / "benchmark.md").read_text(encoding="utf-8")
    assert f"run `{run}`" in report and "| exa |" in report
    assert json.loads((fresh / "benchmark" / "runs" / run / "run.json").read_text())["run_id"] == run
