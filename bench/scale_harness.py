"""`lumina bench scale`: synthetic indexes of N passages built the way the indexer builds them, then the figures
that decide whether search holds a real corpus: build and ANN build time, first query in a new process, resident
memory after warm-up, latency over real queries, and recall@10 of the ANN path against exact search.

Texts are real SciFact sentences (2-4 consecutive sentences of an abstract per passage). Vectors are not random
(random 384-d vectors have no neighbourhoods, which makes ANN recall meaningless): each passage vector is the
normalized mean of its sentences' MiniLM vectors plus a little noise, so the vector distribution is a real one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from evals.latency import percentile_ms

NOISE = 0.01
WRITE_BATCH = 50_000
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


class BenchError(RuntimeError):
    """A measured process failed; the message ends with what it printed last on stderr."""


def _run(command: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run` that raises BenchError naming `what` and the process's last stderr lines."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode:
        tail = "\n".join((result.stderr or "").strip().splitlines()[-8:])
        raise BenchError(f"{what} failed (exit {result.returncode}):\n{tail}")
    return result


@dataclass
class ScaleFigures:
    size: int
    store: str
    build_s: float
    ann_build_s: float
    first_query_s: float
    rss_mb: float
    p50_ms: float
    p95_ms: float
    recall_at_10: float
    build_peak_rss_mb: float = 0.0
    fts_peak_rss_mb: float = 0.0
    fts_build_s: float = 0.0
    index_cache: str = ""  # the search process's index cache policy (search/index_cache.py)


class PeakMemory:
    """Peak resident memory of this process per build phase, sampled by a thread: `ru_maxrss` only knows the peak of
    the whole life of a process, and the phases (writing rows, the full-text index, the ANN index) differ by
    gigabytes at 10M passages."""

    def __init__(self, interval_s: float = 0.1):
        import psutil

        self._process = psutil.Process()
        self._interval = interval_s
        self._phase = "start"
        self.peaks_mb: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="peak-memory", daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._record()

    def phase(self, name: str) -> None:
        self._record()
        self._phase = name

    def _record(self) -> None:
        rss = self._process.memory_info().rss / 2**20
        self.peaks_mb[self._phase] = max(self.peaks_mb.get(self._phase, 0.0), rss)

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            self._record()

    @property
    def overall_mb(self) -> float:
        return max(self.peaks_mb.values(), default=0.0)


def sentence_pool(corpus_file: Path, cache: Path, embedder, limit: int = 20_000):
    """(sentences, their vectors, abstract boundaries) from a BEIR corpus, vectors cached on disk."""
    sentences: list[str] = []
    starts: list[int] = []
    with corpus_file.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            parts = [s for s in _SENTENCE.split(record.get("text") or "") if len(s.split()) >= 4]
            if len(parts) < 2:
                continue
            starts.append(len(sentences))
            sentences += parts
            if len(sentences) >= limit:
                break
    cache.mkdir(parents=True, exist_ok=True)
    vectors_file = cache / f"sentences-{len(sentences)}.npy"
    if vectors_file.exists():
        vectors = np.load(vectors_file)
    else:
        vectors = np.asarray(embedder.encode(sentences), dtype=np.float32)
        np.save(vectors_file, vectors)
    return sentences, vectors, np.asarray(starts + [len(sentences)])


def synthetic_batch(
    start: int, count: int, pool, rng: np.random.Generator, dim: int
) -> tuple[pa.Table, np.ndarray]:
    """`count` passages (5 per paper) with the index's passage columns, and their vectors."""
    from lumina_assets.indexing.index_rows import passage_schema
    from lumina_assets.indexing.table_ops import vector_array

    sentences, vectors, starts = pool
    texts, matrix = [], np.empty((count, dim), dtype=np.float32)
    abstracts = rng.integers(0, len(starts) - 1, size=count)
    for row, abstract in enumerate(abstracts):
        first, end = starts[abstract], starts[abstract + 1]
        length = int(rng.integers(2, 5))
        begin = int(rng.integers(first, max(first + 1, end - length + 1)))
        chosen = range(begin, min(begin + length, end))
        texts.append(" ".join(sentences[i] for i in chosen))
        mean = vectors[list(chosen)].mean(axis=0) + rng.normal(0, NOISE, size=dim)
        matrix[row] = mean / np.linalg.norm(mean)
    ids = [f"syn:{(start + i) // 5}#{(start + i) % 5 + 1}:0" for i in range(count)]
    papers = [f"syn:{(start + i) // 5}" for i in range(count)]
    years = pa.array([1990 + (start + i) // 5 % 35 for i in range(count)], pa.int32())
    schema = passage_schema(dim)
    columns = {
        "passage_id": ids,
        "paper_id": papers,
        "kind": ["text"] * count,
        "section_number": [str((start + i) % 5 + 1) for i in range(count)],
        "section_title": ["Results"] * count,
        "text": texts,
        "search_text": [f"Paper {p}\n{t}" for p, t in zip(papers, texts, strict=True)],
        "prev_id": [None if (start + i) % 5 == 0 else ids[i - 1] if i else None for i in range(count)],
        "next_id": [
            None if (start + i) % 5 == 4 else f"syn:{(start + i) // 5}#{(start + i) % 5 + 2}:0"
            for i in range(count)
        ],
        "title": [f"Paper {p}" for p in papers],
        "doi": [None] * count,
        "url": [None] * count,
        "year": years,
        "authors": [[f"Author {(start + i) // 5 % 997}"] for i in range(count)],
        "text_hash": [""] * count,
        "row_hash": [""] * count,
        "vector": vector_array(matrix, dim),
    }
    return pa.table(columns, schema=schema), matrix


def _open_vector_file(path: Path, rows: int, dim: int):
    """An .npy file of `rows` x `dim` float32 written batch by batch through an ordinary file handle: a memory map
    would keep every written page resident in this process and count the benchmark's own copy of the vectors (15 GB
    at 10M passages) as index-build memory."""
    handle = path.open("wb")
    np.lib.format.write_array_header_2_0(
        handle,
        {
            "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
            "fortran_order": False,
            "shape": (rows, dim),
        },
    )
    return handle


def build_index(folder: Path, size: int, pool, dim: int, *, ann_min_rows: int, seed: int = 7) -> dict:
    """Passages + papers tables with every index the indexer creates; exact vectors kept in vectors.npy. Returns
    the build and ANN seconds, the full-text index's seconds, and the peak resident memory of the whole build and
    of its full-text phase."""
    import lancedb

    from lumina_assets.indexing import lancedb_tables as tables
    from lumina_assets.indexing import table_ops

    rng = np.random.default_rng(seed)
    db = lancedb.connect(str(folder / "lancedb"))
    started = time.perf_counter()
    passages = papers = None
    with PeakMemory() as memory, _open_vector_file(folder / "vectors.npy", size, dim) as exact:
        memory.phase("rows")
        for start in range(0, size, WRITE_BATCH):
            batch, matrix = synthetic_batch(start, min(WRITE_BATCH, size - start), pool, rng, dim)
            exact.write(np.ascontiguousarray(matrix, dtype=np.float32).tobytes())
            paper_rows = batch.select(["paper_id", "title", "search_text", "year", "authors"]).to_pylist()[
                ::5
            ]
            for row in paper_rows:
                row.update(doi=None, url=None, venue=None)
                row["author_last_names"] = [a.split()[-1].lower() for a in row["authors"]]
            paper_table = pa.Table.from_pylist(paper_rows)
            if passages is None:
                passages = db.create_table(tables.PASSAGES_TABLE, data=batch)
                papers = db.create_table(tables.PAPERS_TABLE, data=paper_table)
            else:
                passages.add(batch)
                papers.add(paper_table)
        exact.close()
        memory.phase("full_text")
        fts_started = time.perf_counter()
        # a large table's index is built in a child process under LUMINA_FTS_MEMORY_MB: its own peak counts
        fts_builds = [b for b in (table_ops.ensure_fts(t, "search_text") for t in (passages, papers)) if b]
        fts_build_s = time.perf_counter() - fts_started
        memory.phase("scalar")
        for column in ("passage_id", "paper_id", "year"):
            table_ops.ensure_scalar(passages, column, "BTREE")
        table_ops.ensure_scalar(papers, "paper_id", "BTREE")
        table_ops.ensure_scalar(papers, "author_last_names", "LABEL_LIST")
        build_s = time.perf_counter() - started
        memory.phase("ann")
        started = time.perf_counter()
        has_ann, _ = table_ops.ensure_ann(passages, "vector", size, min_rows=ann_min_rows, retrain_growth=2.0)
        ann_build_s = time.perf_counter() - started if has_ann else 0.0
    return {
        "build_s": build_s,
        "ann_build_s": ann_build_s,
        "fts_build_s": fts_build_s,
        "build_peak_rss_mb": memory.overall_mb,
        "fts_peak_rss_mb": max(
            [memory.peaks_mb.get("full_text", 0.0)]
            + [b.peak_rss_mb for b in fts_builds if b.separate_process]
        ),
        "fts_cap_mb": max((b.cap_mb for b in fts_builds), default=0),
        "rss_before_fts_mb": memory.peaks_mb.get("rows", 0.0),
        "peak_rss_by_phase_mb": {name: round(mb, 1) for name, mb in memory.peaks_mb.items()},
    }


def recall_at_10(
    folder: Path,
    query_vectors: np.ndarray,
    *,
    nprobes: int,
    probe_share: float,
    refine_factor: int,
    depth: int,
) -> float:
    """The top 10 of the vector candidates exactly as the engine asks for them (`depth` passages, ANN when built)
    against brute force over the same vectors."""
    import lancedb

    from lumina_assets.search.stores import Filters, LanceStore

    store = LanceStore(
        lancedb.connect(str(folder / "lancedb")),
        nprobes=nprobes,
        probe_share=probe_share,
        refine_factor=refine_factor,
    )
    exact = np.load(folder / "vectors.npy", mmap_mode="r")
    # exact top 10 chunk by chunk: a full score matrix would be queries x passages floats (2.4 GB at 10M)
    best_scores = np.full((len(query_vectors), 10), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(query_vectors), 10), dtype=np.int64)
    for start in range(0, len(exact), 200_000):
        scores = query_vectors @ np.asarray(exact[start : start + 200_000]).T
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_rows = np.concatenate(
            [best_rows, np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape)], axis=1
        )
        top = np.argpartition(-merged_scores, 9, axis=1)[:, :10]
        best_scores = np.take_along_axis(merged_scores, top, axis=1)
        best_rows = np.take_along_axis(merged_rows, top, axis=1)
    truth = best_rows
    found = 0
    for vector, expected in zip(query_vectors, truth, strict=True):
        hits = store.passage_vector_run(vector, depth, Filters()).hits[:10]
        got = {
            int(pid.split(":")[1].split("#")[0]) * 5 + int(pid.split("#")[1].split(":")[0]) - 1
            for pid, _, _ in hits
        }
        found += len(got & set(int(i) for i in expected))
    return found / (10 * len(query_vectors))


