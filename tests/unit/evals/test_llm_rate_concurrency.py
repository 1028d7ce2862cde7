"""Lumina keeps each API at the rate it is configured for: the judge has as many requests in flight as the rate
needs (derived from it, or configured), never more than that, every attempt the SDK sends (its retries included)
takes a slot of the shared limit, and provider searches run side by side within their own concurrency."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import httpx2
import polars as pl
import pytest
from fake_llm import openai_chat_response

from evals import runner
from evals.judge import JudgeInput, LLMJudge
from lumina_assets.core import llm as llm_lib
from lumina_assets.core import settings
from lumina_assets.core.llm import LLMClient, derived_concurrency
from lumina_assets.core.schemas import Context
from resources.llm import JudgeLLMResource
from resources.providers import ExaResource


class InFlight:
    """A mock transport handler that counts the requests in flight at once; with `together` set, each request
    waits until that many are in flight together (a barrier), so the test fails if they never are."""

    def __init__(self, together: int = 0):
        self.lock = threading.Lock()
        self.now = self.most = self.sent = 0
        self.barrier = threading.Barrier(together) if together else None

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        with self.lock:
            self.now += 1
            self.sent += 1
            self.most = max(self.most, self.now)
        try:
            if self.barrier is not None:
                self.barrier.wait(timeout=30)
            prompt = json.loads(request.content)["messages"][-1]["content"]
            if "Sentences: " in prompt:
                return openai_chat_response("1. <critical>")
            return openai_chat_response("<highly_relevant>")
        finally:
            with self.lock:
                self.now -= 1


def _items(n: int) -> list[JudgeInput]:
    return [
        JudgeInput(f"q{i}", f"question {i}?", Context(title=f"paper {i}", chunks=[f"One finding {i}."]))
        for i in range(n)
    ]


def _client(
    handler, *, concurrency: int, rpm: float = 0.0, rate_file=None, retries: int = 0, cache_dir=None
) -> LLMClient:
    return LLMClient(
        cache_dir=cache_dir,
        backend="openai",
        model="gpt-4o",
        api_key="test-key",
        max_retries=retries,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        concurrency=concurrency,
        requests_per_minute=rpm,
        rate_file=rate_file,
    )


def test_concurrency_is_derived_from_the_rate_or_configured(data_dir):
    assert derived_concurrency(6000, 2.0) == 200  # 100 requests/s, each 2 s: 200 in flight
    assert derived_concurrency(500, 2.0) == 17
    assert derived_concurrency(50, 0.5) == 1
    assert derived_concurrency(0, 2.0) == llm_lib.DEFAULT_CONCURRENCY  # no rate to size it from
    assert derived_concurrency(10**7, 2.0) == llm_lib.MAX_DERIVED_CONCURRENCY

    judge_llm = JudgeLLMResource(
        backend="openai", api_key="test-key", requests_per_minute=3000, expected_latency_s=1.5
    )
    client = judge_llm.get_client()
    assert client.concurrency == 75 and LLMJudge(client).workers == 75
    configured = JudgeLLMResource(
        backend="openai", api_key="test-key", requests_per_minute=3000, concurrency=6
    )
    assert configured.get_client().concurrency == 6
    assert ExaResource(api_key="k").get_client().concurrency == 15  # 10 requests/s × 1.5 s
    assert ExaResource(api_key="k", concurrency=3).get_client().concurrency == 3


def test_the_judge_keeps_its_concurrency_in_flight(data_dir):
    """8 pairs' requests are in flight at once (else the barrier times out and the pairs fail)."""
    handler = InFlight(together=8)
    judge = LLMJudge(_client(handler, concurrency=8))
    results = judge.judge_many(_items(32))
    assert all(r.relevance_failure is None and r.precision_failure is None for r in results)
    assert [r.question_id for r in results] == [f"q{i}" for i in range(32)]  # in the order given
    assert handler.most == 8 and handler.sent == 64


