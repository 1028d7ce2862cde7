"""LLM resource through the real anthropic / openai SDKs with an injected httpx2 mock transport: request shape,
response parsing, token and cost accounting, the disk cache (second run: zero calls) and the offline fallback."""

from __future__ import annotations

import json

import httpx2
import pytest
from fake_llm import anthropic_message_response, openai_chat_response

from lumina_assets.core.llm import LLMClient, LLMUnavailable
from lumina_assets.core.prices import llm_cost
from resources.llm import LLMResource, build_llm_resources


def openai_handler(seen: list, text: str = "<highly_relevant>"):
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(
            {"url": str(request.url), "headers": dict(request.headers), "body": json.loads(request.content)}
        )
        return openai_chat_response(text, model="gpt-4o-2024-08-06", prompt_tokens=120, completion_tokens=4)

    return handler


def anthropic_handler(seen: list, text: str = "<query>vitamin D hip fracture elderly</query>"):
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(
            {"url": str(request.url), "headers": dict(request.headers), "body": json.loads(request.content)}
        )
        return anthropic_message_response(text, input_tokens=200, output_tokens=12)

    return handler


def test_openai_judge_request_shape_parsing_cost_and_cache(data_dir):
    seen: list = []
    resource = LLMResource(backend="openai", model="gpt-4o", api_key="sk-test-secret", temperature=0.0)
    client = resource.get_client(
        http_client=httpx2.Client(transport=httpx2.MockTransport(openai_handler(seen)))
    )
    reply = client.complete("Question: q Context: c", temperature=0.0)
    assert reply.text == "<highly_relevant>" and not reply.cached
    assert (reply.input_tokens, reply.output_tokens) == (120, 4)
    assert reply.cost_usd == pytest.approx(llm_cost("gpt-4o", 120, 4))
    request = seen[0]
    assert request["url"].endswith("/chat/completions")
    assert request["body"]["model"] == "gpt-4o"
    assert request["body"]["temperature"] == 0.0
    assert request["body"]["messages"] == [{"role": "user", "content": "Question: q Context: c"}]
    assert request["headers"]["authorization"] == "Bearer sk-test-secret"

    # a second client on the same cache: zero HTTP calls, same answer, counted as a cache hit
    again = resource.get_client(
        http_client=httpx2.Client(transport=httpx2.MockTransport(openai_handler(seen)))
    )
    cached = again.complete("Question: q Context: c", temperature=0.0)
    assert cached.text == reply.text and cached.cached
    assert len(seen) == 1
    assert again.usage.calls == 0 and again.usage.cache_hits == 1
    # a different parameter is a different cache key
    again.complete("Question: q Context: c", temperature=0.0, system="retry 1")
    assert len(seen) == 2
    # the key never lands in the cache
    for path in (data_dir / "cache" / "llm").rglob("*.json"):
        assert "sk-test-secret" not in path.read_text(encoding="utf-8")


def test_anthropic_request_shape_and_parsing(data_dir):
    seen: list = []
    resource = LLMResource(backend="anthropic", model="claude-sonnet-4-6", api_key="ak-test")
    client = resource.get_client(
        http_client=httpx2.Client(transport=httpx2.MockTransport(anthropic_handler(seen)))
    )
    reply = client.complete("Based on the user's query: q", temperature=0.0, max_tokens=300)
    assert reply.text == "<query>vitamin D hip fracture elderly</query>"
    assert (reply.input_tokens, reply.output_tokens) == (200, 12)
    assert client.usage.cost_usd == pytest.approx((200 * 3 + 12 * 15) / 1e6)
    body = seen[0]["body"]
    assert seen[0]["url"].endswith("/v1/messages")
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 300
    assert body["temperature"] == 0.0
    assert body["messages"] == [{"role": "user", "content": "Based on the user's query: q"}]
    headers = seen[0]["headers"]  # anthropic 2.x sends the key as a bearer token; older SDKs as x-api-key
    assert headers.get("x-api-key") == "ak-test" or headers.get("authorization") == "Bearer ak-test"


def test_openai_compatible_uses_its_base_url_and_needs_no_key(data_dir):
    seen: list = []
    resource = LLMResource(backend="openai-compatible", model="llama3", base_url="http://127.0.0.1:8000/v1")
    assert resource.effective_backend() == "openai-compatible"
    client = resource.get_client(
        http_client=httpx2.Client(transport=httpx2.MockTransport(openai_handler(seen)))
    )
    client.complete("hi", temperature=0.0)
    assert seen[0]["url"] == "http://127.0.0.1:8000/v1/chat/completions"
    assert client.usage.unknown_cost_calls == 1  # no price for a local model: reported, not invented


def test_missing_key_degrades_to_labelled_offline(data_dir, monkeypatch):
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "LUMINA_JUDGE_BACKEND",
        "LUMINA_QUESTION_BACKEND",
        "OPENAI_BASE_URL",
        "OPENAI_COMPATIBLE_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    resources = build_llm_resources()
    judge = resources["judge_llm"]
    assert judge.backend == "openai" and judge.model == "gpt-4o" and judge.temperature == 0.0
    assert resources["question_llm"].backend == "anthropic"
    assert "sonnet" in resources["question_llm"].model
    client = judge.get_client()
    assert client.is_offline and judge.describe() == "offline (no API key for openai:gpt-4o)"
    with pytest.raises(LLMUnavailable):
        client.complete("x")


def test_env_key_becomes_envvar(monkeypatch):
    import dagster as dg

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    judge = build_llm_resources()["judge_llm"]
    assert isinstance(judge.api_key, dg.EnvVar)  # resolved by Dagster at run time; never a literal in config


def test_openai_base_url_env_selects_openai_compatible_judge(monkeypatch):
    monkeypatch.delenv("LUMINA_JUDGE_BACKEND", raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    judge = build_llm_resources()["judge_llm"]
    assert judge.backend == "openai-compatible"
    assert judge.base_url.env_var_name == "OPENAI_BASE_URL"


def test_unknown_backend_rejected():
    with pytest.raises(ValueError):
        LLMClient(backend="bard", model="x")


def test_two_endpoints_of_one_model_name_never_share_cached_answers(data_dir):
    """The same prompt to the same model name at two base URLs is asked of each; the second ask of each is cached."""
    seen: list = []
    transport = httpx2.MockTransport(openai_handler(seen))
    answers = []
    for base_url in ("http://127.0.0.1:8000/v1", "http://127.0.0.1:9000/v1", "http://127.0.0.1:8000/v1"):
        resource = LLMResource(backend="openai-compatible", model="llama3", base_url=base_url)
        client = resource.get_client(http_client=httpx2.Client(transport=transport))
        answers.append(client.complete("same prompt", temperature=0.0))
    assert [r["url"] for r in seen] == [
        "http://127.0.0.1:8000/v1/chat/completions",
        "http://127.0.0.1:9000/v1/chat/completions",
    ]
    assert [a.cached for a in answers] == [False, False, True]
