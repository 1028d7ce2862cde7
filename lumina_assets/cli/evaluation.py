"""`lumina eval beir` (retrieval measures and latency on a collection with qrels, optionally per ablated stage) and
`lumina eval pinpoint` (highlighted evidence against human rationale sentences); the work is in `evals`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lumina_assets.cli.messages import fail


def add_commands(commands, bench_commands) -> None:
    eval_parser = commands.add_parser(
        "eval", help="retrieval evaluation on collections with relevance judgments"
    ).add_subparsers(dest="eval_command", required=True)

    beir = eval_parser.add_parser(
        "beir", help="index a BEIR (or SMART, e.g. CISI) directory and score every query"
    )
    beir.add_argument(
        "directory", help="BEIR dir (corpus.jsonl, queries.jsonl, qrels/) or SMART dir (*.ALL/.QRY/.REL)"
    )
    beir.add_argument("--split", default="test", help="qrels split for BEIR dirs (default test)")
    beir.add_argument(
        "--subset",
        choices=("all", "tuning", "heldout"),
        default=None,
        help="of a train split: every query (default), the tuning half (the default with --ablation: what a "
        "choice of settings may read) or the held-out half (lumina_assets/corpus/splits.py); a test split is "
        "held out whole",
    )
    beir.add_argument(
        "--k", type=int, default=10, help="cut-off shown in the per-query table (metrics are fixed)"
    )
    beir.add_argument("--json", action="store_true", help="last line: one JSON object with the metrics")
    beir.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="override a SearchConfig field"
    )
    beir.add_argument(
        "--ablation",
        action="store_true",
        help="also score plain RRF, BM25 and MiniLM alone, the global defaults and each stage switch, "
        "with a paired test of each against plain RRF",
    )
    beir.set_defaults(handler=_eval_beir)

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


def _parse_overrides(pairs: list[str]) -> dict:
    from lumina_assets.search.config import SearchConfig

    defaults = SearchConfig()
    changes = {}
    for pair in pairs:
        name, _, raw = pair.partition("=")
        if not hasattr(defaults, name):
            raise SystemExit(f"unknown SearchConfig field {name!r}")
        current = getattr(defaults, name)
        if current is None:  # the reranker takes code, not a string
            raise SystemExit(f"{name} cannot be set with --set: use LUMINA_RERANK_MODEL")
        if isinstance(current, bool):
            value = raw.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, int | float):
            value = type(current)(raw)
        elif isinstance(current, dict):
            value = json.loads(raw)  # merged over the defaults; only the retrievers named count as set
        else:
            value = raw
        changes[name] = value
    return changes


def _query_subset(collection, split: str, subset: str):
    """The collection with only the queries (and qrels) of `subset`; the corpus, and so the eval index, stay whole."""
    import dataclasses

    from lumina_assets.corpus import splits

    ids, _ = splits.select(collection.queries, split, subset)
    if len(ids) == len(collection.queries):
        return collection
    return dataclasses.replace(
        collection,
        queries={q: collection.queries[q] for q in ids},
        qrels={q: collection.qrels[q] for q in ids if q in collection.qrels},
    )


def query_subset_name(args) -> str:
    """--subset as given; unset, the tuning half for an ablation (it chooses settings) and every query otherwise."""
    if args.subset:
        return args.subset
    return "tuning" if getattr(args, "ablation", False) else "all"


def _eval_beir(args) -> int:
    from evals import ablation
    from evals.collection_eval import ensure_eval_index, evaluate_run, query_vector_cache, run_queries
    from evals.latency import percentile_ms
    from lumina_assets.corpus import splits
    from lumina_assets.corpus.collections import CollectionError, load_collection
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.rerank import configured_search_config

    try:
        collection = load_collection(args.directory, split=args.split)
    except (CollectionError, OSError) as error:
        return fail(f"cannot load collection: {error}")
    args.subset = query_subset_name(args)
    collection = _query_subset(collection, args.split, args.subset)
    embedder = Embedder()
    log = (
        (lambda message: print(message, file=sys.stderr, flush=True))
        if not args.json
        else (lambda message: None)
    )
    uri, index_seconds, reused = ensure_eval_index(collection, embedder, log_fn=log)
    overrides = _parse_overrides(args.set)
    config = configured_search_config(SearchConfig(**overrides))
    print(
        f"{collection.name}: {len(collection.corpus)} documents, {len(collection.queries)} judged queries "
        f"({splits.describe(args.split, args.subset)}); "
        f"index {'reused' if reused else 'built'} at {uri} ({index_seconds:.1f} s to build)"
    )
    variants = ablation.ablation_rows() if args.ablation else {ablation.DEFAULTS: {}}
    cache = None
    rows = []
    per_query = {}
    for name, changes in variants.items():
        engine = SearchEngine(uri, embedder, config.replace(**changes))
        engine.warm_up()
        if rows:  # ablation rows reuse batch-embedded queries: their latency excludes embedding
            if cache is None:
                cache = query_vector_cache(engine, collection)
            engine.embedding_cache = cache
        run, latencies = run_queries(engine, collection, k=max(100, args.k))
        per_query[name] = ablation.per_query_ndcg(run, collection.qrels)
        metrics = evaluate_run(run, collection.qrels)
        rows.append((name, metrics, percentile_ms(latencies, 50), percentile_ms(latencies, 95)))
    _, metrics, p50, p95 = rows[0]
    result = {
        **{key: round(value, 4) for key, value in metrics.items()},
        "index_seconds": round(index_seconds, 2),
        "query_p50_ms": round(p50, 2),
        "query_p95_ms": round(p95, 2),
        "queries": len(collection.queries),
        "documents": len(collection.corpus),
        "collection": collection.name,
        "split": args.split,
        "subset": splits.describe(args.split, args.subset),
        "index_reused": reused,
    }
    comparisons = ablation.compare_to_baseline(per_query) if ablation.BASELINE in per_query else []
    print("\n".join(ablation.table_lines(rows, comparisons)))
    print(
        f"index time {index_seconds:.1f} s; query latency p50 {result['query_p50_ms']} ms, p95 {result['query_p95_ms']} ms"
    )
    if args.json:
        print(json.dumps(result))
    return 0


def _eval_pinpoint(args) -> int:
    from evals.collection_eval import collection_index
    from evals.pinpoint import claim_half, evaluate_pinpoint, load_rationales
    from lumina_assets.corpus.collections import CollectionError, paper_id_for_doc
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.evidence import EvidenceScorer
    from lumina_assets.search.results import stored_sentences

    path = Path(args.rationales)
    try:
        pairs = load_rationales(path)
    except (OSError, ValueError) as error:
        return fail(f"cannot read rationales: {error}")
    if args.half:
        pairs = [p for p in pairs if claim_half(p.query_id) == args.half]
    if args.limit > 0:
        pairs = pairs[: args.limit]
    corpus_dir = Path(args.corpus) if args.corpus else path.parent
    log = None if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    if args.index:
        from lumina_assets.indexing.embedding import Embedder

        name = corpus_dir.name
        embedder, uri = Embedder(), args.index
    else:
        try:
            collection, embedder, uri, reused = collection_index(corpus_dir, log=log)
        except CollectionError as error:
            raise SystemExit(str(error)) from error
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
        found = [d for d in result.details if d["found"] and claim_half(d["query_id"]) == half]
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