# A fresh process measuring one engine: this checkout's (tree "") with a given store, or an earlier version
# exported from git (`--baseline REF`), which runs from its own tree with whichever module layout it had.
SERVE = r"""
import json, sys, time
started = time.perf_counter()
tree, uri, store, queries = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if tree:
    sys.path.insert(0, tree)
try:
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
except ImportError:  # a baseline from before search/ was split into modules
    from lumina_assets.search import SearchConfig, SearchEngine
import lumina_assets
assert lumina_assets.__file__.startswith(tree), lumina_assets.__file__
engine = SearchEngine(uri, config=SearchConfig(store=store) if store else SearchConfig())
engine.search(queries[0], k=10)
first = time.perf_counter() - started
# background work of the store (a small corpus's full-text mirrors) is part of warm-up
getattr(engine, "wait_until_warm", lambda: None)()
for query in queries[:20]:
    engine.search(query, k=10)
times = []
for query in queries:
    t0 = time.perf_counter()
    engine.search(query, k=10)
    times.append(time.perf_counter() - t0)
rss = 0.0
for line in open("/proc/self/status"):
    if line.startswith("VmRSS"):
        rss = int(line.split()[1]) / 1024
name = "baseline" if tree else type(engine.store()).__name__
policy = getattr(engine, "cache_policy", None)
cache = policy.reason if policy is not None else ""
print(json.dumps({"first_query_s": first, "rss_mb": rss, "times": times, "store": name, "index_cache": cache}))
"""


