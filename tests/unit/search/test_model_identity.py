"""The index records which embedding model built it (name and a fingerprint of the weights), and a query with
another model is refused whatever its dimension; an index written before identities were recorded still searches,
with a warning. Two hashing embedders with different seeds are two 64-d models under one name: only the
fingerprint tells them apart."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing import model_identity, table_ops
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder, default_model_path
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.stores import IndexModelMismatch

TOPICS = [
    ("Vitamin D and bone density", "Vitamin D supplements raise bone density in older adults."),
    ("Aspirin and stroke", "Daily aspirin lowers the risk of a second stroke."),
    ("Citation graphs for recommendation", "A graph neural network over citations recommends references."),
]
QUERY = "does vitamin d raise bone density"


def _build(uri: str, embedder) -> None:
    papers, passages = [], []
    for i, (title, abstract) in enumerate(TOPICS * 2):
        paper_id = f"doi:10.1/m{i}"
        papers.append(
            {"paper_id": paper_id, "title": title, "abstract": abstract, "year": 2020, "source": "t"}
        )
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder)


def _recorded(uri: str) -> model_identity.ModelIdentity:
    table = indexing.open_table(connect_lancedb(uri), indexing.PASSAGES_TABLE)
    return model_identity.of_schema(table.schema)


class NamedOnly:
    """Another 64-d model known by name only (a hub name has no local weights to fingerprint)."""

    model_name_or_path = "sentence-transformers/some-other-64d-model"
    dimension = 64

    def encode(self, texts, **_):
        return HashingEmbedder(seed=99).encode(texts)


def test_a_same_dimension_model_with_other_weights_is_refused(tmp_path):
    uri = str(tmp_path / "db")
    built_with = HashingEmbedder(seed=0)
    _build(uri, built_with)
    assert _recorded(uri) == model_identity.ModelIdentity("test-hashing-embedder", built_with.fingerprint)

    contexts = SearchEngine(uri, HashingEmbedder(seed=0)).search(QUERY, k=3)
    assert contexts and contexts[0].title == "Vitamin D and bone density"

    other = HashingEmbedder(seed=1)  # same name, same dimension, other weights
    assert other.dimension == built_with.dimension and other.model_id == built_with.model_id
    with pytest.raises(IndexModelMismatch) as refused:
        SearchEngine(uri, other).search(QUERY, k=3)
    message = str(refused.value)
    assert built_with.fingerprint in message and other.fingerprint in message
    assert "the index was built with test-hashing-embedder" in message


def test_a_same_dimension_model_of_another_name_is_refused(tmp_path):
    uri = str(tmp_path / "db")
    _build(uri, HashingEmbedder())
    with pytest.raises(IndexModelMismatch, match="query model is sentence-transformers/some-other-64d-model"):
        SearchEngine(uri, NamedOnly()).search(QUERY, k=3)


def test_an_index_without_a_recorded_model_still_searches_with_a_warning(tmp_path, monkeypatch, caplog):
    """An index written before identities were recorded: searchable (warned once), and rebuilding records it."""
    uri = str(tmp_path / "db")
    with monkeypatch.context() as patch:
        patch.setattr(model_identity, "record", lambda table, identity: None)  # what older code wrote
        _build(uri, HashingEmbedder())
    assert not _recorded(uri).known

    engine = SearchEngine(uri, HashingEmbedder())
    with caplog.at_level(logging.WARNING, logger="lumina_assets.search.engine"):
        assert engine.search(QUERY, k=3)[0].title == "Vitamin D and bone density"
        assert engine.search("aspirin stroke", k=3)
    warnings = [
        r.getMessage() for r in caplog.records if "cannot check that the query model" in r.getMessage()
    ]
    assert len(warnings) == 1 and "built before model identities were recorded" in warnings[0]

    _build(uri, HashingEmbedder())  # nothing to re-embed, but the identity is now written
    assert _recorded(uri).fingerprint == HashingEmbedder().fingerprint
    with pytest.raises(IndexModelMismatch):
        SearchEngine(uri, HashingEmbedder(seed=1)).search(QUERY, k=3)


def test_the_ann_rows_and_the_model_identity_share_the_vector_field(tmp_path):
    """Recording the model keeps the field's other metadata (the ANN training size) and vice versa."""
    uri = str(tmp_path / "db")
    _build(uri, HashingEmbedder())
    table = indexing.open_table(connect_lancedb(uri), indexing.PASSAGES_TABLE)
    table.update_field_metadata({"path": "vector", "metadata": {table_ops.ANN_TRAINED_ROWS: "123"}})
    model_identity.record(table, model_identity.ModelIdentity("m", "f"))
    metadata = table.schema.field("vector").metadata
    assert metadata[table_ops.ANN_TRAINED_ROWS.encode()] == b"123"
    assert model_identity.of_schema(table.schema) == model_identity.ModelIdentity("m", "f")


