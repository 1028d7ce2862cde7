"""`lumina bench incremental`: the cost of adding one paper to an index of N papers against indexing N from scratch
(a developer bench, kept in the checkout)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from lumina_assets.core import settings


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
    bench = bench_commands.add_parser(
        "incremental", help="time to add 1 paper to an index of N papers vs indexing N from scratch"
    )
    bench.add_argument("--n", type=int, default=500, help="papers already in the index (default 500)")
    bench.add_argument("--repeats", type=int, default=1)
    bench.add_argument("--corpus", default="", help="BEIR / SMART directory (default ../shared/data/scifact)")
    bench.set_defaults(handler=run_bench_incremental)
