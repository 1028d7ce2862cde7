"""The limited child process every PDF goes through: a function over its wall time, over its memory, or dying
by a signal ends as an Outcome with the reason; the parent lives on and the next call works."""

from __future__ import annotations

import os

import hostile

from lumina_assets.core.sandbox import Limits, run_limited


def test_result_comes_back_from_a_child_process():
    outcome = run_limited(hostile.answer, 42, limits=Limits(wall_seconds=30, memory_mb=256))
    assert outcome.ok and outcome.value["value"] == 42
    assert outcome.value["pid"] != os.getpid()
    assert outcome.peak_rss_mb and outcome.peak_rss_mb > 0


def test_wall_time_limit_kills_the_child():
    outcome = run_limited(hostile.sleep_forever, limits=Limits(wall_seconds=0.5, memory_mb=0))
    assert (outcome.reason, outcome.ok) == ("time_limit", False)
    assert outcome.seconds < 10


def test_memory_limit_refuses_the_allocation():
    outcome = run_limited(hostile.allocate_mb, 512, limits=Limits(wall_seconds=30, memory_mb=128))
    assert outcome.reason == "memory_limit"
    within = run_limited(hostile.allocate_mb, 32, limits=Limits(wall_seconds=30, memory_mb=128))
    assert within.ok and within.value == 32 * 1024 * 1024


def test_a_child_killed_by_a_signal_is_a_recorded_crash():
    outcome = run_limited(hostile.die_by_signal, limits=Limits(wall_seconds=30))
    assert outcome.reason == "worker_crashed" and "signal 9" in outcome.detail
    assert run_limited(hostile.answer, 1).ok  # the next document is unaffected
