"""Incremental indexing on real SciFact abstracts: only new or changed passages are embedded; the Dagster asset
and its checks run against partitioned `passages` and the `papers` table."""

from __future__ import annotations

import hashlib
import json

import dagster as dg
import numpy as np
import polars as pl
import pytest

from lumina_assets.core import tables
from lumina_assets.corpus.collections import Collection, collection_tables
from lumina_assets.indexing import index_rows, table_ops
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource


class CountingEmbedder:
    """Wraps the real embedder and records every text it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def encode(self, texts):
        self.calls.append(list(texts))
        return self.inner.encode(texts)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]

    def reset(self) -> None:
        self.calls = []


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(batch_size=32)


@pytest.fixture(scope="module")
def scifact_docs(shared_data) -> dict[str, dict[str, str]]:
    docs = {}
    with (shared_data / "scifact" / "corpus.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            docs[row["_id"]] = {"title": row["title"], "text": row["text"]}
            if len(docs) == 13:
                break
    return docs


def _tables(docs, embedder):
    return collection_tables(Collection("scifact", docs, {}, {}), embedder.token_counter())


def _rows(db, name):
    table = indexing.open_table(db, name)
    return table.to_arrow().to_pylist() if table is not None else []


def test_adding_one_paper_embeds_only_its_passages(tmp_path, scifact_docs, embedder):
    counting = CountingEmbedder(embedder)
    db = connect_lancedb(str(tmp_path / "db"))
    first = dict(list(scifact_docs.items())[:12])
    papers, passages = _tables(first, embedder)
    stats = indexing.index_corpus(db, passages, papers, counting)
    assert stats.passages_embedded == passages.height
    assert len(_rows(db, indexing.PASSAGES_TABLE)) == passages.height
    assert len(_rows(db, indexing.PAPERS_TABLE)) == 12

    # the same input again: nothing is embedded, nothing duplicated
    counting.reset()
    again = indexing.index_corpus(db, passages, papers, counting)
    assert counting.embedded == [] and again.passages_embedded == 0
    assert len(_rows(db, indexing.PASSAGES_TABLE)) == passages.height

    # one more paper: exactly its passages (title-prefixed) are embedded
    new_id = list(scifact_docs)[12]
    papers2, passages2 = _tables(scifact_docs, embedder)
    new_passages = passages2.filter(pl.col("paper_id") == f"beir-scifact:{new_id}")
    counting.reset()
    stats = indexing.index_corpus(db, passages2, papers2, counting)
    assert stats.passages_embedded == new_passages.height
    embedded_passage_texts = counting.calls[0]
    assert len(embedded_passage_texts) == new_passages.height
    assert all(scifact_docs[new_id]["title"] in text for text in embedded_passage_texts)
    # with the passages, the sentences of its passages only (stored for evidence highlighting)
    sentence_texts = [t for call in counting.calls[1:] for t in call]
    assert sentence_texts and all(s in scifact_docs[new_id]["text"] for s in sentence_texts)
    stored = _rows(db, indexing.PASSAGES_TABLE)
    assert len(stored) == passages2.height
    assert len({row["passage_id"] for row in stored}) == len(stored)


def test_changed_text_reembeds_that_paper_only_and_metadata_reuses_vectors(tmp_path, scifact_docs, embedder):
    counting = CountingEmbedder(embedder)
    db = connect_lancedb(str(tmp_path / "db"))
    docs = dict(list(scifact_docs.items())[:6])
    papers, passages = _tables(docs, embedder)
    indexing.index_corpus(db, passages, papers, counting)
    target = list(docs)[2]
    before = {r["passage_id"]: np.asarray(r["vector"]) for r in _rows(db, indexing.PASSAGES_TABLE)}

    changed = {**docs, target: {"title": docs[target]["title"], "text": "Aspirin lowers the risk of stroke."}}
    papers2, passages2 = _tables(changed, embedder)
    counting.reset()
    stats = indexing.index_corpus(db, passages2, papers2, counting)
    assert counting.calls == [
        ["" + docs[target]["title"] + ". Aspirin lowers the risk of stroke."],
        ["Aspirin lowers the risk of stroke."],  # its one sentence, for evidence highlighting
    ]
    assert stats.passages_embedded == 1
    # the paper had more passages before: the stale ones are pruned
    ids_now = {r["passage_id"] for r in _rows(db, indexing.PASSAGES_TABLE)}
    assert ids_now == set(passages2["passage_id"].to_list())

    # metadata-only change (a DOI appears): no embedding, the stored vector is kept, the DOI is searchable
    papers3 = papers2.with_columns(
        pl.when(pl.col("paper_id") == f"beir-scifact:{list(docs)[0]}")
        .then(pl.lit("10.1000/xyz"))
        .otherwise(None)
        .alias("doi")
    )
    counting.reset()
    stats = indexing.index_corpus(db, passages2, papers3, counting)
    assert counting.embedded == []
    assert stats.passages_metadata_updated >= 1
    rows = {r["passage_id"]: r for r in _rows(db, indexing.PASSAGES_TABLE)}
    first_passage = f"beir-scifact:{list(docs)[0]}#abstract:0"
    assert rows[first_passage]["doi"] == "10.1000/xyz"
    assert rows[first_passage]["url"] == "https://doi.org/10.1000/xyz"
    np.testing.assert_allclose(np.asarray(rows[first_passage]["vector"]), before[first_passage], rtol=1e-6)


def test_switching_the_embedding_model_reembeds_everything(tmp_path, scifact_docs, embedder):
    """Two models' vectors must never share a table, even when their dimensions agree."""
    db = connect_lancedb(str(tmp_path / "db"))
    docs = dict(list(scifact_docs.items())[:4])
    papers, passages = _tables(docs, embedder)
    indexing.index_corpus(db, passages, papers, CountingEmbedder(embedder))

    other_model = CountingEmbedder(embedder)
    other_model.model_name_or_path = "sentence-transformers/another-384-d-model"
    stats = indexing.index_corpus(db, passages, papers, other_model)
    assert stats.passages_embedded == passages.height
    again = CountingEmbedder(embedder)
    again.model_name_or_path = other_model.model_name_or_path
    assert indexing.index_corpus(db, passages, papers, again).passages_embedded == 0


