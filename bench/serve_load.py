"""A bounded load generator for the search API: `clients` threads, each with its own HTTP connection, send searches
back to back for `seconds` (never more than `clients` requests in flight) and record latency and failures."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from evals.latency import percentile_ms


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "throughput_rps": round(self.requests / max(self.seconds, 1e-9), 2),
            "p50_ms": round(percentile_ms(self.latencies, 50), 1),
            "p95_ms": round(percentile_ms(self.latencies, 95), 1),
            "max_ms": round(max(self.latencies, default=0.0) * 1000, 1),
            "error_samples": self.error_samples[:5],
        }


def run_load(
    base_url: str,
    queries: list[str],
    *,
    clients: int = 20,
    seconds: float = 60.0,
    k: int = 10,
    timeout: float = 120.0,
) -> LoadResult:
    import httpx

    if not base_url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]")):
        raise ValueError("the load generator only targets a server on this machine (127.0.0.1)")
    result = LoadResult()
    lock = threading.Lock()
    source = itertools.cycle(queries)
    deadline = time.monotonic() + seconds

    def client() -> None:
        with httpx.Client(base_url=base_url, timeout=timeout, trust_env=False) as http:
            while time.monotonic() < deadline:
                with lock:
                    query = next(source)
                started = time.perf_counter()
                try:
                    response = http.post("/api/search", json={"query": query, "k": k})
                    ok = response.status_code == 200 and "results" in response.json()
                    problem = None if ok else f"HTTP {response.status_code}: {response.text[:200]}"
                except Exception as error:  # every failure counts
                    problem = f"{type(error).__name__}: {error}"
                elapsed = time.perf_counter() - started
                with lock:
                    result.requests += 1
                    result.latencies.append(elapsed)
                    if problem:
                        result.errors += 1
                        result.error_samples.append(problem)

    started = time.monotonic()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + timeout + 30)
    result.seconds = time.monotonic() - started
    return result


def serve_in_thread(app, port: int = 0):
    """(uvicorn server, its thread, port) serving `app` on 127.0.0.1 from a daemon thread, started; port 0 picks a
    free one. Stop it with `server.should_exit = True` and join the thread."""
    import socket

    import uvicorn

    if not port:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, port