def test_validation_verdicts_come_in_order_from_the_judges_threads(data_dir):
    handler = InFlight(together=4)
    judge = LLMJudge(_client(handler, concurrency=4))
    pairs = [(item.question, item.context) for item in _items(12)]
    assert judge.relevance_verdicts(pairs) == [1] * 12
    assert handler.most == 4 and handler.sent == 12


def test_the_client_never_has_more_in_flight_than_its_concurrency(data_dir):
    handler = InFlight()
    judge = LLMJudge(_client(handler, concurrency=3), workers=12)  # more threads than the client allows
    results = judge.judge_many(_items(30))
    assert all(r.relevant == 1 for r in results)
    assert 1 <= handler.most <= 3


def test_every_attempt_takes_a_slot_of_the_shared_limit(data_dir, tmp_path, monkeypatch):
    """A 429 retried by the SDK is a second request to the API: it waits for a slot of the limit too."""
    slots = []
    monkeypatch.setattr(llm_lib, "shared_rate_wait", lambda path, interval: slots.append(interval))
    answers = iter(
        [httpx2.Response(429, headers={"retry-after-ms": "1"}, json={"error": {"message": "slow down"}})]
    )

    def handler(request):
        return next(answers, None) or openai_chat_response("<highly_relevant>")

    client = _client(
        handler,
        concurrency=2,
        rpm=600,
        rate_file=tmp_path / "rate.txt",
        retries=2,
        cache_dir=tmp_path / "llm",
    )
    assert client.complete("hello").text == "<highly_relevant>"
    assert slots == [pytest.approx(0.1)] * 2
    client.complete("hello")  # from the cache: no request, no slot
    assert len(slots) == 2


def test_an_http_client_shared_by_clients_of_one_limit_takes_one_slot_per_attempt(
    data_dir, tmp_path, monkeypatch
):
    """The judge, the refiner and pooled judging are clients of one limit; given one HTTP client, each request
    takes one slot, not one per client that hooked it."""
    slots = []
    monkeypatch.setattr(llm_lib, "shared_rate_wait", lambda path, interval: slots.append(path))
    shared = httpx2.Client(
        transport=httpx2.MockTransport(lambda r: openai_chat_response("<highly_relevant>"))
    )
    rate = {"requests_per_minute": 600, "rate_file": tmp_path / "rate.txt", "http_client": shared}
    clients = [LLMClient(backend="openai", model="gpt-4o", api_key="k", **rate) for _ in range(3)]
    for i, client in enumerate(clients):
        client.complete(f"prompt {i}")
    assert slots == [tmp_path / "rate.txt"] * 3


THREADED = """
import json, sys, threading
from pathlib import Path
from lumina_assets.core.llm import shared_rate_wait
slots, lock = [], threading.Lock()
def take():
    for _ in range(5):
        slot = shared_rate_wait(Path(sys.argv[1]), 0.02, sleep=lambda s: None)
        with lock:
            slots.append(slot)
threads = [threading.Thread(target=take) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(slots))
"""


def test_the_limit_holds_across_threads_of_several_processes(tmp_path):
    path = tmp_path / "limits" / "openai.txt"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", THREADED, str(path)],
            stdout=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(settings.PROJECT_ROOT)},
            start_new_session=True,
        )
        for _ in range(3)
    ]
    slots = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        slots += json.loads(out.strip().splitlines()[-1])
    slots.sort()
    assert len(slots) == 60
    assert all(later - earlier >= 0.02 - 1e-6 for earlier, later in zip(slots, slots[1:], strict=False))


ASKER = """
import os, sys, time
from pathlib import Path
import httpx2
from lumina_assets.core.llm import LLMClient
cache, sent, go = (Path(a) for a in sys.argv[1:4])
def handler(request):
    with sent.open("a") as log:
        log.write("sent\\n")
    time.sleep(0.5)  # the other process asks while this answer is on its way
    answer = {"role": "assistant", "content": "<highly_relevant>"}
    return httpx2.Response(200, json={"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
client = LLMClient(backend="openai", model="gpt-4o", api_key="k", cache_dir=cache,
    http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
(go.parent / f"ready.{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.01)
print(client.complete("the same context, judged by two provider partitions").text)
"""


