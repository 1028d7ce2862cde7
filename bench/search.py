"""`lumina bench search`: query latency against a bare LanceDB query, and indexing throughput; `lumina bench
relevance-line`: what each relevance line keeps on judged collections; `lumina bench inbox`: where the time goes
from a PDF dropped into the inbox to a searchable paper. Developer benches of the checkout (not installed)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def add_commands(commands, bench_commands) -> None:
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

    line = bench_commands.add_parser(
        "relevance-line",
        help="share of relevant / non-relevant results each relevance line keeps, on judged collections",
    )
    line.add_argument(
        "directories",
        nargs="*",
        help="BEIR or SMART folders (default ../shared/data/scifact and ../shared/data/cisi)",
    )
    line.add_argument("--split", default="train", help="qrels split of BEIR folders (default train)")
    line.add_argument("--depth", type=int, default=20, help="results judged per query (default 20)")
    line.add_argument(
        "--off-topic-queries",
        type=int,
        default=100,
        help="queries of each collection also run over the other collections' indexes (default 100)",
    )
    line.add_argument("--save", default=None, help="write every judged result as JSON lines here")
    line.set_defaults(handler=_bench_relevance_line)

    inbox = bench_commands.add_parser(
        "inbox", help="where the time goes from a PDF dropped into the inbox to a searchable paper"
    )
    inbox.add_argument("pdf", nargs="?", default=None, help="the PDF (default: the shared SPECTER PDF)")
    inbox.add_argument(
        "--db", default=None, help="an index to add it to (a copy is used; default: a new one)"
    )
    inbox.add_argument(
        "--daemon",
        action="store_true",
        help="instead: a fresh instance with a running dagster-daemon; drop the PDF into its inbox and time each run "
        "and step until `lumina search` finds the paper",
    )
    inbox.add_argument("--limit", type=float, default=600, help="give up after this many seconds (--daemon)")
    inbox.set_defaults(handler=_bench_inbox)


def _bench_search(args) -> int:
    import tempfile

    from evals.collection_eval import ensure_eval_index
    from evals.latency import percentile_ms
    from lumina_assets.core import settings
    from lumina_assets.corpus.collections import collection_tables, load_collection
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
        print(f"| {name} | {percentile_ms(samples, 50):.1f} | {percentile_ms(samples, 95):.1f} |")
    print(
        f"ratio full / bare (incl. embedding): p50 {percentile_ms(full, 50) / percentile_ms(bare, 50):.2f}x, "
        f"p95 {percentile_ms(full, 95) / percentile_ms(bare, 95):.2f}x"
    )

    # indexing throughput: the full incremental indexing path vs raw SentenceTransformer.encode, same texts
    papers, passages = collection_tables(_subset(collection, args.throughput_docs), embedder.token_counter())
    # the same texts the indexer embeds: each passage (title-prefixed)
    texts = passage_rows(passages, papers, IndexConfig())["embed_text"].to_list()
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
    index_rate = stats.passages_embedded / index_total
    print(f"Indexing throughput on {passages.height} passages of {papers.height} papers:")
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


def _bench_relevance_line(args) -> int:
    """Per collection (a train split's tuning half only), the kept shares at candidate lines on the cosine the
    relevance line uses, beside the same on the fused score (not comparable across queries, for contrast)."""
    import dataclasses

    from bench import relevance_fit
    from evals.collection_eval import doc_id_for_paper, ensure_eval_index
    from lumina_assets.core import settings
    from lumina_assets.corpus import splits
    from lumina_assets.corpus.collections import load_collection
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search import relevance
    from lumina_assets.search.engine import SearchEngine

    shared = settings.shared_data_dir()
    directories = args.directories or [shared / "scifact", shared / "cisi"]
    embedder = Embedder()
    judged: dict[str, list] = {}
    engines, asked = {}, {}
    for directory in directories:
        collection = load_collection(directory, split=args.split)
        ids, _ = splits.select(collection.queries, args.split, splits.TUNING)
        if not (Path(directory) / "qrels").is_dir():  # a SMART collection (CISI): no split, every query
            ids = list(collection.queries)
        uri, _, _ = ensure_eval_index(collection, embedder)
        engine = SearchEngine(uri, embedder)
        engine.warm_up()
        queries = {q: collection.queries[q] for q in ids}
        engines[collection.name], asked[collection.name] = engine, queries
        judged[collection.name] = relevance_fit.judged_results(
            engine,
            queries,
            collection.qrels,
            args.depth,
            doc_id=lambda paper_id, name=collection.name: doc_id_for_paper(name, paper_id),
        )
        relevant = sum(r.relevant for r in judged[collection.name])
        print(
            f"{collection.name}: {len(queries)} queries, top {args.depth}: {len(judged[collection.name])} results, "
            f"{relevant} judged relevant"
        )
    # one collection's queries over another's index: every result is off topic
    off_topic: dict[str, list] = {}
    for index_name, engine in engines.items():
        for query_name, queries in asked.items():
            if query_name != index_name:
                sample = dict(list(queries.items())[: args.off_topic_queries])
                name = f"{query_name} queries on {index_name}"
                off_topic[name] = relevance_fit.judged_results(engine, sample, None, args.depth)
    if args.save:
        with open(args.save, "w") as out:
            for name, results in judged.items():
                for result in results:
                    out.write(json.dumps({"collection": name, **dataclasses.asdict(result)}) + "\n")
            for name, results in off_topic.items():
                for result in results:
                    out.write(json.dumps({"collection": name, **dataclasses.asdict(result)}) + "\n")
    names = list(judged)
    crossed = list(off_topic)
    print(
        "\n| line (cosine) | "
        + " | ".join(f"{n}: relevant kept / others kept" for n in names)
        + "".join(f" | {n}: kept" for n in crossed)
        + " |"
    )
    print("|---|" + "---|" * (len(names) + len(crossed)))
    for line in sorted({round(0.15 + 0.025 * i, 3) for i in range(15)} | {relevance.RELEVANCE_LINE}):
        cells = [relevance_fit.kept_shares(judged[n], line) for n in names]
        mark = " (the line)" if abs(line - relevance.RELEVANCE_LINE) < 1e-9 else ""
        print(
            f"| {line:.3f}{mark} | "
            + " | ".join(f"{a:.1%} / {b:.1%}" for a, b in cells)
            + "".join(f" | {relevance_fit.kept_shares(off_topic[n], line)[1]:.1%}" for n in crossed)
            + " |"
        )
    share = f"{relevance_fit.KEEP_RELEVANT:.0%}"
    for name in names:
        fitted = relevance_fit.fit_line(judged[name])
        print(f"{name}: the highest cosine line keeping {share} of its relevant results: {fitted:.2f}")
        fused = relevance_fit.fit_line(judged[name], score=lambda r: r.fused)
        for other in (n for n in names if n != name):
            kept = relevance_fit.kept_shares(judged[other], fused, score=lambda r: r.fused)
            print(
                f"  a fused-score line fitted the same way on {name} ({fused:.2f}) keeps on {other}: "
                f"{kept[0]:.1%} of the relevant, {kept[1]:.1%} of the others"
            )
    return 0


def _bench_inbox(args) -> int:
    """The stages between an inbox drop and a searchable paper, each timed as the pipeline runs it: the sensors'
    fixed waits (configured), a run's step start (a fresh process importing the code location, what each step of
    the default multiprocess executor pays), metadata + parse + chunk, and the index update with sentence
    vectors (model load apart); then one search for the paper's title."""
    import shutil
    import subprocess
    import tempfile

    import polars as pl

    from lumina_assets.core import settings
    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
    from lumina_assets.corpus.local import pdf_metadata
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.parsing.chunking import model_token_counter, passages_for_paper
    from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser
    from lumina_assets.search.engine import SearchEngine
    from sensors.automation import automation_condition_sensor
    from sensors.inbox import INBOX_SETTLE_SECONDS, evaluate_inbox, inbox_sensor

    pdf = Path(args.pdf) if args.pdf else settings.shared_data_dir() / "pdfs" / "2020.acl-main.207.pdf"
    if args.daemon:
        return _bench_inbox_daemon(pdf, args.limit)
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        inbox = Path(folder) / "inbox"
        inbox.mkdir()
        shutil.copy(pdf, inbox / pdf.name)
        started = time.perf_counter()
        result = evaluate_inbox(inbox, None, settle_seconds=0)
        rows.append(("inbox sensor: one evaluation (scan, run request)", time.perf_counter() - started))
        assert result.run_requests, "the sensor saw no PDF"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import lumina_assets.definitions"], check=True)
        step_start = time.perf_counter() - started
        rows.append(("a run step's start: a fresh process importing the code location", step_start))
        started = time.perf_counter()
        paper = pdf_metadata(pdf)
        parsed = PyMuPdfParser().parse(pdf, paper.paper_id)
        passages = passages_for_paper(paper.paper_id, parsed=parsed, count_tokens=model_token_counter())
        rows.append((f"metadata + parse + chunk ({len(passages)} passages)", time.perf_counter() - started))
        started = time.perf_counter()
        embedder = Embedder()
        embedder.encode(["load the model"])
        rows.append(("embedding model load", time.perf_counter() - started))
        uri = str(Path(folder) / "lancedb")
        if args.db:
            shutil.copytree(args.db, uri)
        fields = ("paper_id", "title", "abstract", "authors", "year", "venue", "doi")
        papers = pl.DataFrame([{k: getattr(paper, k) for k in fields}])
        frame = pl.from_arrow(rows_to_table([p.to_row() for p in passages], PASSAGE_SCHEMA))
        db = connect_lancedb(uri)
        if args.db:  # the index keeps what it holds: the new paper joins its upstream tables
            old_papers = pl.from_arrow(db.open_table(indexing.PAPERS_TABLE).to_arrow().select(list(fields)))
            table = db.open_table(indexing.PASSAGES_TABLE).to_arrow()
            old = pl.from_arrow(table.select([c for c in PASSAGE_SCHEMA.names if c in table.schema.names]))
            papers = pl.concat([old_papers, papers], how="diagonal_relaxed")
            frame = pl.concat([old, frame], how="diagonal_relaxed")
        started = time.perf_counter()
        indexing.index_corpus(db, frame, papers, embedder, log_fn=lambda line: None)
        rows.append(("index update: passages, full text, sentence vectors", time.perf_counter() - started))
        started = time.perf_counter()
        found = SearchEngine(uri, embedder, background_loading=False).search(paper.title or "x", k=3)
        rows.append(("first search in a new process's engine", time.perf_counter() - started))
        assert any(c.paper_id == paper.paper_id for c in found), "the paper is not searchable"
    inbox_every = inbox_sensor.minimum_interval_seconds or 30
    automation_every = automation_condition_sensor.minimum_interval_seconds or 30
    work = sum(seconds for _, seconds in rows)
    print(f"{pdf.name}: from the inbox to searchable")
    print("| stage | seconds |")
    print("|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} |")
    print(
        f"| inbox sensor: settle wait (a file unchanged this long is taken) | {INBOX_SETTLE_SECONDS:.0f} (fixed) |"
    )
    print(f"| inbox sensor: next tick | 0–{inbox_every} (interval) |")
    print(
        f"| automation sensor: next tick, per hop from `papers` to the index | 0–{automation_every} (interval) |"
    )
    waits = INBOX_SETTLE_SECONDS + inbox_every / 2 + automation_every / 2
    print(
        f"measured work {work:.1f} s (one step start counted; the multiprocess executor pays one per step); "
        f"with the sensors' average waits {work + waits:.1f} s"
    )
    return 0