def test_vectors_are_normalized_and_full_text_index_exists(tmp_path, scifact_docs, embedder):
    db = connect_lancedb(str(tmp_path / "db"))
    papers, passages = _tables(dict(list(scifact_docs.items())[:3]), embedder)
    indexing.index_corpus(db, passages, papers, embedder)
    table = indexing.open_table(db, indexing.PASSAGES_TABLE)
    vectors = table_ops.vectors_from_arrow(table.to_arrow()["vector"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    title_word = scifact_docs[list(scifact_docs)[0]]["title"].split()[0]
    hits = table.search(title_word, query_type="fts").limit(3).to_list()
    assert hits and hits[0]["paper_id"] == f"beir-scifact:{list(scifact_docs)[0]}"


def test_passage_index_asset_and_checks(data_dir, scifact_docs, embedder, monkeypatch):
    monkeypatch.setenv("LUMINA_SENTENCE_VECTORS", "0")  # the opt-out first; the default stores them below
    papers, passages = _tables(dict(list(scifact_docs.items())[:5]), embedder)
    batch_one = passages.filter(pl.col("paper_id").is_in(papers["paper_id"].head(3).to_list()))
    batch_two = passages.filter(~pl.col("paper_id").is_in(papers["paper_id"].head(3).to_list()))
    tables.write(tables.PASSAGES, batch_one, "batch-1")
    tables.write(tables.PASSAGES, batch_two, "batch-2")
    tables.write(tables.PAPERS, papers)

    from lumina_assets.defs.indexing import (
        passage_index,
        passage_index_row_count,
        passage_index_vector_dimension,
    )

    result = dg.materialize(
        [passage_index, passage_index_row_count, passage_index_vector_dimension],
        resources={"lancedb": LanceDBResource(), "embedder": EmbedderResource(batch_size=32)},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    materialization = result.asset_materializations_for_node("passage_index")[0]
    assert materialization.metadata["passages"].value == passages.height
    assert materialization.metadata["vector_dimension"].value == embedder.dimension
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} == {"passage_index_row_count", "passage_index_vector_dimension"}
    assert all(c.passed for c in checks)
    assert (data_dir / "lancedb").is_dir()
    # LUMINA_SENTENCE_VECTORS=0 leaves sentence vectors out (lumina serve fills them in the background then)
    from lumina_assets.indexing.sentence_vectors import SENTENCES_TABLE

    db = connect_lancedb(str(data_dir / "lancedb"))
    assert materialization.metadata["sentences_embedded"].value == 0
    assert indexing.open_table(db, SENTENCES_TABLE) is None
    monkeypatch.delenv("LUMINA_SENTENCE_VECTORS")  # the default: stored, their cost beside the passages'
    again = dg.materialize(
        [passage_index],
        resources={"lancedb": LanceDBResource(), "embedder": EmbedderResource(batch_size=32)},
        instance=dg.DagsterInstance.ephemeral(),
    )
    stored = again.asset_materializations_for_node("passage_index")[0].metadata
    assert stored["passages_embedded"].value == 0 and stored["sentences_embedded"].value > 0
    assert stored["sentences_per_second"].value > 0 and stored["sentence_seconds"].value > 0
    assert indexing.open_table(db, SENTENCES_TABLE).count_rows() == passages.height


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text: fast, for index mechanics that do not need meaning."""

    model_name_or_path = "test/hash-embedder"
    dimension = 64

    def encode(self, texts):
        seeds = [int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) for t in texts]
        vectors = np.stack([np.random.default_rng(s).standard_normal(self.dimension) for s in seeds])
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_ann_index_is_created_once_the_table_is_large_enough(tmp_path):
    """Below `ann_min_rows` a flat scan; at or above it an IVF_SQ index that vector search then uses."""
    docs = {
        str(i): {"title": f"Paper number {i}", "text": f"Abstract {i} about topic {i % 7}."}
        for i in range(600)
    }
    papers, passages = collection_tables(Collection("ann", docs, {}, {}))
    db = connect_lancedb(str(tmp_path / "db"))
    embedder = HashEmbedder()
    config = indexing.IndexConfig(ann_min_rows=500)

    small = indexing.index_corpus(db, passages[:100], papers[:100], embedder, config)
    assert not small.ann_index

    stats = indexing.index_corpus(db, passages, papers, embedder, config)
    assert stats.ann_index
    table = indexing.open_table(db, indexing.PASSAGES_TABLE)
    vector_indexes = [i for i in table.list_indices() if "vector" in (i.columns or [])]
    assert vector_indexes and vector_indexes[0].index_type == "IvfSq"
    target = passages.row(42, named=True)
    title = docs[target["paper_id"].split(":", 1)[1]]["title"]
    probe = embedder.encode([index_rows.passage_embed_text(title, target["text"])])[0]
    hits = (
        table.search(probe, vector_column_name="vector")
        .distance_type("cosine")
        .nprobes(16)
        .limit(3)
        .to_list()
    )
    assert hits[0]["passage_id"] == target["passage_id"]

    again = indexing.index_corpus(db, passages, papers, embedder, config)
    assert again.ann_index and not any("ANN index" in note for note in again.notes)  # created once, kept


def test_ann_index_is_retrained_only_when_the_table_has_grown(tmp_path):
    """New batches join the ANN index through optimize(); it is retrained once the table holds
    `ann_retrain_growth` times the rows they were trained on, and a new row is searchable at once either way."""
    docs = {
        str(i): {"title": f"Paper number {i}", "text": f"Abstract {i} about topic {i % 7}."}
        for i in range(1100)
    }
    papers, passages = collection_tables(Collection("ann", docs, {}, {}))
    db = connect_lancedb(str(tmp_path / "db"))
    embedder = HashEmbedder()
    config = indexing.IndexConfig(ann_min_rows=500, ann_retrain_growth=2.0)
    table_of = {p: passages.filter(passages["paper_id"] == p) for p in papers["paper_id"].to_list()}

    def first(n):
        ids = papers["paper_id"].to_list()[:n]
        return pl.concat([table_of[p] for p in ids]), papers.filter(papers["paper_id"].is_in(ids))

    trained = indexing.index_corpus(db, *first(520), embedder, config)
    assert any("ANN index" in note and "retrained" not in note for note in trained.notes)
    grown = indexing.index_corpus(db, *first(900), embedder, config)  # 1.7x: folded in, not retrained
    assert grown.ann_index and not any("ANN index" in note for note in grown.notes)
    table = indexing.open_table(db, indexing.PASSAGES_TABLE)
    newest = table.search().where("paper_id = 'beir-ann:899'").limit(1).to_list()[0]
    assert (
        table.search(newest["vector"]).distance_type("cosine").limit(1).to_list()[0]["paper_id"]
        == "beir-ann:899"
    )
    doubled = indexing.index_corpus(db, *first(1100), embedder, config)  # 2.1x the training rows: retrained
    assert any("retrained" in note for note in doubled.notes)
    assert table_ops.ann_trained_rows(indexing.open_table(db, indexing.PASSAGES_TABLE), "vector") == 1100


def test_an_ann_index_of_another_kind_is_rebuilt_once(tmp_path):
    """An index built before the ANN kind changed (IVF_HNSW_SQ) is rebuilt as IVF_SQ by the next index run even
    though the table has not grown, and kept after that."""
    from lancedb.index import HnswSq

    docs = {str(i): {"title": f"Paper {i}", "text": f"Abstract {i} about topic {i % 7}."} for i in range(600)}
    papers, passages = collection_tables(Collection("ann", docs, {}, {}))
    db = connect_lancedb(str(tmp_path / "db"))
    embedder = HashEmbedder()
    config = indexing.IndexConfig(ann_min_rows=500)
    indexing.index_corpus(db, passages, papers, embedder, config)
    table = indexing.open_table(db, indexing.PASSAGES_TABLE)
    table.create_index("vector", config=HnswSq(distance_type="cosine", num_partitions=2), replace=True)
    assert table_ops.ann_index_type(table, "vector") == "IvfHnswSq"

    rebuilt = indexing.index_corpus(db, passages, papers, embedder, config)
    assert any("rebuilt from IvfHnswSq" in note for note in rebuilt.notes)
    table = indexing.open_table(db, indexing.PASSAGES_TABLE)
    assert table_ops.ann_index_type(table, "vector") == table_ops.ANN_INDEX_TYPE == "IvfSq"
    kept = indexing.index_corpus(db, passages, papers, embedder, config)
    assert not any("ANN index" in note for note in kept.notes)


def test_probes_follow_the_partitions_the_index_was_trained_with(tmp_path):
    """sqrt(rows) partitions: a fixed share of them is probed (recall holds as the table grows), never fewer
    than the configured minimum, and the minimum alone where no training size is recorded."""
    import pyarrow as pa

    db = connect_lancedb(str(tmp_path / "db"))
    table = db.create_table(
        "t", pa.table({"vector": pa.FixedSizeListArray.from_arrays(pa.array([0.0] * 8), 4)})
    )
    assert table_ops.ann_probes(table, "vector", 60, 0.06) == 60  # nothing recorded
    for rows, probes in ((100_000, 60), (1_000_000, 60), (10_000_000, 190), (100_000_000, 600)):
        table.update_field_metadata({"path": "vector", "metadata": {table_ops.ANN_TRAINED_ROWS: str(rows)}})
        assert table_ops.ann_partitions(rows) == round(rows**0.5)
        assert table_ops.ann_probes(table, "vector", 60, 0.06) == probes


def test_a_selective_filter_finds_every_admitted_passage_past_the_ann_index(tmp_path, monkeypatch):
    """An author's few passages lie in partitions a query may not probe; a filter admitting few rows is searched
    exactly, so the vector run returns every admitted passage (the ANN path alone misses most of them)."""
    from lumina_assets.search import stores
    from lumina_assets.search.stores import Filters, LanceStore

    docs = {str(i): {"title": f"Paper {i}", "text": f"Abstract {i} about topic {i % 7}."} for i in range(600)}
    papers, passages = collection_tables(Collection("ann", docs, {}, {}))
    db = connect_lancedb(str(tmp_path / "db"))
    embedder = HashEmbedder()
    assert indexing.index_corpus(
        db, passages, papers, embedder, indexing.IndexConfig(ann_min_rows=500)
    ).ann_index
    wanted = tuple(f"beir-ann:{i}" for i in (3, 250, 411, 597))
    admitted = passages.filter(pl.col("paper_id").is_in(wanted)).height
    store = LanceStore(db, nprobes=1, probe_share=0.0)  # one partition of ~24 probed
    query = embedder.encode(["Paper 250. Abstract 250 about topic 5."])[0]

    def found() -> set[str]:
        store._admitted_counts.clear()
        run = store.passage_vector_run(query, 50, Filters(paper_ids=wanted))
        assert {paper for _, _, paper in run.hits} <= set(wanted)
        return {passage for passage, _, _ in run.hits}

    assert len(found()) == admitted
    monkeypatch.setattr(stores, "EXACT_SEARCH_MAX_ROWS", 0)  # the ANN path alone
    assert len(found()) < admitted


def test_a_server_answers_from_the_loaded_corpus_while_a_new_version_loads(tmp_path, monkeypatch):
    """`reload_in_background` (what `lumina serve` uses): a new table version does not stall the query that
    notices it; the loaded small-corpus store answers (without the new paper) until the new one is in, then the
    new paper is found."""
    import threading
    import time

    from lumina_assets.search import memory_store as stores
    from lumina_assets.search.engine import SearchEngine

    monkeypatch.setattr(stores, "_STORES", {})
    monkeypatch.setattr(stores, "_RELOADING", set())
    docs = {
        str(i): {"title": f"Paper {i}", "text": f"Abstract about marker{i} and topic {i % 7}."}
        for i in range(40)
    }
    papers, passages = collection_tables(Collection("srv", docs, {}, {}))
    db_path = str(tmp_path / "db")
    db = connect_lancedb(db_path)
    embedder = HashEmbedder()
    first = papers["paper_id"].to_list()[:39]
    indexing.index_corpus(
        db,
        passages.filter(pl.col("paper_id").is_in(first)),
        papers.filter(pl.col("paper_id").is_in(first)),
        embedder,
    )
    server = SearchEngine(db_path, embedder, refresh_seconds=0, reload_in_background=True)
    assert server.search("marker3", k=3)[0].paper_id == "beir-srv:3"
    loaded = server.store()
    assert isinstance(loaded, stores.MemoryStore)

    indexing.index_corpus(db, passages, papers, embedder)  # a new batch: paper 39
    gate = threading.Event()
    load = stores.MemoryStore.__init__

    def held_load(self, *args, **kwargs):
        gate.wait(30)  # holds the reload so the test sees the loaded store answering meanwhile
        load(self, *args, **kwargs)

    monkeypatch.setattr(stores.MemoryStore, "__init__", held_load)
    started = time.perf_counter()
    assert "beir-srv:39" not in {c.paper_id for c in server.search("marker39", k=5)}
    assert time.perf_counter() - started < 10 and server.store() is loaded
    gate.set()
    deadline = time.monotonic() + 30
    while server.store() is loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.store() is not loaded
    assert server.search("marker39", k=5)[0].paper_id == "beir-srv:39"