def test_two_processes_asking_the_same_prompt_at_once_send_it_once(tmp_path):
    """Two provider partitions judged in two processes share a verdict: the second waits for the first's answer."""
    sent, go = tmp_path / "sent.log", tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", ASKER, str(tmp_path / "llm"), str(sent), str(go)],
            stdout=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": str(settings.PROJECT_ROOT)},
            start_new_session=True,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()  # both ask at once
    answers = [child.communicate(timeout=120)[0].strip() for child in children]
    assert answers == ["<highly_relevant>"] * 2
    assert sent.read_text().splitlines() == ["sent"]
    assert not list((tmp_path / "llm" / "asking").glob("*.lock"))  # no lock file left behind


class _Searches:
    """A provider whose API client allows `concurrency` searches at once; counts the searches in flight."""

    name = "fake"

    def __init__(self, concurrency: int, together: int = 0):
        self.client = type("Client", (), {"concurrency": concurrency})()
        self.calls = InFlight(together)

    def search(self, query: str, k: int) -> list[Context]:
        with self.calls.lock:
            self.calls.now += 1
            self.calls.most = max(self.calls.most, self.calls.now)
        try:
            if self.calls.barrier is not None:
                self.calls.barrier.wait(timeout=30)
            return [Context(title=f"{query} result {i}", chunks=[f"{query} text {i}."]) for i in range(k)]
        finally:
            with self.calls.lock:
                self.calls.now -= 1


class _Refiner:
    method = "llm:fake"

    def __init__(self, concurrency: int):
        self.client = type("Client", (), {"concurrency": concurrency})()

    def refine(self, question, previous_query, contexts):
        from evals.recursive import Refinement

        return Refinement(f"{question} refined", self.method)


def _questions(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"question_id": [f"q{i}" for i in range(n)], "text": [f"topic {i}" for i in range(n)]}
    )


def test_provider_searches_run_side_by_side_within_the_providers_concurrency():
    provider = _Searches(concurrency=4, together=4)
    frame = runner.query_provider(provider, _questions(12), 3)
    assert frame["question_id"].to_list() == [f"q{i}" for i in range(12)]
    assert frame["error"].null_count() == 12 and provider.calls.most == 4


def test_recursion_overlaps_questions_but_a_local_provider_searches_one_at_a_time():
    provider = _Searches(concurrency=1)  # a local provider: no API client, one search at a time
    provider.client = None
    levels = runner.run_recursive(
        provider,
        _questions(10),
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[3],
        max_depth=1,
        refiner=_Refiner(concurrency=4),
    )
    assert levels.height == 20 and levels["error"].null_count() == 20
    assert levels.filter(pl.col("depth") == 1)["query"].to_list() == [f"topic {i} refined" for i in range(10)]
    assert provider.calls.most == 1


def test_threads_asking_the_same_prompt_at_once_send_it_once(tmp_path):
    """Two page sizes or providers can refine or judge the same prompt at the same moment: one request goes out,
    the others wait for its answer and read it from the cache."""
    started = threading.Event()
    release = threading.Event()

    class Slow(InFlight):
        def __call__(self, request):
            started.set()
            release.wait(timeout=30)
            return super().__call__(request)

    handler = Slow()
    client = _client(handler, concurrency=8, cache_dir=tmp_path / "cache")
    replies = []

    def ask():
        replies.append(client.complete("the same question?", temperature=0.0))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    assert started.wait(timeout=30)
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert handler.sent == 1
    assert len(replies) == 6 and sum(not r.cached for r in replies) == 1
    assert client.usage.calls == 1 and client.usage.cache_hits == 5
    client.complete("another question?", temperature=0.0)
    assert handler.sent == 2  # a different prompt is not held back
