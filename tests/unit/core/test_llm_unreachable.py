"""An LLM endpoint that cannot be reached is noticed once: for a while after a failed connection the client
answers LLMUnavailable at once (the overview falls back to extractive without waiting), then asks again.
Through the real anthropic / openai SDKs on a transport that refuses every connection."""

from __future__ import annotations

import httpx2
import pytest
from fake_llm import openai_chat_response

from lumina_assets.core.llm import UNREACHABLE_RETRY_SECONDS, LLMClient, LLMUnavailable
from lumina_assets.search.overview import Reference, build_overview


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _client(backend: str, handler, clock, *, retries: int = 0) -> LLMClient:
    return LLMClient(
        backend=backend,
        model="gpt-4o" if backend == "openai" else "claude-sonnet-4-6",
        api_key="test-key",
        max_retries=retries,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        clock=clock,
    )


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_an_unreachable_endpoint_is_asked_once_then_refused_at_once(backend):
    """Before: every completion went to the SDK, which spent its connection retries (~3 s) each time."""
    sent = []

    def refuse(request):
        sent.append(request.url.path)
        raise httpx2.ConnectError("connection refused")

    clock = Clock()
    client = _client(backend, refuse, clock, retries=1)
    with pytest.raises(Exception) as first:
        client.complete("hello")
    assert type(first.value).__name__ == "APIConnectionError"
    assert len(sent) == 2  # the SDK's own retry, once
    for _ in range(5):
        with pytest.raises(LLMUnavailable, match="could not be reached"):
            client.complete("hello again")
    assert len(sent) == 2
    clock.now += UNREACHABLE_RETRY_SECONDS + 1
    with pytest.raises(Exception) as later:
        client.complete("hello once more")
    assert type(later.value).__name__ == "APIConnectionError" and len(sent) == 4


def test_an_endpoint_that_answers_again_is_used_again():
    state = {"up": False}

    def handler(request):
        if not state["up"]:
            raise httpx2.ConnectError("connection refused")
        return openai_chat_response("fine")

    clock = Clock()
    client = _client("openai", handler, clock)
    with pytest.raises(Exception, match="Connection error"):
        client.complete("q")
    state["up"] = True
    with pytest.raises(LLMUnavailable):
        client.complete("q")
    clock.now += UNREACHABLE_RETRY_SECONDS
    assert client.complete("q").text == "fine"
    assert client.complete("another").text == "fine"


def test_a_bad_answer_is_not_taken_for_an_unreachable_endpoint():
    sent = []

    def error(request):
        sent.append(1)
        return httpx2.Response(400, json={"error": {"message": "bad request"}})

    client = _client("openai", error, Clock())
    for _ in range(3):
        with pytest.raises(Exception) as info:
            client.complete("q")
        assert not isinstance(info.value, LLMUnavailable)
    assert len(sent) == 3


def test_overviews_fall_back_at_once_while_the_llm_is_unreachable():
    sent = []

    def refuse(request):
        sent.append(1)
        raise httpx2.ConnectError("connection refused")

    client = _client("openai", refuse, Clock())
    references = [
        Reference(1, "p#0", "p", "A paper", "Citations train embeddings.", "Citations train embeddings.", 0.9)
    ]
    for _ in range(4):
        overview = build_overview("citations", references, client)
        assert overview.method == "extractive"
    assert len(sent) == 1
