"""`make ui` and `lumina serve` stop whole: after SIGINT or SIGTERM every process they started is gone within 10 s.

Each is started the two ways a user starts it: from a terminal (Ctrl-C sends SIGINT to the foreground process group)
and with `&` from a script, where the shell starts it with SIGINT ignored — `dagster dev` then ignored SIGTERM too
and its webserver, daemon and code servers kept running for minutes. Every process of the tree seen before the
signal (psutil: a process re-parented on the way is still followed) must be gone within STOP_WITHIN seconds."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from tools import missing_tool

from lumina_assets.core import settings

pytestmark = pytest.mark.slow

PROJECT = settings.PROJECT_ROOT
STOP_WITHIN = 10.0
LUMINA = str(Path(sys.executable).with_name("lumina"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(command: list[str], *, from_script: bool, log: Path, env: dict) -> subprocess.Popen:
    """`command` in a new session, as a terminal starts it or as `command & wait` in a non-interactive bash (which
    starts a background command with SIGINT ignored)."""
    argv = ["bash", "-c", f"{shlex.join(command)} & wait"] if from_script else command
    return subprocess.Popen(
        argv, cwd=PROJECT, env=env, start_new_session=True, stdout=log.open("w"), stderr=subprocess.STDOUT
    )


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _running_tree(root: subprocess.Popen, port: int, ready, log: Path, timeout: float = 240) -> list:
    """Every process seen in `root`'s tree until its port answers and `ready(command lines)` holds."""
    seen: dict[int, psutil.Process] = {}
    top = psutil.Process(root.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert root.poll() is None, (
            f"exited with {root.returncode} before it was ready:\n{log.read_text()[-3000:]}"
        )
        for process in [top, *top.children(recursive=True)]:
            seen.setdefault(process.pid, process)
        lines = []
        for process in seen.values():
            try:
                lines.append(" ".join(process.cmdline()))
            except psutil.Error:
                pass
        if _listening(port) and ready(lines):
            return list(seen.values())
        time.sleep(0.5)
    raise AssertionError(f"not ready in {timeout} s:\n{log.read_text()[-3000:]}")


def _stop_and_check(
    root: subprocess.Popen, tree: list, target: int, number: int, log: Path, port: int
) -> None:
    """Send `number` to `target` (a negative number: a process group); every process of `tree` must end in time."""
    try:
        if target < 0:
            os.killpg(-target, number)
        else:
            os.kill(target, number)
        started = time.monotonic()
        gone, alive = psutil.wait_procs(tree, timeout=STOP_WITHIN)
        took = time.monotonic() - started
        left = []
        for process in alive:
            try:
                left.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
            except psutil.Error:
                pass
        assert not left, (
            f"{len(left)} of {len(tree)} processes still running {took:.1f} s after {signal.Signals(number).name}:\n"
            + "\n".join(left)
            + f"\n--- log (without the daemon's ticks) ---\n{_log_tail(log)}"
        )
        assert not _listening(port)
    finally:
        for process in tree:
            try:
                process.kill()
            except psutil.Error:
                pass
        root.wait(timeout=10)


def _log_tail(log: Path, lines: int = 25) -> str:
    kept = [line for line in log.read_text().splitlines() if "dagster.daemon." not in line]
    return "\n".join(kept[-lines:])


def _dagster_ready(lines: list[str]) -> bool:
    """The webserver, the daemon and a code server's gRPC server are all up."""
    return all(
        any(mark in line for line in lines) for mark in ("dagster_webserver", "dagster._daemon", "api grpc")
    )


# (how it was started, what the user stops, the signal): Ctrl-C in the terminal; `kill -- -PGID` of a script's
# `make ui &`; and SIGINT to the `dagster dev` process itself, which left its daemon and code servers behind
MAKE_UI_CASES = [
    ("terminal", "group", signal.SIGINT),
    ("script", "group", signal.SIGTERM),
    ("script", "dagster dev", signal.SIGINT),
]


@pytest.mark.parametrize(("started", "stopped", "number"), MAKE_UI_CASES)
def test_make_ui_stops_every_process(tmp_path, started, stopped, number):
    if shutil.which("make") is None:
        missing_tool("GNU make is not installed")
    port = _free_port()
    env = dict(os.environ, LUMINA_UI_PORT=str(port))
    log = tmp_path / "ui.log"
    # `-o install`: the target as the user runs it, minus the install step that `make test` has just done
    command = ["make", "--no-print-directory", "-o", "install", "ui", f"VENV={sys.prefix}"]
    root = _start(command, from_script=started == "script", log=log, env=env)
    tree = _running_tree(root, port, _dagster_ready, log)
    if stopped == "group":
        target = -root.pid
    else:
        target = next(p.pid for p in tree if p.is_running() and p.cmdline()[2:4] == ["dev", "-h"])
    _stop_and_check(root, tree, target, number, log, port)


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> str:
    """A six-paper index built with the model `lumina serve` loads."""
    import polars as pl

    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.parsing.chunking import passages_for_paper

    uri = str(tmp_path_factory.mktemp("serve-index") / "lancedb")
    topics = [
        ("Vitamin D and bone density", "Vitamin D supplements raise bone density in older adults."),
        ("Aspirin and stroke", "Daily aspirin lowers the risk of a second stroke."),
        ("Citation graphs", "A graph neural network over citations recommends references."),
    ]
    papers, passages = [], []
    for i, (title, abstract) in enumerate(topics * 2):
        paper_id = f"doi:10.1/stop{i}"
        papers.append(
            {"paper_id": paper_id, "title": title, "abstract": abstract, "year": 2020, "source": "t"}
        )
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), Embedder())
    return uri


@pytest.mark.parametrize(
    ("started", "number"),
    [("terminal", signal.SIGINT), ("script", signal.SIGTERM), ("script", signal.SIGINT)],
)
def test_lumina_serve_stops_every_process(tmp_path, small_index, started, number):
    port = _free_port()
    log = tmp_path / "serve.log"
    command = [LUMINA, "serve", "--db", small_index, "--port", str(port), "--no-llm"]
    root = _start(command, from_script=started == "script", log=log, env=dict(os.environ))
    tree = _running_tree(root, port, lambda lines: True, log)
    serve = next(p for p in tree if p.cmdline()[1:3] == [LUMINA, "serve"])
    # the terminal's Ctrl-C reaches the whole group; a script's user signals the server's own PID
    target = -root.pid if started == "terminal" else serve.pid
    _stop_and_check(root, tree, target, number, log, port)
