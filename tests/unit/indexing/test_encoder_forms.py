"""The encoder's numeric form: chosen from the CPU's flags (int8 with VNNI, fp32 without), fp16 on a CUDA device with
a batch size from its memory (simulated: no GPU here), recorded by the index, adopted by whoever extends or searches
the index, and refused where two forms' vectors do not compare. The real MiniLM runs on a handful of texts only."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import embedding, encoder_forms, model_identity
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.indexing.encoder_forms import choose, compatible, gpu_batch_size
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.engine import SearchEngine

GIB = 2**30
TEXTS = [
    "Vitamin D supplements raise bone density in older adults.",
    "Daily aspirin lowers the risk of a second stroke.",
    "A graph neural network over citations recommends references.",
    "Short.",
]


@pytest.mark.parametrize(
    ("flags", "form"),
    [
        ({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}, "int8"),  # this project's machine
        ({"avx2", "avx_vnni"}, "int8"),  # client CPUs with AVX-VNNI only
        ({"avx2", "amx_int8", "amx_bf16"}, "int8"),
        (
            {"avx2", "avx512f", "avx512_bf16"},
            "fp32",
        ),  # bf16 alone: measured slower than fp32 ONNX, not chosen
        ({"sse4_2", "avx2"}, "fp32"),
        (set(), "fp32"),  # no /proc/cpuinfo
    ],
)
def test_cpu_flags_choose_the_form(flags, form):
    plan = choose(frozenset(flags), cores=2)
    assert (plan.form, plan.device, plan.threads) == (form, "cpu", 2)


def test_a_cuda_device_gets_the_gpu_path_with_a_batch_from_its_memory():
    big = choose(frozenset({"avx512_vnni"}), gpu_free_bytes=70 * GIB, cores=16)
    small = choose(frozenset({"avx512_vnni"}), gpu_free_bytes=2 * GIB, cores=16)
    tiny = choose(frozenset(), gpu_free_bytes=GIB // 8, cores=16)
    assert (big.form, big.device) == (small.form, small.device) == ("fp16", "cuda")
    assert big.batch_size == 1024 and tiny.batch_size == 32  # clamped at both ends
    assert 32 < small.batch_size < 1024 and small.batch_size == gpu_batch_size(2 * GIB)
    # a CPU form asked for explicitly stays on the CPU; fp16 asked for without a GPU falls back to fp32
    assert choose(frozenset({"avx512_vnni"}), gpu_free_bytes=70 * GIB, requested="int8").device == "cpu"
    assert choose(frozenset({"avx512_vnni"}), requested="fp16").form == "fp32"
    with pytest.raises(ValueError, match="embedding form"):
        choose(frozenset(), requested="bf17")


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx512_vnni avx512_bf16\nbugs\t\t: none\n")
    flags = encoder_forms.cpu_flags.__wrapped__(str(cpuinfo))
    assert {"avx512_vnni", "avx512_bf16"} <= flags and "none" not in flags
    assert encoder_forms.cpu_flags.__wrapped__(str(tmp_path / "absent")) == frozenset()


class FakeGpuModel:
    """Stands in for sentence-transformers on a CUDA device: records how it was asked to encode."""

    def __init__(self, device: str):
        self.device, self.halved, self.calls = device, False, []

    def half(self):
        self.halved = True
        return self

    def get_embedding_dimension(self):
        return 384


def test_simulated_cuda_encodes_on_the_gpu_in_fp16(monkeypatch):
    loaded, calls = {}, []

    def fake_load(path, device):
        return loaded.setdefault(device, FakeGpuModel(device))

    def fake_encode(model, texts, batch_texts):
        calls.append((model.device, len(texts), batch_texts))
        return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)

    monkeypatch.setattr(encoder_forms, "cuda_free_memory", lambda: 24 * GIB)
    monkeypatch.setattr(embedding, "load_sentence_transformer", fake_load)
    monkeypatch.setattr(embedding, "encode_pretokenized", fake_encode)
    embedder = Embedder(form="auto")
    assert (embedder.plan.device, embedder.form) == ("cuda", "fp16")
    vectors = embedder.encode(TEXTS)
    assert vectors.shape == (4, 384) and loaded["cuda"].halved
    assert calls == [("cuda", 4, gpu_batch_size(24 * GIB))]
    assert "cpu" not in loaded  # the GPU path never loads the CPU model
    # an explicit device="cpu" never looks for a GPU
    assert Embedder(device="cpu", form="auto").plan.device == "cpu"


@pytest.mark.slow
def test_pretokenized_encoding_matches_sentence_transformers_in_input_order():
    """The GPU path's encoder (run here on CPU): same vectors as sentence-transformers' own encode, in the order
    given, truncated where it truncates, whatever the batch size."""
    model = embedding.load_sentence_transformer(embedding.default_model_path(), "cpu")
    texts = [*TEXTS, "long " * 600, "", TEXTS[1]]
    reference = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    for batch in (2, 64):
        vectors = embedding.encode_pretokenized(model, texts, batch)
        assert vectors.shape == reference.shape
        np.testing.assert_allclose(vectors, reference, atol=1e-5)


def test_forms_that_compare_and_the_refusal_of_those_that_do_not():
    assert compatible("fp32", "fp16") and compatible("", "fp32") and compatible("int8", "int8")
    assert not compatible("int8", "fp32") and not compatible("", "int8") and not compatible("fp16", "int8")
    name, weights = "minilm", "abc"
    int8_index = model_identity.ModelIdentity(name, weights, "int8")
    problem = model_identity.mismatch(int8_index, model_identity.ModelIdentity(name, weights, "fp32"))
    assert problem and "int8" in problem and "do not compare" in problem
    legacy_index = model_identity.ModelIdentity(name, weights, "")  # built before forms were recorded: fp32
    assert model_identity.mismatch(legacy_index, model_identity.ModelIdentity(name, weights, "fp16")) is None
    assert model_identity.mismatch(legacy_index, model_identity.ModelIdentity(name, weights, "int8"))


@pytest.fixture(scope="module")
def minilm_vectors():
    model = Embedder().model  # sentence-transformers: the reference
    reference = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    return reference, Embedder(form="fp32").encode(TEXTS), Embedder(form="int8").encode(TEXTS)


@pytest.mark.slow
def test_the_real_model_in_each_form_agrees_within_the_stated_tolerance(minilm_vectors):
    """fp32 ONNX reproduces sentence-transformers; int8 stays within INT8_MIN_COSINE but is not the same vectors
    (which is why int8 and fp32 are never mixed)."""
    from lumina_assets.indexing.onnx_encoder import INT8_MIN_COSINE, TOLERANCE

    reference, fp32, int8 = minilm_vectors
    assert np.abs(fp32 - reference).max() < TOLERANCE
    cosine = (int8 * reference).sum(axis=1)
    assert cosine.min() >= INT8_MIN_COSINE and cosine.min() < 0.9999


def _index(uri: str, embedder, topics) -> None:
    papers, passages = [], []
    for i, text in enumerate(topics):
        paper_id = f"doi:10.1/f{i}"
        papers.append(
            {"paper_id": paper_id, "title": text[:20], "abstract": text, "year": 2020, "source": "t"}
        )
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=text[:20], abstract=text)]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    config = indexing.IndexConfig(sentence_vectors=False)
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder, config)


def _form_of(uri: str) -> str:
    table = indexing.open_table(connect_lancedb(uri), indexing.PASSAGES_TABLE)
    return model_identity.of_schema(table.schema).form


@pytest.mark.slow
def test_an_index_keeps_its_form_for_new_passages_and_queries(tmp_path):
    uri = str(tmp_path / "lancedb")
    _index(uri, Embedder(form="int8"), TEXTS[:2])
    assert _form_of(uri) == "int8"
    extending = Embedder(form="fp32")  # a later run on a machine that would choose fp32
    _index(uri, extending, TEXTS)
    assert extending.form == "int8" and _form_of(uri) == "int8"  # new passages encoded in the index's form

    searching = Embedder(form="fp32")
    hits = SearchEngine(uri, searching).search("vitamin d bone density", k=3)
    assert searching.form == "int8" and hits  # the query was encoded in int8 too
    assert "Vitamin D" in " ".join(hits[0].chunks)
