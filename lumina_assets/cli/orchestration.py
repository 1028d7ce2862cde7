"""`lumina ui` (the Dagster UI, stopped whole by Ctrl-C / SIGTERM), `lumina pools apply|show` (per-pool concurrency
limits on the Dagster instance) and `lumina bench incremental` (the cost of adding one paper to an index of N against
indexing N from scratch)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lumina_assets.core import settings


def run_pools(args) -> int:
    from lumina_assets.cli.runner import instance as project_instance
    from sensors.pools import POOL_LIMITS, apply_pool_limits, current_pool_limits

    instance = project_instance()
    if args.action == "apply":
        applied = apply_pool_limits(instance)
        print(f"pool limits set on the instance at {instance.root_directory}:")
        for pool, limit in applied.items():
            print(f"  {pool:18} {limit}")
        return 0
    current = current_pool_limits(instance)
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    print(f"instance {instance.root_directory}: default limit for other pools = {default}")
    for pool in sorted(set(current) | set(POOL_LIMITS)):
        configured = current.get(pool, "unset (default applies)")
        print(f"  {pool:18} {configured}   (sensors/pools.py: {POOL_LIMITS.get(pool, '-')})")
    return 0


def run_ui(args) -> int:
    """`dagster dev` on this project's workspace with the pool limits applied; every process it starts (webserver,
    daemon, code servers) ends within seconds of Ctrl-C / SIGTERM / SIGHUP (see cli/process_tree.py)."""
    from lumina_assets.cli.process_tree import run_until_stopped

    if not Path(args.workspace).is_file():
        print(f"No {args.workspace} here: run `make ui` from the project folder.", file=sys.stderr)
        return 2
    from lumina_assets.cli.serve import unavailable_address

    unavailable = unavailable_address(args.host, args.port)
    if unavailable:
        print(
            f"Cannot open the UI on {args.host}:{args.port}: {unavailable} (make ui: LUMINA_UI_PORT).",
            file=sys.stderr,
        )
        return 2
    # in a child process, so that this supervisor never loads Dagster: its own exit then takes a moment, not seconds
    applied = subprocess.run([sys.executable, "-m", "lumina_assets.cli.main", "pools", "apply"], check=False)
    if applied.returncode:
        return applied.returncode
    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster), "dev", "-h", args.host, "-p", str(args.port), "-w", args.workspace]
    print(
        f"Dagster UI on http://{args.host}:{args.port}/  (Ctrl-C stops it and every process it started)",
        flush=True,
    )
    # SIGINT sent to `dagster dev` itself closes the web port first: the rest is then stopped within the grace
    local = "127.0.0.1" if args.host in ("0.0.0.0", "", "::") else args.host
    return run_until_stopped(command, grace_seconds=args.grace, serving=lambda: _accepts(local, args.port))


def _accepts(host: str, port: int) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def _collection_slice(corpus_dir: Path, n: int):
    from lumina_assets.corpus.collections import Collection, load_collection

    collection = load_collection(
        corpus_dir, split="train" if (corpus_dir / "qrels" / "train.tsv").exists() else "test"
    )
    docs = list(collection.corpus.items())
    if len(docs) < n + 1:
        raise SystemExit(f"{corpus_dir} has {len(docs)} documents; --n must be below that")
    return Collection(collection.name, dict(docs[: n + 1]), {}, {})


def run_bench_incremental(args) -> int:
    """Index N papers from scratch, then add one paper; the second run must embed only the new paper's passages."""
    from lumina_assets.corpus.collections import collection_tables
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder

    corpus_dir = Path(args.corpus) if args.corpus else settings.shared_data_dir() / "scifact"
    collection = _collection_slice(corpus_dir, args.n)
    embedder = Embedder(batch_size=64)
    embedder.model  # noqa: B018 - load once, outside every timing
    papers, passages = collection_tables(collection, embedder.token_counter())
    new_paper = papers["paper_id"][-1]
    base_papers = papers.head(args.n)
    base_passages = passages.filter(passages["paper_id"] != new_paper)
    new_passages = passages.height - base_passages.height

    full, add_one, unchanged, embedded = [], [], [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="lumina-bench-") as tmp:
            db = connect_lancedb(str(Path(tmp) / "lancedb"))
            started = time.perf_counter()
            indexing.index_corpus(db, base_passages, base_papers, embedder)
            full.append(time.perf_counter() - started)
            started = time.perf_counter()
            stats = indexing.index_corpus(db, passages, papers, embedder)
            add_one.append(time.perf_counter() - started)
            embedded.append(stats.passages_embedded)
            started = time.perf_counter()
            indexing.index_corpus(db, passages, papers, embedder)
            unchanged.append(time.perf_counter() - started)

    def fmt(values):
        return f"{statistics.median(values):8.2f} s" + (
            f"  (min {min(values):.2f}, max {max(values):.2f})" if len(values) > 1 else ""
        )

    print(f"corpus: {corpus_dir}  N={args.n} papers, {base_passages.height} passages; "
          f"model {embedder.model_name} on {embedder.device}; median of {args.repeats}")  # fmt: skip
    print(f"  index N from scratch            {fmt(full)}")
    print(f"  add 1 paper to the index of N   {fmt(add_one)}   embedded {embedded[0]} passages "
          f"(the new paper has {new_passages})")  # fmt: skip
    print(f"  re-run with nothing new         {fmt(unchanged)}")
    ratio = (
        statistics.median(full) / statistics.median(add_one) if statistics.median(add_one) else float("inf")
    )
    print(f"  adding one paper costs 1/{ratio:.0f} of a full index build")
    if any(e != new_passages for e in embedded):
        print(f"  WARNING: the incremental run embedded {embedded} passages, expected {new_passages}")
        return 1
    return 0


def add_commands(commands, bench_commands) -> None:
    ui = commands.add_parser(
        "ui", help="the Dagster UI (`dagster dev`) on this project; Ctrl-C stops all of it"
    )
    ui.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--workspace", default="workspace.yaml")
    ui.add_argument(
        "--grace",
        type=float,
        default=5.0,
        help="seconds dagster's processes get to shut down cleanly before they are killed (default 5)",
    )
    ui.set_defaults(handler=run_ui)

    pools = commands.add_parser("pools", help="per-pool concurrency limits for the external APIs")
    pools.add_argument(
        "action", choices=["apply", "show"], help="apply sensors/pools.py limits, or show them"
    )
    pools.set_defaults(handler=run_pools)

    bench = bench_commands.add_parser(
        "incremental", help="time to add 1 paper to an index of N papers vs indexing N from scratch"
    )
    bench.add_argument("--n", type=int, default=500, help="papers already in the index (default 500)")
    bench.add_argument("--repeats", type=int, default=1)
    bench.add_argument("--corpus", default="", help="BEIR / SMART directory (default ../shared/data/scifact)")
    bench.set_defaults(handler=run_bench_incremental)
