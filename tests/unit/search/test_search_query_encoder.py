"""The ONNX fast path for query encoding: same vectors as sentence-transformers, exported once, safe fallbacks."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from lumina_assets.core import settings
from lumina_assets.indexing import onnx_encoder as onnx_query
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.indexing.onnx_encoder import OnnxQueryEncoder, OnnxUnavailable

pytestmark = pytest.mark.slow
PROJECT_ROOT = settings.PROJECT_ROOT

QUERIES = [
    "0-dimensional biomaterials show inductive properties.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "Vitamin D",
    "What is the effect of aspirin on the risk of colorectal cancer in people over 60 years old? " * 12,
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def _reference(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """sentence-transformers' own vectors, the reference the ONNX path is checked against."""
    return embedder.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)


@pytest.fixture(scope="module")
def exported(embedder, tmp_path_factory) -> OnnxQueryEncoder:
    cache = tmp_path_factory.mktemp("data") / "models"
    return onnx_query.export(embedder.model, embedder.model_name_or_path, cache)


def test_onnx_vectors_match_sentence_transformers(embedder, exported):
    reference = _reference(embedder, QUERIES)
    fast = exported.encode(QUERIES)  # one padded batch, including a query past the 256-token limit
    assert fast.shape == reference.shape == (len(QUERIES), 384)
    assert np.abs(fast - reference).max() < 1e-4
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    single = exported.encode([QUERIES[0]])[0]
    assert np.abs(single - reference[0]).max() < 1e-4


def test_export_is_fused_and_leaves_the_loaded_model_as_it_was(embedder, exported):
    """The export is traced with eager attention and fused (one Attention node per layer); the model that keeps
    encoding documents in this process is not switched to eager attention by it."""
    import onnx

    operators = [node.op_type for node in onnx.load(str(exported.path)).graph.node]
    layers = embedder.model[0].auto_model.config.num_hidden_layers
    assert operators.count("Attention") == layers
    assert len(operators) < 100  # the plain trace has ~670 nodes
    assert embedder.model[0].auto_model.config._attn_implementation != "eager"


def test_a_fusion_that_changes_the_numbers_falls_back_to_the_plain_export(
    embedder, tmp_path, monkeypatch, caplog
):
    def corrupting_fusion(onnx_path, config):
        """Stands in for a fusion that breaks the graph: scales the embeddings table."""
        import onnx
        from onnx import numpy_helper

        model = onnx.load(str(onnx_path))
        for initializer in model.graph.initializer:
            if "word_embeddings" in initializer.name:
                initializer.CopyFrom(
                    numpy_helper.from_array(numpy_helper.to_array(initializer) * 3, initializer.name)
                )
        onnx.save(model, str(onnx_path))
        return True

    monkeypatch.setattr(onnx_query, "_fuse_transformer_ops", corrupting_fusion)
    with caplog.at_level(logging.WARNING):
        encoder = onnx_query.export(embedder.model, embedder.model_name_or_path, tmp_path)
    assert "using the unfused export" in caplog.text
    assert np.abs(encoder.encode(QUERIES[:2]) - _reference(embedder, QUERIES[:2])).max() < 1e-4


def test_export_is_reused_not_redone(embedder, exported):
    modified = exported.path.stat().st_mtime_ns
    again = OnnxQueryEncoder.load(embedder.model_name_or_path, exported.path.parent)
    assert again.path == exported.path
    assert exported.path.stat().st_mtime_ns == modified
    assert sorted(p.suffix for p in exported.path.parent.iterdir()) == [".json", ".json", ".onnx"]
    with pytest.raises(FileNotFoundError):  # another model has no export yet
        OnnxQueryEncoder.load("another-model", exported.path.parent)


def test_a_search_only_process_never_imports_torch(exported):
    """With the export cached, encoding a query needs onnxruntime and tokenizers only (fast first search)."""
    script = (
        "import sys; from lumina_assets.indexing.embedding import Embedder; e = Embedder(); v = e.encode_query('vitamin D'); "
        "print(e.query_backend_used, v.shape[0], *(m in sys.modules for m in ('torch', 'transformers', 'dagster')))"
    )
    assert _fresh_process_output(script, exported) == ["onnxruntime", "384", "False", "False", "False"]


def _fresh_process_output(script: str, exported) -> list[str]:
    """The words `script` prints in a new Python process whose data dir holds the cached export."""
    env = {**os.environ, "LUMINA_DATA_DIR": str(exported.path.parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_corrupt_export_is_dropped_with_a_reason(embedder, tmp_path):
    model_path = embedder.model_name_or_path
    onnx_file, tokenizer_file, settings_file = onnx_query._paths(tmp_path, model_path)
    for path in (onnx_file, tokenizer_file, settings_file):
        path.write_bytes(b"{}")
    with pytest.raises(OnnxUnavailable, match="cannot load"):
        OnnxQueryEncoder.load(model_path, tmp_path)
    assert not onnx_file.exists() and not settings_file.exists()  # the next process exports a fresh copy


def test_unsupported_pooling_falls_back_or_raises(embedder, tmp_path, caplog):
    """A CLS-pooled model cannot be exported: the embedder logs why and stays on sentence-transformers."""
    transformer = list(embedder.model)[0]
    cls_model = [transformer, type("Pooling", (), {"pooling_mode": "cls"})()]
    with pytest.raises(OnnxUnavailable, match="pooling mode 'cls'"):
        onnx_query.export(cls_model, "cls-model", tmp_path)

    auto = Embedder("cls-model")
    auto._model = cls_model
    auto.encode = lambda texts: np.zeros((len(texts), 384), dtype=np.float32)
    with caplog.at_level(logging.WARNING, logger="lumina_assets.indexing.embedding"):
        assert auto.encode_query("a query").shape == (384,)
    assert auto.query_backend_used == "sentence-transformers"
    assert "pooling mode 'cls'" in caplog.text


def test_the_model_comes_from_the_environment_unless_given(monkeypatch):
    monkeypatch.setenv("LUMINA_EMBEDDING_MODEL", "sentence-transformers/all-MiniLM-L12-v2")
    configured = Embedder()  # nothing is loaded until the first encode
    assert configured.model_name_or_path == "sentence-transformers/all-MiniLM-L12-v2"
    assert Embedder("/models/mine").model_name_or_path == "/models/mine"


def test_evidence_sentences_encode_like_the_model_without_torch(embedder, exported):
    """Request-time evidence sentences go through the ONNX export in length-sorted chunks: same vectors as
    sentence-transformers, in the input order, and a process that highlights never imports torch."""
    sentences = [
        *QUERIES,
        "Short.",
        "A somewhat longer sentence about vitamin D and bone density in the elderly.",
    ]
    reference = _reference(embedder, sentences)
    fast = embedder.encode_sentences(sentences)
    assert fast.shape == reference.shape and np.abs(fast - reference).max() < 1e-4

    script = (
        "import sys; from lumina_assets.indexing.embedding import Embedder; "
        "v = Embedder().encode_sentences(['Vitamin D lowers fracture risk.', 'Aspirin and stroke.']); "
        "print(v.shape[0], v.shape[1], 'torch' in sys.modules)"
    )
    assert _fresh_process_output(script, exported) == ["2", "384", "False"]
