"""Full-text (BM25) index builds under a memory cap (`LUMINA_FTS_MEMORY_MB`), with the build's peak resident memory.

A large table builds in a child process started with small read-ahead, two malloc arenas and the builder's share
of the cap (Lance and glibc read those at process start; docs/embedding.md); a small one in process."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from lumina_assets.core import settings

# The tokenizer every full-text index is built with; search-side mirrors read the same settings.
TOKENIZER = {
    "with_position": False,
    "stem": True,
    "remove_stop_words": True,
    "ascii_folding": True,
    "lower_case": True,
}

# Resident memory of the build process besides the token builder: interpreter and lancedb import, read buffers,
# batches and allocator slack with the settings below (measured; docs/embedding.md)
BUILD_OVERHEAD_MB = 320
# ... plus per-row document bookkeeping the builder keeps for the whole table (ids and token counts)
OVERHEAD_BYTES_PER_ROW = 20
MIN_BUILDER_MB = 16
# Settings of the child process that keep the scan and the allocator small (read at process start).
CHILD_SETTINGS = {
    "LANCE_DEFAULT_IO_BUFFER_SIZE": str(32 << 20),
    "LANCE_DEFAULT_FRAGMENT_READAHEAD": "1",
    "LANCE_DEFAULT_BATCH_SIZE": "1024",
    "MALLOC_ARENA_MAX": "2",
}
# What an in-process one-shot build grows by on small tables: a multiple of its text plus a base
IN_PROCESS_GROWTH_PER_TEXT_MB = 4
IN_PROCESS_BASE_MB = 64


@dataclass
class FtsBuild:
    """One full-text index build: its column, peak resident memory, seconds and how it ran."""

    column: str
    peak_rss_mb: float  # the child's peak resident memory, or this process's growth in process
    seconds: float
    cap_mb: int
    separate_process: bool
    text_mb: float  # estimated size of the indexed text

    def line(self) -> str:
        where = "separate process" if self.separate_process else "in process"
        return (
            f"full-text index on {self.column}: {self.seconds:.1f} s, peak {self.peak_rss_mb:.0f} MB "
            f"(cap {self.cap_mb} MB, {where}, ~{self.text_mb:.0f} MB of text)"
        )


def machine_memory_mb() -> int:
    return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20)


def memory_cap_mb() -> int:
    """`LUMINA_FTS_MEMORY_MB`, or a quarter of the machine's memory between 1 GB and 8 GB."""
    configured = settings.get().embedding.fts_memory_mb
    if configured is not None:
        return max(1, configured)
    return min(8192, max(1024, machine_memory_mb() // 4))


def builder_mb(cap_mb: int, rows: int = 0) -> int:
    """LanceDB's memory_limit for the token builder: the cap less what the rest of the build holds."""
    overhead = BUILD_OVERHEAD_MB + rows * OVERHEAD_BYTES_PER_ROW / 2**20
    return max(MIN_BUILDER_MB, int(cap_mb - overhead))


def text_mb(table, column: str, sample: int = 2000) -> float:
    """Indexed text size, estimated from the first `sample` rows' mean length."""
    rows = table.count_rows()
    if not rows:
        return 0.0
    texts = table.search().select([column]).limit(min(rows, sample)).to_arrow()[column].to_pylist()
    mean = sum(len((t or "").encode()) for t in texts) / max(len(texts), 1)
    return rows * mean / 2**20


def local_database(table) -> tuple[str, str] | None:
    """(database folder, table name) of a table on local disk; None on object storage, whose credentials a child
    process should not be handed on its command line."""
    uri = str(table.uri).removeprefix("file://")
    if "://" in uri or not uri.endswith(".lance"):
        return None
    folder, _, name = uri.rstrip("/").rpartition("/")
    return folder, name.removesuffix(".lance")


def build_fts(table, column: str, cap_mb: int | None = None) -> FtsBuild:
    """Create the full-text index on `column` under `cap_mb` (default `memory_cap_mb()`), replacing any."""
    cap = cap_mb or memory_cap_mb()
    builder = builder_mb(cap, table.count_rows())
    size = text_mb(table, column)
    location = local_database(table)
    in_process = location is None or IN_PROCESS_GROWTH_PER_TEXT_MB * size + IN_PROCESS_BASE_MB <= builder
    started = time.perf_counter()
    if in_process:
        peak = _build_here(table, column, builder)
    else:
        peak = _build_in_child(*location, column, builder)
        table.checkout_latest()  # this handle sees the index the child committed
    return FtsBuild(
        column, round(peak, 1), round(time.perf_counter() - started, 2), cap, not in_process, size
    )


def _create(table, column: str, builder: int) -> None:
    from lancedb.index import FTS

    table.create_index(column, config=FTS(**TOKENIZER, memory_limit=builder), replace=True)


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _build_here(table, column: str, builder: int) -> float:
    """Build in this process; returns the growth of its resident memory (sampled every 10 ms)."""
    base = peak = _rss_mb()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.01):
            peak = max(peak, _rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        _create(table, column, builder)
    finally:
        done.set()
        sampler.join()
    return max(peak, _rss_mb()) - base


def _build_in_child(folder: str, name: str, column: str, builder: int) -> float:
    """Build in a child process started with `CHILD_SETTINGS`; returns its peak resident memory."""
    command = [sys.executable, "-m", "lumina_assets.indexing.fts_build", folder, name, column, str(builder)]
    result = subprocess.run(
        command, capture_output=True, text=True, env=settings.child_environment(**CHILD_SETTINGS), check=False
    )
    if result.returncode:
        tail = "\n".join(result.stderr.strip().splitlines()[-6:])
        raise RuntimeError(
            f"full-text index build on {name}.{column} failed (exit {result.returncode}):\n{tail}"
        )
    return float(json.loads(result.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def main(argv: list[str]) -> None:
    """Child entry point: build the index, print the process's peak resident memory as JSON."""
    import lancedb

    folder, name, column, builder = argv
    _create(lancedb.connect(folder).open_table(name), column, int(builder))
    print(json.dumps({"peak_rss_mb": round(peak_rss_mb(), 1)}))


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, which starts afresh at exec (`ru_maxrss` carries over the
    parent's resident size from the fork, which would report a large caller's size as the build's)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform != "darwin" else 2**20)


if __name__ == "__main__":
    main(sys.argv[1:])