def _bench_inbox_daemon(pdf: Path, limit: float) -> int:
    """The whole way with a running daemon, on a fresh instance and data folder: seconds from the drop to the
    first search that finds the paper, and each run's launch, steps and gaps on the same clock."""
    import os
    import shutil
    import signal
    import subprocess
    import tempfile

    import dagster as dg

    from lumina_assets.core import settings
    from lumina_assets.corpus.local import pdf_metadata
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.memory_store import clear_open_stores
    from lumina_assets.search.stores import IndexNotBuilt

    folder = Path(tempfile.mkdtemp(prefix="lumina-inbox-bench-"))
    data, home, lancedb = folder / "data", folder / "dagster", str(folder / "data" / "lancedb")
    home.mkdir()
    root = Path(__file__).resolve().parents[1]
    # the instance `make ui` runs (run queue, pools, automation), not Dagster's defaults
    (home / "dagster.yaml").write_text((root / ".dagster_home" / "dagster.yaml").read_text(encoding="utf-8"))
    env = settings.child_environment(
        LUMINA_DATA_DIR=str(data), DAGSTER_HOME=str(home), LUMINA_LANCEDB_URI=lancedb
    )
    lumina = [sys.executable, "-m", "lumina_assets.cli.main"]
    subprocess.run([*lumina, "pools", "apply"], check=True, capture_output=True, env=env)
    daemon_bin = Path(sys.executable).parent / "dagster-daemon"
    log = open(folder / "daemon.log", "w")  # noqa: SIM115 (open while the daemon runs)
    daemon = subprocess.Popen(
        [str(daemon_bin), "run", "-w", str(root / "workspace.yaml")],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    paper_id, title = pdf_metadata(pdf).paper_id, pdf_metadata(pdf).title or pdf.stem
    embedder = Embedder()
    embedder.encode(["load the model before the clock starts"])
    found_after = None
    try:
        time.sleep(15)  # the daemon's first ticks
        (data / "inbox").mkdir(parents=True, exist_ok=True)
        dropped = time.time()
        shutil.copy(pdf, data / "inbox" / pdf.name)
        while time.time() - dropped < limit and found_after is None:
            time.sleep(2)
            clear_open_stores()  # a store opened while the index was still empty would be reused as it was
            try:
                engine = SearchEngine(lancedb, embedder, refresh_seconds=0, background_loading=False)
                if any(c.paper_id == paper_id for c in engine.search(title, k=5)):
                    found_after = time.time() - dropped
            except IndexNotBuilt:
                continue
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        log.close()
    instance = dg.DagsterInstance.from_config(str(home))
    print(f"{pdf.name} dropped at 0 s into a fresh instance's inbox (times from the drop)")
    print("| run / step | starts at | seconds |")
    print("|---|---|---|")
    for run in reversed(instance.get_runs()):
        stats = instance.get_run_stats(run.run_id)
        if not stats.start_time or stats.start_time < dropped:
            continue
        assets = ", ".join(k.to_user_string() for k in sorted(run.asset_selection or [], key=str)[:4])
        end = stats.end_time or time.time()
        print(
            f"| run {run.job_name} ({assets}…): launched | {(stats.launch_time or stats.start_time) - dropped:.1f} | |"
        )
        print(
            f"| run {run.job_name}: whole run | {stats.start_time - dropped:.1f} | {end - stats.start_time:.1f} |"
        )
        starts: dict[str, float] = {}
        workers: dict[str, float] = {}
        for record in instance.all_logs(run.run_id):
            event = record.dagster_event
            if event is None or not record.step_key:
                continue
            if event.event_type_value == "STEP_WORKER_STARTING":
                workers[record.step_key] = record.timestamp
            elif event.event_type_value == "STEP_START":
                starts[record.step_key] = record.timestamp
            elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and record.step_key in starts:
                began = starts[record.step_key]
                if record.step_key in workers:  # the multiprocess executor's process start for the step
                    waited = began - workers[record.step_key]
                    print(
                        f"| step {record.step_key}: worker start | {workers[record.step_key] - dropped:.1f} | {waited:.1f} |"
                    )
                print(f"| step {record.step_key} | {began - dropped:.1f} | {record.timestamp - began:.1f} |")
    print(
        f"searchable after {found_after:.1f} s"
        if found_after is not None
        else f"not searchable within {limit:.0f} s"
    )
    print(f"(instance and data left in {folder}; the daemon's log is daemon.log there)")
    return 0 if found_after is not None else 1


def _subset(collection, documents: int):
    """The first `documents` documents of a collection."""
    from lumina_assets.corpus.collections import Collection

    ids = list(collection.corpus)[:documents]
    return Collection(
        collection.name, {i: collection.corpus[i] for i in ids}, {}, {}, collection.source_files
    )
