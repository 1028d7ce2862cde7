"""The optional cross-encoder reranker (a small CrossEncoder built and saved here, loaded from disk) and its
switch, LUMINA_RERANK_MODEL."""

from __future__ import annotations

import numpy as np
import pytest

from lumina_assets.core.schemas import Context
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.rerank import configured_search_config, cross_encoder_reranker


def contexts(n: int) -> list[Context]:
    return [
        Context(title=f"paper {i}", chunks=[f"passage {i}"], paper_id=f"p{i}", score=1.0 - i / 10)
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """A one-layer BERT cross-encoder with random weights and the bundled tokenizer, saved to disk."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from lumina_assets.indexing.embedding import default_model_path

    folder = tmp_path_factory.mktemp("cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(7)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_cross_encoder_reranker_orders_by_the_models_scores(tiny_cross_encoder):
    from sentence_transformers import CrossEncoder

    candidates = [
        Context(title=t, chunks=[c], paper_id=t)
        for t, c in [
            ("Aspirin", "Aspirin lowers stroke risk."),
            ("Vitamin D", "Vitamin D and fractures."),
            ("Statins", "Statins and cholesterol."),
            ("Sleep", "Sleep and memory consolidation."),
        ]
    ]
    model = CrossEncoder(tiny_cross_encoder, device="cpu")
    expected = model.predict([("aspirin stroke", f"{c.title}. {c.chunks[0]}") for c in candidates])
    ranked = cross_encoder_reranker(tiny_cross_encoder)("aspirin stroke", list(candidates))
    assert [c.paper_id for c in ranked] == [candidates[i].paper_id for i in np.argsort(-expected)]
    assert [c.score for c in ranked] == pytest.approx(sorted(expected.tolist(), reverse=True), abs=1e-5)


def test_configuration_from_the_environment(monkeypatch, tiny_cross_encoder, data_dir):
    monkeypatch.delenv("LUMINA_RERANK_MODEL", raising=False)
    assert configured_search_config() == SearchConfig()
    monkeypatch.setenv("LUMINA_RERANK_MODEL", tiny_cross_encoder)
    reranked = configured_search_config().rerank("aspirin", contexts(3))
    assert sorted(c.paper_id for c in reranked) == ["p0", "p1", "p2"]


def test_the_server_reranks_as_lumina_search_does(monkeypatch, tiny_cross_encoder, data_dir):
    from lumina_assets.cli.serve import build_service

    monkeypatch.setenv("LUMINA_RERANK_MODEL", tiny_cross_encoder)
    service = build_service(str(data_dir / "lancedb"), engines=1, use_llm=False)
    reranked = service.pool.engines[0].config.rerank("aspirin", contexts(3))
    assert sorted(c.paper_id for c in reranked) == ["p0", "p1", "p2"]
    monkeypatch.delenv("LUMINA_RERANK_MODEL")
    assert (
        build_service(str(data_dir / "lancedb"), engines=1, use_llm=False).pool.engines[0].config.rerank
        is None
    )
