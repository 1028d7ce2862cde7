"""Retrieval evaluation on a test collection (`lumina eval beir`, `eval pinpoint`, `bench serve`): the collection's
own index, built once per corpus, model and index configuration, and the engine's run scored against the qrels."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from evals.metrics import ranking_metrics
from lumina_assets.corpus.collections import Collection, doc_id_for_paper, load_collection

# the keys `lumina eval beir` prints -> the ir_measures measures behind them
METRIC_KEYS = {"ndcg@10": "nDCG@10", "map@10": "AP@10", "recall@100": "R@100", "mrr@10": "RR@10"}


def _model_key(embedder) -> str:
    from lumina_assets.indexing.lancedb_tables import embedder_identity

    key = embedder_identity(embedder) or embedder.model_name
    fingerprint = getattr(embedder, "fingerprint", "")  # other weights at the same path: another index
    if isinstance(fingerprint, str) and fingerprint:
        key = f"{key}|{fingerprint}"
    form = getattr(embedder, "form", "")  # an index per numeric form (fp32 and int8 vectors are not mixed)
    if form == "int8":
        from lumina_assets.indexing.onnx_encoder import INT8_RECIPE

        form = f"int8-{INT8_RECIPE}"
    return f"{key}|{form}" if isinstance(form, str) and form not in ("", "fp32") else key


def eval_index_dir(collection: Collection, embedder, index_config) -> Path:
    """data/eval/<name>-<hash of corpus bytes + model + index config>/: one index per distinct setup."""
    from lumina_assets.core import settings
    from lumina_assets.indexing.lancedb_tables import TABLES_VERSION

    key = hashlib.sha256(
        f"{collection.fingerprint()}|{_model_key(embedder)}|{index_config.fingerprint()}|{TABLES_VERSION}".encode()
    ).hexdigest()[:12]
    return settings.data_dir() / "eval" / f"{collection.name}-{key}"


def ensure_eval_index(
    collection: Collection, embedder, index_config=None, *, log_fn=None
) -> tuple[str, float, bool]:
    """The collection's LanceDB index with its paper neighbour graph, built once: (uri, index_seconds, reused).
    A `complete.json` marker is written last, so an interrupted build is redone, not reused."""
    from lumina_assets.corpus.collections import collection_tables
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.lancedb_tables import IndexConfig, index_corpus
    from lumina_assets.search.neighbour_graph import keep_graph

    # retrieval needs no sentence vectors (`collection_index` adds them); the folder does not depend on it
    index_config = index_config or IndexConfig(sentence_vectors=False)
    folder = eval_index_dir(collection, embedder, index_config)
    marker = folder / "complete.json"
    uri = str(folder / "lancedb")
    if marker.exists():
        info = json.loads(marker.read_text())
        keep_graph(connect_lancedb(uri))
        return uri, float(info.get("index_seconds", 0.0)), True
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    papers, passages = collection_tables(collection, embedder.token_counter())
    chunk_seconds = time.perf_counter() - started
    db = connect_lancedb(uri)
    stats = index_corpus(db, passages, papers, embedder, index_config, log_fn=log_fn)
    keep_graph(db)
    total = time.perf_counter() - started
    info = {
        "collection": collection.name,
        "documents": len(collection.corpus),
        "passages": stats.passages_total,
        "model": embedder.model_name,
        "index_seconds": total,
        "chunk_seconds": chunk_seconds,
        "embed_seconds": stats.embed_seconds,
        "write_seconds": stats.write_seconds,
    }
    marker.write_text(json.dumps(info, indent=2))
    return uri, total, False


def load_first_split(directory: str | Path, splits: Iterable[str]) -> Collection:
    """The collection with the qrels of the first of `splits` it has; CollectionError naming the last failure."""
    from lumina_assets.corpus.collections import CollectionError

    last_error: Exception | None = None
    for split in splits:
        try:
            return load_collection(directory, split=split)
        except Exception as error:  # this split has no qrels: try the next
            last_error = error
    raise CollectionError(f"cannot load collection {directory}: {last_error}")


def collection_index(directory: str | Path, log=None, index: str | None = None):
    """(collection, embedder, index uri, reused): the collection's eval index (or `index`), with sentence vectors;
    its qrels from the first split of train, test and dev it has."""
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.indexing.sentence_vectors import backfill_from_index

    collection = load_first_split(directory, ("train", "test", "dev"))
    embedder = Embedder()
    if index:
        uri, reused = index, True
    else:
        uri, _, reused = ensure_eval_index(collection, embedder, log_fn=log)
    # eval indexes are built without sentence vectors (retrieval needs none): added here once, incrementally
    backfill_from_index(connect_lancedb(uri), embedder, log_fn=log)
    return collection, embedder, uri, reused


def query_vector_cache(engine, collection: Collection) -> dict:
    """Every query's vector for `engine.embedding_cache`, keyed by the texts the engine embeds, so ablation runs
    time search without query embedding. Each text is encoded alone, as search encodes it: the int8 form quantizes
    activations per batch, so a batched query would get a slightly different vector."""
    from lumina_assets.search.query_parser import parse_query

    texts: dict[str, None] = {}
    for text in collection.queries.values():
        cleaned = re.sub(r"\s+", " ", text).strip()[: engine.config.max_query_chars]
        texts[cleaned] = None
        texts[parse_query(cleaned).text or cleaned] = None
    keys = [t for t in texts if t]
    encode = getattr(engine.embedder, "encode_queries", engine.embedder.encode)
    return {key: np.asarray(encode([key]), dtype=np.float32)[0] for key in keys}


def run_queries(
    engine, collection: Collection, k: int = 100
) -> tuple[dict[str, dict[str, float]], list[float]]:
    """The engine's document ranking for every query, and each query's wall time in seconds."""
    run: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    for qid, text in collection.queries.items():
        started = time.perf_counter()
        ranking = engine.rank_documents(text, k=k)
        latencies.append(time.perf_counter() - started)
        run[qid] = {doc_id_for_paper(collection.name, pid): score for pid, score in ranking}
    return run, latencies


def evaluate_run(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """`METRIC_KEYS`' measures averaged over every query with a relevant document (unanswered ones count 0)."""
    means = ranking_metrics(qrels, run, METRIC_KEYS.values())
    return {key: means.get(name, 0.0) for key, name in METRIC_KEYS.items()}
