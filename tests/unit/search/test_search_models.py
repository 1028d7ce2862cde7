"""The optional model-backed search stages: LLM parser, LLM multi-query, LLM rerank (through the real openai SDK on
a mock transport) and cross-encoder rerank (a small CrossEncoder built and saved here, loaded from disk)."""

from __future__ import annotations

import json

import httpx2
import numpy as np
import pytest
from fake_llm import openai_chat_response

from lumina_assets.core.llm import LLMClient
from lumina_assets.core.schemas import Context
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.model_stages import (
    configured_search_config,
    cross_encoder_reranker,
    llm_multi_query,
    llm_query_parser,
    llm_reranker,
)


def llm_client(answer, prompts: list | None = None) -> LLMClient:
    """An openai-backend LLMClient whose HTTP layer answers `answer(prompt)` (a str, or a status int)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        prompt = json.loads(request.content)["messages"][-1]["content"]
        if prompts is not None:
            prompts.append(prompt)
        reply = answer(prompt)
        return (
            httpx2.Response(reply, json={"error": {"message": "boom"}})
            if isinstance(reply, int)
            else openai_chat_response(reply, model="gpt-4o-mini")
        )

    return LLMClient(
        backend="openai",
        model="gpt-4o-mini",
        api_key="sk-test-secret",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def test_llm_parser_reads_authors_and_years_and_falls_back_on_garbage():
    reply = (
        '```json\n{"text": "graph neural networks for molecules", "authors": ["Jure Leskovec"],'
        ' "year_min": 2020, "year_max": null, "keywords": ["graph neural network", "molecule"]}\n```'
    )
    parse = llm_query_parser(llm_client(lambda prompt: reply))
    parsed = parse("papers by Leskovec on graph neural networks for molecules after 2019")
    assert parsed.parser == "llm"
    assert parsed.text == "graph neural networks for molecules"
    assert parsed.authors == ["Jure Leskovec"]
    assert (parsed.year_min, parsed.year_max) == (2020, None)
    assert parsed.keywords == ["graph neural network", "molecule"]

    for bad in ("I cannot help with that.", '{"text": "x", "year_min": 99999}', 500):
        fallback = llm_query_parser(llm_client(lambda prompt, bad=bad: bad))(
            "aspirin trials published after 2015"
        )
        assert fallback.parser == "heuristic"
        assert fallback.year_min == 2016


def test_llm_multi_query_cleans_lines_and_survives_errors():
    prompts: list = []
    text = (
        "1. vitamin D supplementation fracture risk\n- cholecalciferol and bone fractures\n\n"
        '"vitamin D and falls in older adults"\nvitamin D hip fracture'
    )
    expand = llm_multi_query(llm_client(lambda prompt: text, prompts), count=3)
    assert expand("vitamin D hip fracture") == [
        "vitamin D supplementation fracture risk",
        "cholecalciferol and bone fractures",
        "vitamin D and falls in older adults",
    ]
    assert "3 different search queries" in prompts[0]
    assert llm_multi_query(llm_client(lambda prompt: 503))("anything") == []


def contexts(n: int) -> list[Context]:
    return [
        Context(title=f"paper {i}", chunks=[f"passage {i}"], paper_id=f"p{i}", score=1.0 - i / 10)
        for i in range(n)
    ]


def test_llm_reranker_orders_by_rating_and_keeps_order_on_failure():
    prompts: list = []
    rerank = llm_reranker(llm_client(lambda prompt: 'Ratings: {"1": 0, "2": 3, "3": 1, "4": 3}', prompts))
    ranked = rerank("query", contexts(5))
    assert [c.paper_id for c in ranked] == ["p1", "p3", "p2", "p0", "p4"]  # unrated last, ties in fused order
    assert "[5] paper 4\npassage 4" in prompts[0]
    original = contexts(3)
    assert llm_reranker(llm_client(lambda prompt: "no json here"))("query", original) == original
    assert llm_reranker(llm_client(lambda prompt: 500))("query", original) == original


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
    client = llm_client(lambda prompt: "{}")
    monkeypatch.setenv("LUMINA_SEARCH_LLM", "parse, rerank")
    config = configured_search_config(llm_client=client)
    assert config.llm_parser is not None and config.rerank is not None and config.llm_multi_query is None

    monkeypatch.setenv("LUMINA_SEARCH_LLM", "parse,summarize")
    with pytest.raises(ValueError, match="LUMINA_SEARCH_LLM"):
        configured_search_config(llm_client=client)

    monkeypatch.setenv("LUMINA_SEARCH_LLM", "expand")
    monkeypatch.setenv("LUMINA_QUESTION_BACKEND", "anthropic")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        configured_search_config()

    monkeypatch.delenv("LUMINA_SEARCH_LLM")
    assert configured_search_config() == SearchConfig()
    monkeypatch.setenv("LUMINA_RERANK_MODEL", tiny_cross_encoder)
    reranked = configured_search_config().rerank("aspirin", contexts(3))
    assert sorted(c.paper_id for c in reranked) == ["p0", "p1", "p2"]