# One engine in a long-lived process for `paired_latency`: answers one JSON query per input line with its latency
# in seconds.
PAIRED_WORKER = r"""
import json, sys, time
tree, uri, store = sys.argv[1], sys.argv[2], sys.argv[3]
if tree:
    sys.path.insert(0, tree)
try:
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
except ImportError:  # a baseline from before search/ was split into modules
    from lumina_assets.search import SearchConfig, SearchEngine
engine = SearchEngine(uri, config=SearchConfig(store=store) if store else SearchConfig())
engine.search("warm up query", k=10)
getattr(engine, "wait_until_warm", lambda: None)()
print("ready", flush=True)
for line in sys.stdin:
    query = json.loads(line)
    t0 = time.perf_counter()
    engine.search(query, k=10)
    print(time.perf_counter() - t0, flush=True)
"""


def paired_latency(
    folder: Path, queries: list[str], baseline: tuple[Path, Path], *, block: int = 20, rewarm: int = 5
) -> dict:
    """The current engine (store chosen by size) and the baseline in two live processes, answering the same
    queries in alternating blocks (the first `rewarm` queries of a block re-warm caches and are not counted): a
    shared host's speed drifts by more than the difference being measured, and this way it drifts for both."""
    from lumina_assets.core import settings

    tree, data_dir = baseline
    uri = str(folder / "lancedb")
    errors = [tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")]  # what a worker says when it fails
    current = subprocess.Popen(
        [sys.executable, "-c", PAIRED_WORKER, "", uri, "auto"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors[0], text=True,
    )  # fmt: skip
    old = subprocess.Popen(
        [sys.executable, "-c", PAIRED_WORKER, str(tree), uri, ""],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors[1], text=True,
        cwd=tree, env=settings.child_environment(LUMINA_DATA_DIR=str(data_dir)),
    )  # fmt: skip
    try:
        for worker, error, name in ((current, errors[0], "current"), (old, errors[1], "baseline")):
            if worker.stdout.readline().strip() != "ready":
                worker.wait(timeout=60)
                error.seek(0)
                tail = "\n".join(error.read().strip().splitlines()[-8:])
                raise BenchError(f"the {name} engine did not start for the paired comparison:\n{tail}")

        def ask(worker, query: str) -> float:
            worker.stdin.write(json.dumps(query) + "\n")
            worker.stdin.flush()
            return float(worker.stdout.readline())

        times: dict[int, list[float]] = {current.pid: [], old.pid: []}
        for number, start in enumerate(range(0, len(queries), block)):
            chunk = queries[start : start + block]
            for worker in (current, old) if number % 2 == 0 else (old, current):
                for query in chunk[:rewarm]:
                    ask(worker, query)
                times[worker.pid] += [ask(worker, query) for query in chunk]
    finally:
        for worker in (current, old):
            worker.stdin.close()
            worker.wait(timeout=60)
        for error in errors:
            error.close()
    ours, theirs = times[current.pid], times[old.pid]
    return {
        "queries": len(ours),
        "p50_ms": percentile_ms(ours, 50),
        "p95_ms": percentile_ms(ours, 95),
        "baseline_p50_ms": percentile_ms(theirs, 50),
        "baseline_p95_ms": percentile_ms(theirs, 95),
        "median_difference_ms": percentile_ms(np.subtract(ours, theirs), 50),
        "faster_share": float(np.mean(np.less(ours, theirs))),
    }


def export_baseline(ref: str, destination: Path) -> Path:
    """The tree of git revision `ref` of this checkout, exported once into `destination`."""
    import tarfile

    from lumina_assets.core.settings import PROJECT_ROOT as repository

    tree = destination / "tree"
    if not (tree / "lumina_assets").is_dir():
        destination.mkdir(parents=True, exist_ok=True)
        archive = destination / "tree.tar"
        with archive.open("wb") as handle:
            exported = subprocess.run(
                ["git", "-C", str(repository), "archive", ref],
                stdout=handle,
                stderr=subprocess.PIPE,
                text=True,
            )
        if exported.returncode:
            archive.unlink(missing_ok=True)
            raise BenchError(f"cannot export baseline {ref!r} from {repository}: {exported.stderr.strip()}")
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
        archive.unlink()
    return tree


def measure_baseline(tree: Path, data_dir: Path, folder: Path, queries: list[str]) -> dict:
    """`measure_process` for the exported baseline; its one-off setup (e.g. an ONNX export into its own data
    dir) is done by a first, unmeasured process."""
    from lumina_assets.core import settings

    env = settings.child_environment(LUMINA_DATA_DIR=str(data_dir))
    command = [sys.executable, "-c", SERVE, str(tree), str(folder / "lancedb"), ""]
    _run([*command, json.dumps(queries[:1])], f"the baseline engine in {tree}", env=env, cwd=tree)
    return _timed(command + [json.dumps(queries)], f"the baseline engine in {tree}", env=env, cwd=tree)


def measure_process(folder: Path, queries: list[str], store: str) -> dict:
    """A fresh process: time to the first answered query (imports and index opening included), then latency
    over the real queries after warm-up, and resident memory at the end."""
    command = [sys.executable, "-c", SERVE, "", str(folder / "lancedb"), store, json.dumps(queries)]
    return _timed(command, f"the {store} store on {folder}")


def _timed(command: list[str], what: str, **kwargs) -> dict:
    started = time.perf_counter()
    result = _run(command, what, **kwargs)
    wall = time.perf_counter() - started
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    times = figures.pop("times")
    figures.update(p50_ms=percentile_ms(times, 50), p95_ms=percentile_ms(times, 95), wall_s=wall)
    return figures


def as_json(figures: ScaleFigures) -> str:
    return json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(figures).items()})