def test_the_real_model_fingerprint_follows_the_weights_not_the_path(tmp_path, data_dir):
    """The bundled MiniLM copied elsewhere has the same fingerprint; one changed byte of its weights does not
    (no model is loaded: the fingerprint hashes the files)."""
    bundled = Embedder(default_model_path())
    copy = tmp_path / "minilm-copy"
    shutil.copytree(default_model_path(), copy)
    assert Embedder(str(copy)).fingerprint == bundled.fingerprint != ""

    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    changed = Embedder(str(copy)).fingerprint
    assert changed and changed != bundled.fingerprint
    # the on-disk memo is keyed by size and mtime, so the next process reads it instead of hashing 90 MB
    assert (data_dir / "models" / "fingerprints.json").exists()
    index = model_identity.ModelIdentity(bundled.model_id, bundled.fingerprint)
    query = model_identity.ModelIdentity(str(copy), changed)
    assert "query model is" in (model_identity.mismatch(index, query) or "")
    assert (
        model_identity.mismatch(index, model_identity.ModelIdentity(str(copy), bundled.fingerprint)) is None
    )


def test_vectors_of_the_wrong_model_really_disagree():
    """Why the refusal matters: the two same-dimension models put the same text in unrelated places."""
    a, b = HashingEmbedder(seed=0), HashingEmbedder(seed=1)
    same = float(np.dot(a.encode_query(QUERY), a.encode_query(QUERY)))
    across = float(np.dot(a.encode_query(QUERY), b.encode_query(QUERY)))
    assert same > 0.99 and across < 0.5


def test_the_passage_index_asset_records_and_reports_its_model(data_dir):
    """Through the asset: the shipped passage_index writes the identity search checks, and shows it."""
    import dagster as dg

    from lumina_assets.core import tables
    from lumina_assets.core.settings import lancedb_uri
    from lumina_assets.defs import indexing as index_defs
    from resources.embedder import EmbedderResource
    from resources.lancedb import LanceDBResource

    class HashingEmbedderResource(EmbedderResource):
        def setup_for_execution(self, context) -> None:  # no model to load
            pass

        def get_embedder(self):
            return HashingEmbedder(seed=5)

    papers = [
        {"paper_id": f"p{i}", "title": title, "abstract": text} for i, (title, text) in enumerate(TOPICS)
    ]
    passages = [
        p.to_row()
        for row in papers
        for p in passages_for_paper(row["paper_id"], title=row["title"], abstract=row["abstract"])
    ]
    tables.write(tables.PAPERS, pl.DataFrame(papers))
    tables.write(tables.PASSAGES, pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA)), "batch-1")
    result = dg.materialize(
        [index_defs.passage_index],
        resources={"lancedb": LanceDBResource(), "embedder": HashingEmbedderResource()},
    )
    assert result.success
    [event] = result.get_asset_materialization_events()
    shown = event.step_materialization_data.materialization.metadata["embedding_model_recorded"].value
    assert shown == f"test-hashing-embedder (weights {HashingEmbedder(seed=5).fingerprint})"
    assert _recorded(lancedb_uri()).fingerprint == HashingEmbedder(seed=5).fingerprint
    with pytest.raises(IndexModelMismatch):
        SearchEngine(lancedb_uri(), HashingEmbedder(seed=0)).search(QUERY, k=3)


def test_lumina_serve_refuses_an_index_built_with_another_model(tmp_path, capsys):
    """The server's warm-up meets the refusal before it listens: exit 2 and a message naming both models."""
    from lumina_assets.cli.main import main

    uri = str(tmp_path / "db")
    _build(uri, HashingEmbedder())
    assert main(["serve", "--db", uri, "--port", "0"]) == 2
    message = capsys.readouterr().err
    assert "Cannot serve this index" in message and "test-hashing-embedder" in message
