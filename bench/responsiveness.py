"""`lumina bench responsiveness`: where a person waits on `lumina search` and `lumina serve`."""

from __future__ import annotations

import sys
import threading


def add_commands(commands, bench_commands) -> None:
    bench = bench_commands.add_parser(
        "responsiveness",
        help="where a person waits: `lumina search` in process and through a running `lumina serve`, and how "
        "long `lumina serve` takes to exit on Ctrl-C (idle and with a search in flight)",
    )
    bench.add_argument("--db", default=None, help="LanceDB URI (default: settings.lancedb_uri())")
    bench.add_argument("--query", default="how does SPECTER use citations for training")
    bench.add_argument("--runs", type=int, default=3, help="timed `lumina search` runs per path (default 3)")
    bench.set_defaults(handler=_bench_responsiveness)


def _bench_responsiveness(args) -> int:
    """Wall times of `lumina search` (a new process each time, as a person runs it) in process and through a
    running server, and of `lumina serve`'s exit after SIGINT."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import time
    import urllib.parse
    import urllib.request

    from lumina_assets.core import settings

    uri = args.db or settings.lancedb_uri()
    lumina = [sys.executable, "-m", "lumina_assets.cli.main"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}

    def timed_search(*extra: str) -> float:
        started = time.perf_counter()
        subprocess.run([*lumina, "search", "--db", uri, "-k", "5", *extra, args.query], check=True, **quiet)
        return time.perf_counter() - started

    def start_server(port: int) -> subprocess.Popen:
        command = [*lumina, "serve", "--db", uri, "--port", str(port), "--no-llm", "--no-sentence-backfill"]
        server = subprocess.Popen(command, start_new_session=True, **quiet)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1) as response:
                    if json.loads(response.read()).get("index") == "ready":
                        return server
            except OSError:
                time.sleep(0.2)
        os.killpg(server.pid, signal.SIGKILL)
        raise RuntimeError("lumina serve did not come up within 300 s")

    def exit_seconds(server: subprocess.Popen, in_flight: bool, port: int) -> float:
        if in_flight:  # a search the server is working on when Ctrl-C comes
            query = urllib.parse.urlencode({"q": args.query, "k": 50})
            threading.Thread(
                target=lambda: _ignore_errors(
                    lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/api/search?{query}", timeout=30)
                ),
                daemon=True,
            ).start()
            time.sleep(0.05)
        started = time.perf_counter()
        os.killpg(server.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        return time.perf_counter() - started

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    print(f"index {uri}; query {args.query!r}; {args.runs} runs each")
    cold = [timed_search("--in-process") for _ in range(args.runs)]
    server = start_server(port)
    try:
        warm = [timed_search("--server", f"http://127.0.0.1:{port}") for _ in range(args.runs)]
    finally:
        idle_exit = exit_seconds(server, False, port)
    server = start_server(port)
    busy_exit = exit_seconds(server, True, port)
    print("| what | seconds |")
    print("|---|---|")
    print(f"| `lumina search`, in process (new process each run) | {', '.join(f'{t:.2f}' for t in cold)} |")
    print(f"| `lumina search` through a running `lumina serve` | {', '.join(f'{t:.2f}' for t in warm)} |")
    print(f"| `lumina serve` exit after Ctrl-C, idle | {idle_exit:.2f} |")
    print(f"| `lumina serve` exit after Ctrl-C, a search in flight | {busy_exit:.2f} |")
    return 0


def _ignore_errors(call) -> None:
    try:
        call()
    except Exception:  # the server went away mid-request: what the bench provokes
        pass
