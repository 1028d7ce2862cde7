"""`lumina bench scale --json`: one JSON object per size and store with the keys the issue names, for a tiny
synthetic index, with the in-memory store and a baseline revision (this checkout's HEAD, exported by git) beside
the index-backed one, and the paired comparison with the baseline. Figures are printed, never asserted against
targets (timing is not a test)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from tools import missing_tool

from lumina_assets.cli.main import main

KEYS = {
    "size", "build_s", "ann_build_s", "first_query_s", "rss_mb", "p50_ms", "p95_ms", "recall_at_10",
    "build_peak_rss_mb", "fts_peak_rss_mb", "fts_build_s",
}  # fmt: skip


def test_bench_scale_json_lines(capsys, shared_data):
    if (
        shutil.which("git") is None
        or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True).returncode
    ):
        missing_tool("git with this checkout's history (the baseline is exported from it)")
    code = main(
        [
            "bench", "scale", "--passages", "1500", "--queries", "5", "--sentences", "400",
            "--baseline", "HEAD", "--paired-queries", "12", "--json",
        ]
    )  # fmt: skip
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    rows = [line for line in lines if "store" in line]
    assert [row["store"] for row in rows] == ["LanceStore", "MemoryStore", "HEAD (baseline)"]
    (paired,) = [line for line in lines if "paired_with" in line]
    assert (
        paired["paired_with"] == "HEAD" and paired["queries"] == 12
    )  # 12 claims, each asked of both engines
    assert 0 < paired["p50_ms"] <= paired["p95_ms"] and 0 < paired["baseline_p50_ms"]
    assert 0 <= paired["faster_share"] <= 1
    for row in rows:
        assert KEYS <= set(row)
        assert row["size"] == 1500
        assert row["first_query_s"] > 0 and row["rss_mb"] > 50
        assert 0 < row["p50_ms"] <= row["p95_ms"]
        assert row["ann_build_s"] == 0  # below the ANN threshold nothing is trained
        assert row["recall_at_10"] == pytest.approx(1.0)  # exact search at this size
        # the build's peak is this process's, so at least what the full-text phase held
        assert row["build_peak_rss_mb"] >= row["fts_peak_rss_mb"] > 50 and row["fts_build_s"] > 0


def test_bench_scale_names_a_baseline_git_cannot_export(capsys, shared_data):
    if shutil.which("git") is None:
        missing_tool("git (the baseline is exported from this checkout's history)")
    code = main(["bench", "scale", "--passages", "1500", "--queries", "2", "--sentences", "400",
                 "--baseline", "no-such-revision", "--json"])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert "cannot export baseline 'no-such-revision'" in error and "Traceback" not in error
