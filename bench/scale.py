"""`lumina bench scale --passages 10000,100000,1000000 [--json]`: build synthetic indexes of each size and print
build time, ANN build time, first query in a new process, resident memory, p50 / p95 and ANN recall@10.
`lumina bench serve`: API latency under concurrent clients against in-process search on a collection's index.
The harnesses are `bench.scale_harness` and `bench.serve_load`; this module reads arguments and prints."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path


def add_commands(commands, bench_commands) -> None:
    bench = bench_commands.add_parser(
        "scale", help="synthetic indexes of N passages: build, first query, memory, latency, ANN recall"
    )
    bench.add_argument("--passages", default="10000,100000,1000000", help="comma-separated sizes")
    bench.add_argument("--queries", type=int, default=60, help="SciFact claims used as queries (default 60)")
    bench.add_argument(
        "--sentences",
        type=int,
        default=20_000,
        help="SciFact sentences passages are drawn from (default 20000)",
    )
    bench.add_argument(
        "--memory-up-to", type=int, default=200_000, help="also time the in-memory store up to this size"
    )
    bench.add_argument(
        "--baseline",
        metavar="REF",
        help="also measure the engine of this git revision (e.g. ccc71f4, the in-memory engine before the index-backed stores) "
        "on the same indexes, up to --memory-up-to passages",
    )
    bench.add_argument(
        "--paired-queries",
        type=int,
        default=300,
        help="with --baseline: SciFact claims asked of both engines in alternating blocks (default 300)",
    )
    bench.add_argument(
        "--cold",
        action="store_true",
        help="skip the unmeasured process that warms the OS page cache before each size (first query then "
        "includes reading the index from disk, as far as the cache has dropped it)",
    )
    bench.add_argument("--keep", action="store_true", help="keep the built indexes under data/bench/scale-N")
    bench.add_argument("--reuse", action="store_true", help="measure indexes kept by an earlier --keep run")
    bench.add_argument("--json", action="store_true", help="one JSON object per size on its own line")
    bench.set_defaults(handler=run_bench_scale)

    serve = bench_commands.add_parser(
        "serve", help="API latency under concurrent clients vs in-process search"
    )
    serve.add_argument("--dir", default=None, help="BEIR dir (default ../shared/data/scifact)")
    serve.add_argument("--index", default=None, help="LanceDB URI (default: the collection's eval index)")
    serve.add_argument("--clients", type=int, default=20)
    serve.add_argument("--seconds", type=float, default=60.0)
    serve.add_argument("--k", type=int, default=10)
    serve.add_argument("--in-process-queries", type=int, default=50)
    serve.add_argument("--port", type=int, default=0, help="0: a free port")
    serve.add_argument("--json", action="store_true")
    serve.set_defaults(handler=_bench_serve)


def run_bench_scale(args) -> int:
    from bench.scale_harness import BenchError

    try:
        return _bench_scale(args)
    except BenchError as error:
        print(f"lumina bench scale: {error}", file=sys.stderr)
        return 2


def _built_index(args, size: int, pool, dimension: int, say) -> tuple[Path, dict]:
    """The index of `size` passages under the data dir's bench folder, built (or reused with --reuse), and its
    build figures."""
    from bench import scale_harness as scale_bench
    from lumina_assets.core import settings

    folder = settings.data_dir() / "bench" / f"scale-{size}"
    marker = folder / "build.json"
    if args.reuse and marker.exists():
        built = json.loads(marker.read_text())
    else:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        say(f"[{size:,} passages] building ...")
        built = scale_bench.build_index(folder, size, pool, dimension, ann_min_rows=100_000)
        marker.write_text(json.dumps(built))
    say(
        f"[{size:,} passages] built in {built['build_s']:.0f}s (full-text index {built.get('fts_build_s', 0):.0f}s, "
        f"peak {built.get('fts_peak_rss_mb', 0):,.0f} MB under a {built.get('fts_cap_mb', 0):,} MB cap), ANN {built['ann_build_s']:.0f}s; whole build peak "
        f"{built.get('build_peak_rss_mb', 0):,.0f} MB resident; measuring ..."
    )
    return folder, built


def _measured_stores(args, size: int, folder: Path, queries: list[str], baseline) -> list[tuple[str, dict]]:
    """Latency and memory of each store searched at this size: the index, in memory, and the baseline."""
    from bench import scale_harness as scale_bench

    # latency first: the exact-search recall check reads every vector, which pushes the index out of the page
    # cache and would turn the next first query into a cold-disk one
    measured_stores = []
    # one unmeasured process first reads the index into the OS page cache, as a server's earlier run would
    # have: the figures are a new process's start-up, not this disk's speed (cold: see --cold)
    if not args.cold:
        scale_bench.measure_process(folder, queries[:2], "index")
    stores = ["index"] + (["memory"] if size <= args.memory_up_to else [])
    stores += ["baseline"] if baseline and size <= args.memory_up_to else []
    for store in stores:
        if store == "baseline":
            measured = scale_bench.measure_baseline(*baseline, folder, queries)
        else:
            measured = scale_bench.measure_process(folder, queries, store)
        measured_stores.append((store, measured))
    return measured_stores


def _figures(args, size: int, built: dict, store: str, measured: dict, recall: float):
    from bench import scale_harness as scale_bench

    return scale_bench.ScaleFigures(
        size=size,
        store=f"{args.baseline} (baseline)" if store == "baseline" else measured["store"],
        build_s=built["build_s"],
        ann_build_s=built["ann_build_s"],
        first_query_s=measured["first_query_s"],
        rss_mb=measured["rss_mb"],
        p50_ms=measured["p50_ms"],
        p95_ms=measured["p95_ms"],
        recall_at_10=recall if store == "index" else 1.0,  # the other stores search exactly
        build_peak_rss_mb=built.get("build_peak_rss_mb", 0.0),  # absent from an older --keep marker
        fts_peak_rss_mb=built.get("fts_peak_rss_mb", 0.0),
        fts_build_s=built.get("fts_build_s", 0.0),
        index_cache=measured.get("index_cache", ""),
    )


def _print_table(args, queries: list[str], rows: list, paired_rows: list[tuple[int, dict]]) -> None:
    cache_state = (
        "with whatever the page cache holds"
        if args.cold
        else "after one unmeasured process warmed the page cache"
    )
    print(
        f"\n{time.strftime('%Y-%m-%d %H:%M')}, {len(queries)} SciFact claims as queries, k=10, query embedding "
        f"included; first query in a new process {cache_state}"
    )
    print(
        "| passages | store | build s | ANN build s | build peak MB (full-text phase) | first query s | RSS MB | "
        "p50 ms | p95 ms | recall@10 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for f in rows:
        print(
            f"| {f.size:,} | {f.store} | {f.build_s:.1f} | {f.ann_build_s:.1f} | "
            f"{f.build_peak_rss_mb:,.0f} ({f.fts_peak_rss_mb:,.0f}) | {f.first_query_s:.2f} | "
            f"{f.rss_mb:.0f} | {f.p50_ms:.1f} | {f.p95_ms:.1f} | {f.recall_at_10:.3f} |"
        )
    for f in rows:
        if f.index_cache:
            print(f"{f.size:,} passages, {f.store}: index cache {f.index_cache}")
    for size, paired in paired_rows:
        print(
            f"\n{size:,} passages, paired with {args.baseline} ({paired['queries']} queries each, alternating "
            f"blocks of 20): p50 {paired['p50_ms']:.2f} vs {paired['baseline_p50_ms']:.2f} ms, p95 "
            f"{paired['p95_ms']:.2f} vs {paired['baseline_p95_ms']:.2f} ms; median difference "
            f"{paired['median_difference_ms']:+.2f} ms, faster on {paired['faster_share']:.0%} of queries"
        )


def _bench_scale(args) -> int:
    from bench import scale_harness as scale_bench
    from lumina_assets.core import settings
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.config import SearchConfig

    scifact = settings.shared_data_dir() / "scifact"
    embedder = Embedder()
    say = (lambda *a: None) if args.json else print
    say("embedding the sentence pool (cached after the first run) ...")
    pool = scale_bench.sentence_pool(
        scifact / "corpus.jsonl", settings.cache_dir() / "bench-scale", embedder, limit=args.sentences
    )
    queries = [json.loads(line)["text"] for line in (scifact / "queries.jsonl").open()][: args.queries]
    query_vectors = embedder.encode_queries(queries)
    config = SearchConfig()
    rows = []
    paired_rows = []
    baseline = None
    if args.baseline:
        baseline_dir = settings.data_dir() / "bench" / f"baseline-{args.baseline}"
        baseline = scale_bench.export_baseline(args.baseline, baseline_dir), baseline_dir / "data"
    for size in [int(s) for s in args.passages.split(",") if s.strip()]:
        folder, built = _built_index(args, size, pool, embedder.dimension, say)
        measured_stores = _measured_stores(args, size, folder, queries, baseline)
        recall = scale_bench.recall_at_10(
            folder,
            query_vectors,
            nprobes=config.nprobes,
            probe_share=config.ann_probe_share,
            refine_factor=config.refine_factor,
            depth=config.candidates,
        )
        for store, measured in measured_stores:
            figures = _figures(args, size, built, store, measured, recall)
            rows.append(figures)
            if args.json:
                print(scale_bench.as_json(figures), flush=True)
        if baseline and size <= args.memory_up_to:
            claims = [json.loads(line)["text"] for line in (scifact / "queries.jsonl").open()]
            paired = scale_bench.paired_latency(folder, claims[: args.paired_queries], baseline)
            paired_rows.append((size, paired))
            if args.json:
                print(json.dumps({"size": size, "paired_with": args.baseline, **paired}), flush=True)
        if not (args.keep or args.reuse):
            shutil.rmtree(folder, ignore_errors=True)
    if not args.json:
        _print_table(args, queries, rows, paired_rows)
    return 0


def _bench_serve(args) -> int:
    from bench.serve_load import run_load, serve_in_thread
    from evals.collection_eval import collection_index
    from evals.latency import percentile_ms
    from lumina_assets.cli.serve import build_service
    from lumina_assets.core import settings
    from lumina_assets.corpus.collections import CollectionError
    from lumina_assets.search.api import create_app
    from lumina_assets.search.request import SearchRequest

    directory = Path(args.dir) if args.dir else settings.shared_data_dir() / "scifact"
    try:
        collection, _, uri, _ = collection_index(
            directory, log=lambda m: print(m, file=sys.stderr, flush=True), index=args.index
        )
    except CollectionError as error:
        raise SystemExit(str(error)) from error
    queries = list(collection.queries.values())
    service = build_service(uri, engines=4, use_llm=False)
    service.warm_up()

    in_process = []
    for query in queries[: args.in_process_queries]:
        started = time.perf_counter()
        service.search(SearchRequest(query, k=args.k))
        in_process.append(time.perf_counter() - started)
    bare = []
    with service.pool.engine() as engine:
        for query in queries[: args.in_process_queries]:
            started = time.perf_counter()
            engine.search(query, args.k)
            bare.append(time.perf_counter() - started)

    server, thread, port = serve_in_thread(create_app(service), args.port)
    try:
        # other queries than the in-process ones, so the API gets no sentence-vector cache hits from them
        unseen = queries[args.in_process_queries :] or queries
        load = run_load(
            f"http://127.0.0.1:{port}", unseen, clients=args.clients, seconds=args.seconds, k=args.k
        ).summary()
    finally:
        server.should_exit = True
        thread.join(timeout=10)

    def pct(samples, q):
        return round(percentile_ms(samples, q), 1)

    figures = {
        "clients": args.clients,
        "seconds": args.seconds,
        "k": args.k,
        "api_requests": load["requests"],
        "api_errors": load["errors"],
        "api_throughput_rps": load["throughput_rps"],
        "api_p50_ms": load["p50_ms"],
        "api_p95_ms": load["p95_ms"],
        "in_process_service_p50_ms": pct(in_process, 50),
        "in_process_service_p95_ms": pct(in_process, 95),
        "in_process_engine_p50_ms": pct(bare, 50),
        "in_process_engine_p95_ms": pct(bare, 95),
        "cpus": os.cpu_count(),
    }
    print("| measure | p50 ms | p95 ms |")
    print("|---|---|---|")
    print(
        f"| API, {args.clients} concurrent clients for {args.seconds:g} s | {load['p50_ms']} | {load['p95_ms']} |"
    )
    print(
        f"| in process, one at a time: search + evidence + overview | {figures['in_process_service_p50_ms']} | "
        f"{figures['in_process_service_p95_ms']} |"
    )
    print(
        f"| in process, one at a time: engine.search only | {figures['in_process_engine_p50_ms']} | "
        f"{figures['in_process_engine_p95_ms']} |"
    )
    print(f"API: {load['requests']} requests, {load['errors']} errors, {load['throughput_rps']} req/s")
    for sample in load["error_samples"]:
        print(f"  error: {sample}")
    if args.json:
        print(json.dumps(figures))
    return 0 if load["errors"] == 0 else 1
