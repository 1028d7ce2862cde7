"""Run a long-lived command (`dagster dev`) so that a stop signal stops its whole process tree within seconds: the
first SIGINT / SIGTERM / SIGHUP is passed on as SIGINT, what is still alive after a grace period is killed, and on
Linux this process is the tree's subreaper so orphans are still found (why: docs/cli.md#lumina-ui)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import psutil

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def run_until_stopped(
    command: Sequence[str], *, grace_seconds: float = 5.0, serving: Callable[[], bool] | None = None
) -> int:
    """Run `command` until it exits, this process receives a stop signal, or `serving()` (polled twice a second)
    turns false after it was true — the command's own shutdown has begun (someone signalled it directly); then stop
    every process it started, the rest killed `grace_seconds` later. Returns the command's exit status, or 128 + the
    signal number when a signal stopped it (the shell's rule)."""
    received: list[int] = []
    times: list[float] = []

    def on_stop(signum, _frame) -> None:
        received.append(signum)
        times.append(time.monotonic())

    become_subreaper()
    # a Python handler (unlike an inherited SIG_IGN) resets to the default in the child at exec
    previous = {number: signal.signal(number, on_stop) for number in STOP_SIGNALS}
    what = " ".join([os.path.basename(command[0]), *command[1:2]])
    try:
        child = subprocess.Popen(list(command), start_new_session=True)
        try:
            _wait_for_stop(child, received, serving, what)
        finally:
            if received:
                name = signal.Signals(received[0]).name
                print(f"{name}: stopping {what} and every process it started", file=sys.stderr, flush=True)
            # Ctrl-C again while they shut down kills them now (not the copy `make` forwards at once)
            stop_descendants(
                child,
                grace_seconds=grace_seconds,
                interrupt=bool(received),
                hurry=lambda: len(times) > 1 and times[-1] - times[0] > 1.0,
            )
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 128 + received[0] if received else child.returncode


def _wait_for_stop(child: subprocess.Popen, received: list[int], serving, what: str) -> None:
    was_serving, next_check = False, 0.0
    while child.poll() is None and not received:
        _reap_orphans(child.pid)
        if serving is not None and time.monotonic() >= next_check:
            next_check = time.monotonic() + 0.5
            if serving():
                was_serving = True
            elif was_serving:
                print(f"{what} stopped serving: stopping what is left of it", file=sys.stderr, flush=True)
                return
        time.sleep(0.1)


def become_subreaper() -> bool:
    """Linux: orphaned descendants are re-parented to this process instead of init (prctl PR_SET_CHILD_SUBREAPER)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def stop_descendants(
    child: subprocess.Popen, *, grace_seconds: float, interrupt: bool = True, hurry=lambda: False
) -> None:
    """With `interrupt`, SIGINT to `child`'s process group and to each other descendant of this process (one each:
    a second SIGINT would cut dagster's own shutdown short); SIGKILL to all still alive after `grace_seconds`."""
    group = child.pid
    if interrupt:
        _signal_group(group, signal.SIGINT)
        for process in _descendants():
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                if os.getpgid(process.pid) != group:
                    process.send_signal(signal.SIGINT)
    if not _outlived(child, grace_seconds, hurry):
        return
    left = [p for p in _descendants() if _alive(p)]
    print(f"killing the {len(left)} processes still running", file=sys.stderr, flush=True)
    _signal_group(group, signal.SIGKILL)
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGKILL)
    _outlived(child, 2.0)
    try:
        child.wait(timeout=1)
    except subprocess.TimeoutExpired:
        print(f"{child.args[0]} (pid {child.pid}) survived SIGKILL", file=sys.stderr)


def _outlived(child: subprocess.Popen, seconds: float, hurry=lambda: False) -> bool:
    """Whether a descendant is still alive after up to `seconds`, or when `hurry()` (collecting those that ended
    on the way)."""
    deadline = time.monotonic() + seconds
    while True:
        child.poll()
        _reap_orphans(child.pid)
        if not any(_alive(p) for p in _descendants()):
            child.wait()
            return False
        if time.monotonic() >= deadline or hurry():
            return True
        time.sleep(0.1)


def _descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def _reap_orphans(child: int) -> None:
    """Collect the exit status of re-parented descendants that ended (the Popen child is Popen's to collect)."""
    for process in psutil.Process().children():
        if process.pid != child and not _alive(process):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(process.pid, os.WNOHANG)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal_group(group: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, number)
