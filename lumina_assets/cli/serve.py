"""`lumina serve` (the search API and web page), `lumina eval pinpoint` (highlighted evidence against human
rationale sentences) and `lumina bench serve` (20 concurrent API clients vs the in-process engine)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path


def add_commands(commands, bench_commands) -> None:
    from lumina_assets.cli.search import _subcommand_group

    serve = commands.add_parser(
        "serve", help="the search API and web page (http://127.0.0.1:8765 by default)"
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)"
    )
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name requests may carry besides the loopback names and the bound address (repeatable; "
        "e.g. the machine's name when listening on 0.0.0.0; `*` turns the check off, only behind a proxy that "
        "checks it)",
    )
    serve.add_argument("--db", default=None, help="LanceDB URI (default: settings.lancedb_uri())")
    serve.add_argument("--engines", type=int, default=4, help="concurrent searches (engine pool size)")
    serve.add_argument(
        "--no-llm", action="store_true", help="extractive overview even when an LLM is configured"
    )
    serve.add_argument(
        "--no-sentence-backfill",
        action="store_true",
        help="do not store missing sentence vectors in the background (evidence is then encoded per request)",
    )
    serve.set_defaults(handler=_serve)

    eval_parser = _subcommand_group(
        commands, "eval", "retrieval evaluation on collections with relevance judgments"
    )
    pinpoint = eval_parser.add_parser(
        "pinpoint",
        help="is the first highlighted sentence a human rationale sentence? (SciFact rationales format)",
    )
    pinpoint.add_argument(
        "rationales", help="JSONL: query_id, claim, doc_id, sentences (e.g. rationales_train.jsonl)"
    )
    pinpoint.add_argument(
        "--corpus", default=None, help="BEIR dir of the corpus (default: the rationales file's folder)"
    )
    pinpoint.add_argument(
        "--index", default=None, help="LanceDB URI of that corpus' index (default: built / reused)"
    )
    pinpoint.add_argument("--limit", type=int, default=0, help="only the first N pairs (0: all)")
    pinpoint.add_argument(
        "--half",
        choices=("even", "odd"),
        default=None,
        help="only the pairs whose claim id is even / odd (the scorer's weights were chosen on the even half)",
    )
    pinpoint.add_argument("--details", default=None, help="write one JSON line per pair (found, top1) here")
    pinpoint.add_argument("--json", action="store_true", help="last line: pairs, found_at_10, highlight_top1")
    pinpoint.set_defaults(handler=_eval_pinpoint)

    bench = bench_commands.add_parser(
        "serve", help="API latency under concurrent clients vs in-process search"
    )
    bench.add_argument("--dir", default=None, help="BEIR dir (default ../shared/data/scifact)")
    bench.add_argument("--index", default=None, help="LanceDB URI (default: the collection's eval index)")
    bench.add_argument("--clients", type=int, default=20)
    bench.add_argument("--seconds", type=float, default=60.0)
    bench.add_argument("--k", type=int, default=10)
    bench.add_argument("--in-process-queries", type=int, default=50)
    bench.add_argument("--port", type=int, default=0, help="0: a free port")
    bench.add_argument("--json", action="store_true")
    bench.set_defaults(handler=_bench_serve)


def _service(uri: str, *, engines: int, use_llm: bool):
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.results import SearchService

    embedder = Embedder()
    llm = None
    if use_llm:
        try:
            from lumina_assets.cli.llm import env_llm_client

            client = env_llm_client("question_llm")
            llm = None if client.is_offline else client
        except Exception as error:  # no LLM: the extractive overview, labelled
            print(f"overview LLM unavailable ({error}): extractive overviews", file=sys.stderr)
    return SearchService(
        lambda: SearchEngine(uri, embedder, SearchConfig(), reload_in_background=True),
        pool_size=engines,
        llm_client=llm,
    )


def _store_missing_sentence_vectors(uri: str) -> None:
    """Stores the sentence vectors passage_index left out (LUMINA_SENTENCE_VECTORS unset: they cost ~1.5x the passage
    embedding), while the server answers: until then evidence sentences are encoded per request, and the scorer
    picks the stored ones up on its next refresh. Incremental: an index that has them all costs one hash check."""
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.indexing.sentence_vectors import backfill_from_index

    def say(line: str) -> None:
        print(f"[sentence vectors] {line}", file=sys.stderr, flush=True)

    try:
        found = backfill_from_index(connect_lancedb(uri), Embedder(), log_fn=say)
    except (OSError, RuntimeError, ValueError) as error:  # the server keeps answering, encoding per request
        say(f"not stored ({type(error).__name__}: {error}); evidence sentences stay encoded per request")
        return
    if found["encoded_passages"]:
        say(f"stored for {found['encoded_passages']} passages in {found['seconds']} s")


def _serve(args) -> int:
    import uvicorn

    from lumina_assets.core import settings
    from lumina_assets.search.api import LOOPBACK_HOSTS, create_app
    from lumina_assets.search.memory_store import empty_index_message
    from lumina_assets.search.stores import IndexModelMismatch, IndexNotBuilt

    uri = args.db or settings.lancedb_uri()
    service = _service(uri, engines=args.engines, use_llm=not args.no_llm)
    try:
        service.warm_up()
    except IndexNotBuilt as error:
        print(
            f"No search index yet ({error}): build it (main job or `--select passage_index`).",
            file=sys.stderr,
        )
        return 2
    except IndexModelMismatch as error:
        print(f"Cannot serve this index: {error}", file=sys.stderr)
        return 2
    if service.store().empty():
        print(f"warning: {empty_index_message()}", file=sys.stderr)
    hosts = allowed_hosts(args.host, args.allow_host)
    if args.host not in LOOPBACK_HOSTS:
        print(
            f"warning: listening on {args.host}: reachable from other machines; requests must name one of "
            f"{', '.join(hosts)} (--allow-host adds one)",
            file=sys.stderr,
        )
    if not args.no_sentence_backfill:
        threading.Thread(
            target=_store_missing_sentence_vectors, args=(uri,), name="lumina-sentence-backfill", daemon=True
        ).start()
    elif service.scorer.stored is None or service.scorer.stored.lookup_table() is None:
        print("no stored sentence vectors: evidence sentences are encoded per request", file=sys.stderr)
    print(f"Lumina search on http://{args.host}:{args.port}/  (index {uri}; Ctrl-C stops)", flush=True)
    uvicorn.run(create_app(service, allowed_hosts=hosts), host=args.host, port=args.port, log_level="warning")
    return 0


def _collection_index(directory: Path, split_preference=("train", "test", "dev"), log=None, index=None):
    """(collection, embedder, index uri, reused): the collection's eval index, built when missing, or `index` when
    given (then nothing is built); either gets the sentence vectors it lacks (once)."""
    from lumina_assets.corpus.collections import ensure_eval_index, load_collection
    from lumina_assets.indexing.embedding import Embedder

    last_error = None
    for split in split_preference:
        try:
            collection = load_collection(directory, split=split)
            break
        except Exception as error:  # this split has no qrels: try the next
            last_error = error
    else:
        raise SystemExit(f"cannot load collection {directory}: {last_error}")
    embedder = Embedder()
    if index:
        uri, reused = index, True
    else:
        uri, _, reused = ensure_eval_index(collection, embedder, log_fn=log)
    # eval indexes are built without sentence vectors (retrieval needs none): added here once, incrementally
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.sentence_vectors import backfill_from_index

    backfill_from_index(connect_lancedb(uri), embedder, log_fn=log)
    return collection, embedder, uri, reused


def _eval_pinpoint(args) -> int:
    from lumina_assets.corpus.collections import paper_id_for_doc
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.evidence import EvidenceScorer
    from lumina_assets.search.pinpoint import evaluate_pinpoint, load_rationales
    from lumina_assets.search.results import stored_sentences

    path = Path(args.rationales)
    try:
        pairs = load_rationales(path)
    except (OSError, ValueError) as error:
        print(f"cannot read rationales: {error}", file=sys.stderr)
        return 2
    if args.half:
        pairs = [p for p in pairs if _claim_half(p.query_id) == args.half]
    if args.limit > 0:
        pairs = pairs[: args.limit]
    corpus_dir = Path(args.corpus) if args.corpus else path.parent
    log = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.index:
        from lumina_assets.indexing.embedding import Embedder

        name = corpus_dir.name
        embedder, uri = Embedder(), args.index
    else:
        collection, embedder, uri, reused = _collection_index(corpus_dir, log=log)
        name = collection.name
        print(f"{name}: index {'reused' if reused else 'built'} at {uri}", file=sys.stderr)
    engine = SearchEngine(uri, embedder, SearchConfig())
    engine.warm_up()
    scorer = EvidenceScorer(embedder, stored=stored_sentences(engine))

    def progress(done: int, total: int) -> None:
        if log and (done % 50 == 0 or done == total):
            log(f"  {done}/{total} pairs")

    result = evaluate_pinpoint(
        engine.search, scorer, pairs, lambda doc: paper_id_for_doc(name, doc), progress=progress
    )
    summary = result.summary()
    if args.details:
        Path(args.details).write_text("".join(json.dumps(d) + "\n" for d in result.details))
    by_half = {}
    for half in ("even", "odd"):
        found = [d for d in result.details if d["found"] and _claim_half(d["query_id"]) == half]
        if found:
            by_half[half] = round(sum(d["top1"] for d in found) / len(found), 4)
    summary["highlight_top1_by_half"] = by_half
    print(f"pairs: {summary['pairs']}")
    print(f"evidence abstract in the top 10: {summary['found_at_10']:.1%} ({summary['found_pairs']} pairs)")
    print(f"a rationale sentence among its returned chunks: {summary['rationale_in_chunks']:.1%}")
    print(
        f"first highlighted sentence is a rationale sentence: {summary['highlight_top1']:.1%} of the found pairs"
    )
    if len(by_half) == 2:
        print(
            f"  by claim id: even (the half the scorer's weights were chosen on) {by_half['even']:.1%}, "
            f"odd (held out) {by_half['odd']:.1%}"
        )
    print(f"search + highlight latency p50 {summary['p50_ms']} ms, p95 {summary['p95_ms']} ms")
    if args.json:
        print(json.dumps(summary))
    return 0


def _claim_half(query_id: str) -> str:
    """'even' or 'odd': numeric claim ids by parity, others by a stable hash."""
    import hashlib

    number = int(query_id) if query_id.isdigit() else int(hashlib.sha256(query_id.encode()).hexdigest(), 16)
    return "even" if number % 2 == 0 else "odd"


def _bench_serve(args) -> int:
    import time

    import numpy as np

    from lumina_assets.core import settings
    from lumina_assets.search.api import create_app
    from lumina_assets.search.load import run_load
    from lumina_assets.search.results import SearchRequest

    directory = Path(args.dir) if args.dir else settings.shared_data_dir() / "scifact"
    collection, _, uri, _ = _collection_index(
        directory, log=lambda m: print(m, file=sys.stderr, flush=True), index=args.index
    )
    queries = list(collection.queries.values())
    service = _service(uri, engines=4, use_llm=False)
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
        return round(float(np.percentile(np.asarray(samples) * 1000, q)), 1)

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
        "cpus": __import__("os").cpu_count(),
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


def allowed_hosts(bound: str, extra: list[str]) -> list[str]:
    """The names a request's Host header may carry: the loopback names, the bound address unless it is a
    wildcard (0.0.0.0 and :: are no name a client sends), and every `--allow-host`."""
    from lumina_assets.search.api import LOOPBACK_HOSTS

    names = [*LOOPBACK_HOSTS]
    if bound not in ("0.0.0.0", "::", ""):
        names.append(bound)
    return list(dict.fromkeys([*names, *extra]))


def serve_in_thread(app, port: int = 0):
    """(uvicorn server, its thread, port) serving `app` on 127.0.0.1 from a daemon thread, started; port 0 picks a
    free one. Stop it with `server.should_exit = True` and join the thread."""
    import socket
    import threading
    import time

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
