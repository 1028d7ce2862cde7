"""The ONNX fast path for query encoding: same vectors as sentence-transformers, exported once, safe fallbacks."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from resources.embedder import Embedder
from resources.onnx_query import OnnxQueryEncoder, OnnxUnavailable, _cache_key

pytestmark = pytest.mark.slow

QUERIES = [
    "0-dimensional biomaterials show inductive properties.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "Vitamin D",
    "What is the effect of aspirin on the risk of colorectal cancer in people over 60 years old? " * 12,
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(query_backend="torch")


@pytest.fixture(scope="module")
def exported(embedder, tmp_path_factory) -> OnnxQueryEncoder:
    cache = tmp_path_factory.mktemp("models")
    return OnnxQueryEncoder(embedder.model, embedder.model_name_or_path, cache, normalize=True)


def test_onnx_vectors_match_sentence_transformers(embedder, exported):
    reference = embedder.encode(QUERIES)
    fast = exported.encode(QUERIES)  # one padded batch, including a query past the 256-token limit
    assert fast.shape == reference.shape == (len(QUERIES), 384)
    assert np.abs(fast - reference).max() < 1e-4
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    single = exported.encode([QUERIES[0]])[0]
    assert np.abs(single - reference[0]).max() < 1e-4


def test_export_is_reused_not_redone(embedder, exported):
    modified = exported.path.stat().st_mtime_ns
    again = OnnxQueryEncoder(
        embedder.model, embedder.model_name_or_path, exported.path.parent, normalize=True
    )
    assert again.path == exported.path
    assert exported.path.stat().st_mtime_ns == modified
    assert list(exported.path.parent.glob("*.partial")) == []


def test_corrupt_export_is_dropped_with_a_reason(embedder, tmp_path):
    broken = tmp_path / f"{_cache_key(embedder.model_name_or_path)}.onnx"
    broken.write_bytes(b"not an onnx model")
    with pytest.raises(OnnxUnavailable, match="cannot load"):
        OnnxQueryEncoder(embedder.model, embedder.model_name_or_path, tmp_path, normalize=True)
    assert not broken.exists()  # the next process exports a fresh copy


def test_torch_backend_never_builds_the_fast_path(embedder):
    vector = embedder.encode_query(QUERIES[0])
    assert embedder.query_backend_used == "sentence-transformers"
    assert embedder._query_encoder is None
    assert np.abs(vector - embedder.encode([QUERIES[0]])[0]).max() == 0


def test_unsupported_pooling_falls_back_or_raises(embedder, tmp_path, caplog):
    """A CLS-pooled model: `auto` logs why and stays on sentence-transformers, `onnx` refuses."""
    transformer = list(embedder.model)[0]
    cls_model = [transformer, type("Pooling", (), {"pooling_mode": "cls"})()]
    with pytest.raises(OnnxUnavailable, match="pooling mode 'cls'"):
        OnnxQueryEncoder(cls_model, "cls-model", tmp_path, normalize=True)

    auto = Embedder(embedder.model_name_or_path, query_backend="auto")
    auto._model = cls_model
    auto.encode = lambda texts: np.zeros((len(texts), 384), dtype=np.float32)
    with caplog.at_level(logging.WARNING, logger="resources.embedder"):
        assert auto.encode_query("a query").shape == (384,)
    assert auto.query_backend_used == "sentence-transformers"
    assert "pooling mode 'cls'" in caplog.text

    strict = Embedder(embedder.model_name_or_path, query_backend="onnx")
    strict._model = cls_model
    with pytest.raises(OnnxUnavailable, match="pooling mode 'cls'"):
        strict.encode_query("a query")


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="query_backend"):
        Embedder(query_backend="tensorrt")
