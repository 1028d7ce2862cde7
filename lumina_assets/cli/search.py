"""`lumina search`, `lumina eval beir` and `lumina bench search`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def add_commands(commands, bench_commands) -> None:
    search = commands.add_parser(
        "search", help="search the passage index: ranked papers with pinpointed passages"
    )
    search.add_argument(
        "query", help="the question or keywords (authors / years understood: 'by Smith after 2019')"
    )
    search.add_argument("-k", type=int, default=10, help="number of contexts (default 10)")
    search.add_argument("--json", action="store_true", help="print the contexts as one JSON array")
    search.add_argument("--db", default=None, help="LanceDB URI (default: settings.lancedb_uri())")
    search.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="evidence in bold (ANSI) on a terminal (auto), or [[marked]] in plain text (never)",
    )
    search.set_defaults(handler=_search)

    eval_parser = _subcommand_group(
        commands, "eval", "retrieval evaluation on collections with relevance judgments"
    )
    beir = eval_parser.add_parser(
        "beir", help="index a BEIR (or SMART, e.g. CISI) directory and score every query"
    )
    beir.add_argument(
        "directory", help="BEIR dir (corpus.jsonl, queries.jsonl, qrels/) or SMART dir (*.ALL/.QRY/.REL)"
    )
    beir.add_argument("--split", default="test", help="qrels split for BEIR dirs (default test)")
    beir.add_argument(
        "--k", type=int, default=10, help="cut-off shown in the per-query table (metrics are fixed)"
    )
    beir.add_argument("--json", action="store_true", help="last line: one JSON object with the metrics")
    beir.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="override a SearchConfig field"
    )
    beir.add_argument(
        "--ablation", action="store_true", help="also score the pipeline with each stage switched off"
    )
    beir.set_defaults(handler=_eval_beir)

    bench = bench_commands.add_parser(
        "search", help="query latency vs a bare LanceDB query; indexing throughput"
    )
    bench.add_argument("--dir", default=None, help="BEIR dir to index (default ../shared/data/scifact)")
    bench.add_argument("--split", default="train")
    bench.add_argument("--queries", type=int, default=300, help="queries timed (default 300)")
    bench.add_argument(
        "--throughput-docs", type=int, default=300, help="documents for the indexing benchmark"
    )
    bench.set_defaults(handler=_bench_search)


def _subcommand_group(commands, name: str, help_text: str):
    """`lumina <name> ...` sub-subcommands; reuses the group when another module registered it first."""
    existing = commands.choices.get(name)
    if existing is not None:
        for action in existing._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
    parser = commands.add_parser(name, help=help_text)
    return parser.add_subparsers(dest=f"{name}_command", required=True)


# ---------------------------------------------------------------- lumina search


def _configured(config):
    """`config` plus the LLM / cross-encoder stages the environment switches on (see search_models)."""
    from lumina_assets.cli.llm import env_llm_client
    from lumina_assets.search.model_stages import configured_search_config, search_llm_client

    client = search_llm_client(lambda: env_llm_client("question_llm"))
    return configured_search_config(config, llm_client=client)


def _search(args) -> int:
    from lumina_assets.core import settings
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.stores import IndexModelMismatch, IndexNotBuilt

    uri = args.db or settings.lancedb_uri()
    try:
        config = _configured(SearchConfig())
    except ValueError as error:
        print(f"Search stages misconfigured: {error}", file=sys.stderr)
        return 2
    from lumina_assets.search.results import BadRequest, SearchRequest, SearchService

    answer = None
    try:
        engine = SearchEngine(uri, config=config)
        if args.json or not args.query.strip():
            contexts = engine.search(args.query, k=max(1, args.k))
        else:  # the API's view of the search: metadata, sections, pages, highlighted evidence, explained scores
            service = SearchService(lambda: engine, pool_size=1)
            answer = service.search(
                SearchRequest.from_mapping({"query": args.query, "k": args.k, "overview": False})
            )
            contexts = answer["results"]
    except BadRequest as error:
        print(f"Cannot search: {error}.", file=sys.stderr)
        return 2
    except IndexModelMismatch as error:
        print(f"Cannot search this index: {error}.", file=sys.stderr)
        return 2
    except IndexNotBuilt as error:
        print(
            f"No search index yet ({error}). Build it with `dagster asset materialize -m lumina_assets.definitions "
            "--select passage_index` (after papers and passages), or run the main job.",
            file=sys.stderr,
        )
        return 2
    message = engine.last_trace.message
    if args.json:
        print(json.dumps([c.to_dict() for c in contexts], ensure_ascii=False))
        return 0
    if not contexts:
        print(f"No results ({message or 'nothing matched'}).")
        return 0
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    print(render_results(answer, color=color))
    return 0


def render_results(answer: dict, *, color: bool = False, width: int = 400) -> str:
    """`lumina search`'s text: per result its metadata, the score explained, and per passage where it is (kind,
    section, pages) with its evidence sentences in bold (`color`) or [[marked]]."""
    bold, dim, off = ("\x1b[1m", "\x1b[2m", "\x1b[0m") if color else ("", "", "")
    lines = []
    for item in answer.get("constraints", []):
        value = item["value"]
        if isinstance(value, dict):
            value = f"{value.get('min') or '…'}–{value.get('max') or '…'}"
        how = "filter (strict)" if item["mode"] == "filter" else f"boost only; `{item['as_filter']}` filters"
        lines.append(f"understood: {item['kind']} {value}: {how}")
    for result in answer["results"]:
        lines.append(f"{result['rank']:>2}. {bold}{result['title']}{off}")
        meta = []
        if result.get("authors"):
            names = result["authors"]
            meta.append(", ".join(names[:3]) + (" et al." if len(names) > 3 else ""))
        meta += [str(v) for v in (result.get("year"), result.get("venue")) if v]
        link = result.get("doi") and f"doi:{result['doi']}" or result.get("url") or result["paper_id"]
        lines.append(f"    {' · '.join([*meta, link])}")
        lines.append(f"    {dim}{_explain(result)}{off}")
        for passage in result["passages"]:
            where = [passage.get("kind") or "text"]
            number, title = passage.get("section_number") or "", passage.get("section_title") or ""
            if number.lower() == title.lower() or number.lower() == where[0].lower():
                number = ""  # e.g. an abstract: "§ Abstract", not "§ abstract Abstract"
            if number or title:
                where.append(f"§ {number} {title}".replace("  ", " ").strip())
            start, end = passage.get("page_start"), passage.get("page_end")
            if start is not None:
                where.append(f"p. {start}" if end in (None, start) else f"pp. {start}–{end}")
            lines.append(f"    [{passage['number']}] {' · '.join(where)}")
            text = _marked(passage["text"], passage["highlights"], bold, off, color)
            if len(passage["text"]) > width and not passage["highlights"]:
                text = passage["text"][: width - 1] + "…"
            lines.append(f"    > {text}")
    scored = "meaning (MiniLM cosine), query-word coverage and role (findings over background and methods)"
    lines.append(
        f"{dim}score: the fused retriever score (comparable within this search only); "
        f"evidence: sentences ranked by {scored}, shown {'in bold' if color else 'in [[ ]]'}{off}"
    )
    return "\n".join(lines)


def _explain(result: dict) -> str:
    explanation = result["explanation"]
    found = ", ".join(f["label"] for f in explanation["found_by"]) or "—"
    parts = [f"score {result['score']:.3f} ({explanation['fusion']} fusion) · found by {found}"]
    if explanation["boosts"]:
        parts.append("boosts: " + ", ".join(explanation["boosts"]))
    if explanation.get("best_evidence_score") is not None:
        parts.append(f"best evidence {explanation['best_evidence_score']:.2f}")
    return " · ".join(parts)


def _marked(text: str, highlights: list[dict], bold: str, off: str, color: bool) -> str:
    opening, closing = (bold, off) if color else ("[[", "]]")
    out, cursor = [], 0
    for mark in sorted(highlights, key=lambda h: h["start"]):
        out += [text[cursor : mark["start"]], opening, text[mark["start"] : mark["end"]], closing]
        cursor = mark["end"]
    out.append(text[cursor:])
    return "".join(out)


# ---------------------------------------------------------------- lumina eval beir


def _parse_overrides(pairs: list[str]) -> dict:
    from lumina_assets.search.config import SearchConfig

    defaults = SearchConfig()
    changes = {}
    for pair in pairs:
        name, _, raw = pair.partition("=")
        if not hasattr(defaults, name):
            raise SystemExit(f"unknown SearchConfig field {name!r}")
        current = getattr(defaults, name)
        if current is None:  # the model-backed stages take code, not a string
            raise SystemExit(
                f"{name} cannot be set with --set: use LUMINA_SEARCH_LLM=parse,expand,rerank or LUMINA_RERANK_MODEL"
            )
        if isinstance(current, bool):
            value = raw.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, int):
            value = int(raw)
        elif isinstance(current, float):
            value = float(raw)
        elif isinstance(current, dict):
            value = {**current, **json.loads(raw)}
        else:
            value = raw
        changes[name] = value
    return changes


ABLATIONS: dict[str, dict] = {
    "full pipeline (default)": {},
    "- query parsing": {"parse_query": False},
    "+ acronym expansion": {"expand_acronyms": True},
    "- passage vectors": {"passage_vectors": False},
    "- passage full text": {"passage_fulltext": False},
    "+ paper title vectors": {"paper_title_vectors": True},
    "+ paper abstract vectors": {"paper_abstract_vectors": True},
    "- paper full text": {"paper_fulltext": False},
    "+ dense PRF (Rocchio)": {"dense_prf": True},
    "normalization = zscore": {"normalization": "zscore"},
    "fusion = RRF": {"fusion": "rrf"},
    "aggregation = sum2": {"passage_aggregation": "sum2"},
    "BM25 only (passages+papers)": {"passage_vectors": False},
    "dense only (passage vectors)": {"passage_fulltext": False, "paper_fulltext": False},
    "plain RRF (passage BM25 + dense)": {"fusion": "rrf", "paper_fulltext": False},
    "index store (no in-memory fast path)": {"store": "index"},
}


def _eval_beir(args) -> int:
    import numpy as np

    from lumina_assets.corpus.collections import (
        CollectionError,
        ensure_eval_index,
        evaluate_run,
        load_collection,
        precompute_query_vectors,
        run_queries,
    )
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine

    try:
        collection = load_collection(args.directory, split=args.split)
    except (CollectionError, OSError) as error:
        print(f"cannot load collection: {error}", file=sys.stderr)
        return 2
    embedder = Embedder()
    log = (
        (lambda message: print(message, file=sys.stderr, flush=True))
        if not args.json
        else (lambda message: None)
    )
    uri, index_seconds, reused = ensure_eval_index(collection, embedder, log_fn=log)
    overrides = _parse_overrides(args.set)
    try:
        config = _configured(SearchConfig(**overrides))
    except ValueError as error:
        print(f"Search stages misconfigured: {error}", file=sys.stderr)
        return 2
    print(
        f"{collection.name}: {len(collection.corpus)} documents, {len(collection.queries)} judged queries; "
        f"index {'reused' if reused else 'built'} at {uri} ({index_seconds:.1f} s to build)"
    )
    variants = ABLATIONS if args.ablation else {"full pipeline (default)": {}}
    result = None
    cache = None
    rows = []
    for name, changes in variants.items():
        engine = SearchEngine(uri, embedder, config.replace(**changes))
        engine.warm_up()
        if result is not None:  # ablation rows reuse batch-embedded queries: their latency excludes embedding
            if cache is None:
                precompute_query_vectors(engine, collection)
                cache = engine.embedding_cache
            engine.embedding_cache = cache
        run, latencies = run_queries(engine, collection, k=max(100, args.k))
        metrics = evaluate_run(run, collection.qrels)
        p50 = float(np.percentile(np.asarray(latencies) * 1000, 50)) if latencies else 0.0
        p95 = float(np.percentile(np.asarray(latencies) * 1000, 95)) if latencies else 0.0
        rows.append((name, metrics, p50, p95))
        if result is None:
            result = {
                **{key: round(value, 4) for key, value in metrics.items()},
                "index_seconds": round(index_seconds, 2),
                "query_p50_ms": round(p50, 2),
                "query_p95_ms": round(p95, 2),
                "queries": len(collection.queries),
                "documents": len(collection.corpus),
                "collection": collection.name,
                "split": args.split,
                "index_reused": reused,
            }
    print("| configuration | nDCG@10 | MAP@10 | Recall@100 | MRR@10 | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for name, metrics, p50, p95 in rows:
        print(
            f"| {name} | {metrics['ndcg@10']:.4f} | {metrics['map@10']:.4f} | {metrics['recall@100']:.4f} | "
            f"{metrics['mrr@10']:.4f} | {p50:.1f} | {p95:.1f} |"
        )
    print(
        f"index time {index_seconds:.1f} s; query latency p50 {result['query_p50_ms']} ms, p95 {result['query_p95_ms']} ms"
    )
    if args.json:
        print(json.dumps(result))
    return 0


# ---------------------------------------------------------------- lumina bench search


def _bench_search(args) -> int:
    import tempfile

    import numpy as np

    from lumina_assets.core import settings
    from lumina_assets.corpus.collections import collection_tables, ensure_eval_index, load_collection
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.indexing.lancedb_tables import IndexConfig, index_corpus, passage_rows
    from lumina_assets.search.engine import SearchEngine

    directory = Path(args.dir) if args.dir else settings.shared_data_dir() / "scifact"
    collection = load_collection(directory, split=args.split)
    embedder = Embedder()
    uri, index_seconds, _ = ensure_eval_index(collection, embedder)
    engine = SearchEngine(uri, embedder)
    engine.warm_up()
    queries = list(collection.queries.values())[: args.queries]
    for query in queries[:20]:  # warm caches, allocator, torch threads
        engine.search(query, k=10)

    full = []
    for query in queries:
        started = time.perf_counter()
        engine.search(query, k=10)
        full.append(time.perf_counter() - started)
    table = engine.store().passages_table
    bare, bare_no_embed = [], []
    for query in queries:
        started = time.perf_counter()
        vector = embedder.encode_query(query)
        middle = time.perf_counter()
        table.search(vector, vector_column_name="vector").distance_type("cosine").select(
            ["passage_id", "text", "_distance"]
        ).limit(10).to_list()
        done = time.perf_counter()
        bare.append(done - started)
        bare_no_embed.append(done - middle)
    embed_only = []
    for query in queries:
        started = time.perf_counter()
        embedder.encode_query(query)
        embed_only.append(time.perf_counter() - started)

    def pct(samples, q):
        return float(np.percentile(np.asarray(samples) * 1000, q))

    print(
        f"Search latency on {collection.name} ({table.count_rows()} passages), {len(queries)} queries, k=10:"
    )
    print("| what | p50 ms | p95 ms |")
    print("|---|---|---|")
    for name, samples in (
        ("full default pipeline (embed, parse, expand, 3 retrievers, fusion, boosts, contexts)", full),
        ("bare LanceDB vector query incl. query embedding", bare),
        ("bare LanceDB vector query, vector given", bare_no_embed),
        ("query embedding alone", embed_only),
    ):
        print(f"| {name} | {pct(samples, 50):.1f} | {pct(samples, 95):.1f} |")
    print(
        f"ratio full / bare (incl. embedding): p50 {pct(full, 50) / pct(bare, 50):.2f}x, "
        f"p95 {pct(full, 95) / pct(bare, 95):.2f}x"
    )

    # indexing throughput: the full incremental indexing path vs raw SentenceTransformer.encode, same texts
    papers, passages = collection_tables(_subset(collection, args.throughput_docs), embedder.token_counter())
    # the same texts the indexer embeds: each passage (title-prefixed) and each paper title
    texts = passage_rows(passages, papers, IndexConfig())["embed_text"].to_list() + papers["title"].to_list()
    model = embedder.model
    model.encode(texts[:64], batch_size=embedder.batch_size)
    started = time.perf_counter()
    model.encode(texts, batch_size=embedder.batch_size, normalize_embeddings=True, convert_to_numpy=True)
    raw_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        # the passage path alone (the texts timed raw above); stored sentence vectors are timed separately below
        stats = index_corpus(
            connect_lancedb(folder), passages, papers, embedder, IndexConfig(sentence_vectors=False)
        )
        index_total = time.perf_counter() - started
        from lumina_assets.indexing.sentence_vectors import backfill_from_index

        sentences = backfill_from_index(connect_lancedb(folder), embedder)
    raw_rate = len(texts) / raw_seconds
    index_rate = (stats.passages_embedded + stats.papers_embedded) / index_total
    print(f"Indexing throughput on {passages.height} passages + {papers.height} titles ({len(texts)} texts):")
    print(f"  raw SentenceTransformer.encode: {raw_rate:.1f} texts/s")
    print(
        f"  index_corpus (embed, merge_insert, FTS indexes, optimize): {index_rate:.1f} texts/s "
        f"({index_rate / raw_rate * 100:.0f}% of raw; embedding {stats.embed_seconds:.1f} s, "
        f"writes + indexes {stats.write_seconds:.1f} s)"
    )
    print(
        f"  + stored sentence vectors (evidence highlighting): {sentences['sentences']} sentences in "
        f"{sentences['seconds']:.1f} s"
    )
    return 0


def _subset(collection, documents: int):
    """The first `documents` documents of a collection."""
    from lumina_assets.corpus.collections import Collection

    ids = list(collection.corpus)[:documents]
    return Collection(
        collection.name, {i: collection.corpus[i] for i in ids}, {}, {}, collection.source_files
    )
