"""The shared HTTP layer: retries, Retry-After, timeouts, rate limit, response cache, secret redaction."""

from __future__ import annotations

import httpx
import pytest

from lumina_assets.core.http import HttpClient, HttpError, parse_retry_after, redact_url


class Clock:
    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def client_for(handler, tmp_path=None, **kwargs) -> tuple[HttpClient, Clock]:
    clock = Clock()
    client = HttpClient(
        base_url="https://api.example.org",
        transport=httpx.MockTransport(handler),
        sleep=clock.sleep,
        clock=clock,
        cache_dir=tmp_path,
        **kwargs,
    )
    return client, clock


def test_429_with_retry_after_waits_the_advertised_time_then_succeeds():
    answers = iter([httpx.Response(429, headers={"Retry-After": "7"}), httpx.Response(200, json={"ok": 1})])
    client, clock = client_for(lambda r: next(answers))
    assert client.get_json("/x") == {"ok": 1}
    assert clock.sleeps == [7.0]
    assert client.stats.retries == 1


def test_429_storm_gives_up_with_a_clear_error_naming_the_url():
    client, clock = client_for(lambda r: httpx.Response(429, headers={"Retry-After": "2"}), max_retries=3)
    with pytest.raises(HttpError) as info:
        client.get_json("/works/W1")
    assert (
        "HTTP 429" in str(info.value) and "/works/W1" in str(info.value) and "4 attempts" in str(info.value)
    )
    assert info.value.status == 429
    assert clock.sleeps == [2.0, 2.0, 2.0]


def test_5xx_backs_off_exponentially():
    answers = iter([httpx.Response(503), httpx.Response(502), httpx.Response(200, json=[])])
    client, clock = client_for(lambda r: next(answers), backoff_base=1.0)
    assert client.get_json("/x") == []
    assert len(clock.sleeps) == 2 and 1.0 <= clock.sleeps[0] < 1.3 and 2.0 <= clock.sleeps[1] < 2.6


def test_timeouts_are_retried_and_then_reported():
    def handler(request):
        raise httpx.ReadTimeout("slow", request=request)

    client, _ = client_for(handler, max_retries=2)
    with pytest.raises(HttpError, match="ReadTimeout"):
        client.get("/slow")
    assert client.stats.requests == 3


def test_404_is_not_retried():
    client, clock = client_for(lambda r: httpx.Response(404, text="nope"))
    with pytest.raises(HttpError) as info:
        client.get("/missing")
    assert info.value.status == 404 and client.stats.requests == 1 and clock.sleeps == []


def test_cache_serves_a_repeated_request_without_a_call(tmp_path):
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(200, json={"n": len(calls)})

    client, _ = client_for(handler, tmp_path)
    first = client.get_json("/w", params={"q": "a", "api_key": "secret-1"})
    again, _ = client_for(handler, tmp_path)
    second = again.get_json("/w", params={"q": "a", "api_key": "another-key"})
    assert first == second == {"n": 1}
    assert len(calls) == 1 and again.stats.cache_hits == 1
    stored = "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    assert "secret-1" not in stored and "another-key" not in stored


def test_malformed_json_is_an_error_and_is_not_kept_in_the_cache(tmp_path):
    bodies = iter([b'{"truncated": ', b'{"ok": true}'])
    client, _ = client_for(lambda r: httpx.Response(200, content=next(bodies)), tmp_path)
    with pytest.raises(HttpError, match="malformed JSON"):
        client.get_json("/w")
    assert client.get_json("/w") == {"ok": True}


def test_rate_limit_spaces_requests_to_one_host():
    client, clock = client_for(lambda r: httpx.Response(200, json={}), min_interval=3.0)
    for _ in range(3):
        client.get_json("/q", use_cache=False)
    assert clock.sleeps == [3.0, 3.0]


def test_secrets_are_redacted_from_urls_and_errors():
    assert "sk-123" not in redact_url("https://a.org/x?api_key=sk-123&q=1")
    client, _ = client_for(lambda r: httpx.Response(401))
    with pytest.raises(HttpError) as info:
        client.get("/x", params={"api_key": "sk-very-secret"})
    assert "sk-very-secret" not in str(info.value)


def test_retry_after_accepts_http_dates():
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)
    assert parse_retry_after("soon") is None


def test_counters_add_up_when_many_threads_share_a_client():
    """Each thread's count lands: with thread switches forced often, unlocked read-modify-writes lose updates."""
    import sys
    import threading

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        client, _ = client_for(lambda request: httpx.Response(200 if "ok" in str(request.url) else 404))
        threads = [
            threading.Thread(
                target=lambda: [
                    client.get("/ok" if i % 2 else "/gone", ok_statuses=(404,)) for i in range(500)
                ]
            )
            for _ in range(16)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert client.stats.requests == 8000
