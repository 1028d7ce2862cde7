"""The one HTTP layer every external API goes through: retries with backoff and Retry-After (tenacity), a
per-host rate limit and an on-disk response cache. Hostile servers are expected: bodies are streamed under a
byte cap, every call has a deadline, each redirect hop is checked by the address policy and loses credentials
across origins (`url_safety`), and every httpx failure becomes an `HttpError` naming the redacted URL."""

from __future__ import annotations

import email.utils
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import tenacity

from lumina_assets.core.disk_cache import DiskCache
from lumina_assets.core.hygiene import clean_strings
from lumina_assets.core.url_safety import (
    CROSS_ORIGIN_HEADERS,
    PIN_EXTENSION,
    SECRET_NAMES,
    HttpError,
    PinnedTransport,
    UrlPolicy,
    origin,
    redact_url,
    secret_values,
    without_secrets,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # an API answer; PDFs set their own cap
DEFAULT_DEADLINE_SECONDS = 120.0
MAX_REDIRECTS = 5
BACKOFF_MAX_SECONDS = 60.0
USER_AGENT = "lumina/0.1 (academic search benchmark)"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# Failures that mean the host (or the proxy to it) is not there at all: after a request ends on one of them, the
# client asks that host nothing more, so a crawl without network fails in seconds instead of retrying every seed.
UNREACHABLE_ERRORS = frozenset({"ConnectError", "ConnectTimeout", "ProxyError"})


class _Retryable(Exception):
    """A failure worth another attempt: a transport error (named by its httpx class) or a retryable status."""

    def __init__(self, problem: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(problem)
        self.status, self.retry_after = status, retry_after


@dataclass
class CachedResponse:
    status_code: int
    headers: dict[str, str]
    content: bytes
    url: str
    from_cache: bool = False
    cache_key: str | None = None

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The JSON body with every string valid UTF-8: bytes that are not UTF-8 and escaped lone surrogates
        (`"\\ud800"`) are replaced at this edge and logged, never carried to the Parquet writer."""
        value, repaired = clean_strings(json.loads(self.text))
        if repaired or "\ufffd" in self.text:
            log.warning("%s: invalid UTF-8 or lone surrogates in the JSON body replaced", self.url)
        return value


class RateLimiter:
    """At most one request per `min_interval` seconds for each host, shared by every client in the process."""

    _lock = threading.Lock()
    _next_allowed: dict[str, float] = {}

    @classmethod
    def wait(cls, host: str, min_interval: float, sleep: Callable[[float], None], clock: Callable[[], float]):
        if min_interval <= 0:
            return
        with cls._lock:
            now = clock()
            start = max(now, cls._next_allowed.get(host, 0.0))
            cls._next_allowed[host] = start + min_interval
        if start > now:
            sleep(start - now)

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls._next_allowed.clear()


@dataclass
class HttpStats:
    """One client's counters; its requests run in many threads, so every update holds the lock."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def as_metadata(self) -> dict[str, int]:
        with self._lock:
            return {
                "http_requests": self.requests,
                "http_cache_hits": self.cache_hits,
                "http_retries": self.retries,
                "http_failures": self.failures,
            }


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


class HttpClient:
    """`timeout` bounds each connect / read, `deadline` the whole call (retries and redirects included),
    `max_bytes` the body. `transport` lets tests serve recorded responses; `sleep` and `clock` skip waiting."""

    def __init__(
        self,
        *,
        base_url: str = "",
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        deadline: float | None = DEFAULT_DEADLINE_SECONDS,
        max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        url_policy: UrlPolicy | None = None,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        min_interval: float = 0.0,
        cache_dir: Path | str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        # exponential from backoff_base, capped, with up to a quarter of backoff_base added at random
        self._backoff = tenacity.wait_exponential_jitter(
            multiplier=backoff_base, max=BACKOFF_MAX_SECONDS, jitter=backoff_base / 4
        )
        self.min_interval = min_interval
        self.cache = DiskCache(cache_dir) if cache_dir else None
        self.sleep = sleep
        self.clock = clock
        self.stats = HttpStats()
        self.timeout = timeout
        self.deadline = deadline
        self.max_bytes = max_bytes
        self.url_policy = url_policy or UrlPolicy()
        self.unreachable_hosts: dict[str, str] = {}  # host -> why (see UNREACHABLE_ERRORS)
        # Default headers (API keys among them) are sent per request, so a cross-origin hop can drop them.
        self._headers = {"User-Agent": USER_AGENT, **(headers or {})}
        self._client = httpx.Client(
            timeout=timeout,
            headers={"User-Agent": USER_AGENT},
            transport=transport or PinnedTransport(),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _absolute(self, url: str) -> str:
        if url.startswith(("http://", "https://")):
            return url
        return f"{self.base_url}/{url.lstrip('/')}"

    def _cache_key(self, method: str, url: str, params: Mapping[str, Any] | None, body: Any) -> str:
        visible = sorted(
            (k, str(v)) for k, v in (params or {}).items() if v is not None and k.lower() not in SECRET_NAMES
        )
        return DiskCache.key_for(method.upper(), url, visible, body)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Retry-After when the server sent one (capped), else exponential backoff."""
        retry_after = state.outcome.exception().retry_after
        return min(BACKOFF_MAX_SECONDS, retry_after) if retry_after is not None else self._backoff(state)

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        use_cache: bool = True,
        ok_statuses: Iterable[int] = (),
        max_bytes: int | None = None,
    ) -> CachedResponse:
        """Send through cache, rate limit and retries; HttpError naming the URL when it fails for good. Statuses
        in `ok_statuses` (404 where "not found" is an answer) return; `max_bytes` overrides the body cap (PDFs)."""
        full_url = self._absolute(url)
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        shown = redact_url(full_url, clean_params)
        allowed = set(ok_statuses)
        key = self._cache_key(method, full_url, clean_params, json_body) if self.cache and use_cache else None
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.count("cache_hits")
                return CachedResponse(
                    status_code=hit["status"],
                    headers=hit["headers"],
                    content=hit["body"].encode("utf-8"),
                    url=shown,
                    from_cache=True,
                    cache_key=key,
                )
        host = urlsplit(full_url).netloc
        if host in self.unreachable_hosts:
            self.stats.count("failures")
            raise HttpError(
                f"{shown} not asked: {host} was unreachable ({self.unreachable_hosts[host]}) earlier in this run",
                url=shown,
                reason="unreachable",
            )
        cap = self.max_bytes if max_bytes is None else max_bytes
        deadline_at = self.clock() + self.deadline if self.deadline else None

        def attempt() -> CachedResponse:
            RateLimiter.wait(host, self.min_interval, self.sleep, self.clock)
            self.stats.count("requests")
            try:
                status, response_headers, body = self._send(
                    method, full_url, clean_params, json_body, headers, cap, deadline_at
                )
            except HttpError:
                self.stats.count("failures")
                raise
            if 200 <= status < 300 or status in allowed:
                result = CachedResponse(status, response_headers, body, shown, cache_key=key)
                if key is not None:  # a 404 the caller treats as an answer is cached too
                    self._store(key, result)
                return result
            if status not in RETRY_STATUSES:
                self.stats.count("failures")
                raise HttpError(f"HTTP {status} from {shown}", url=shown, status=status)
            retry_after = parse_retry_after(response_headers.get("retry-after"))
            raise _Retryable(f"HTTP {status}", status, retry_after)

        def past_deadline(state: tenacity.RetryCallState) -> bool:  # waiting would pass it: give up now
            return deadline_at is not None and self.clock() + state.upcoming_sleep > deadline_at

        def before_sleep(state: tenacity.RetryCallState) -> None:
            self.stats.count("retries")
            problem, wait = state.outcome.exception(), state.upcoming_sleep
            log.info(
                "retrying %s after %s (attempt %d, waiting %.1fs)", shown, problem, state.attempt_number, wait
            )

        def give_up(state: tenacity.RetryCallState) -> CachedResponse:
            problem = state.outcome.exception()
            self.stats.count("failures")
            if str(problem) in UNREACHABLE_ERRORS:
                self.unreachable_hosts[host] = str(problem)
            raise HttpError(
                f"{problem} from {shown} after {state.attempt_number} attempts",
                url=shown,
                status=problem.status,
                reason="http_status" if problem.status else "transport",
            )

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retryable),
            stop=tenacity.stop_after_attempt(self.max_retries + 1) | past_deadline,
            wait=self._wait,
            sleep=self.sleep,
            before_sleep=before_sleep,
            retry_error_callback=give_up,
        )
        return retrying(attempt)

    def _late(self, shown: str) -> HttpError:
        return HttpError(
            f"{shown} took longer than the {self.deadline:g} s deadline", url=shown, reason="deadline"
        )

    def _time_left(self, deadline_at: float | None, shown: str) -> float:
        if deadline_at is None:
            return self.timeout
        left = deadline_at - self.clock()
        if left <= 0:
            raise self._late(shown)
        return min(self.timeout, left)

    def _send(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any],
        json_body: Any,
        headers: Mapping[str, str] | None,
        cap: int,
        deadline_at: float | None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One attempt: follow redirects by hand (each hop checked by the URL policy; credentials dropped
        once the origin changes), stream the body under `cap` and the deadline. Every httpx failure comes out
        as HttpError, or _Retryable for those worth another attempt."""
        send_headers = {**self._headers, **(headers or {})}
        first_origin = origin(url)
        secrets = secret_values(url, params, send_headers)
        query: Mapping[str, Any] | None = params
        for _hop in range(MAX_REDIRECTS + 1):
            shown = redact_url(url, query)
            pinned = self.url_policy.check(url)
            timeout = self._time_left(deadline_at, shown)
            try:
                with self._client.stream(
                    method,
                    url,
                    params=query or None,
                    json=json_body,
                    headers=send_headers,
                    timeout=timeout,
                    extensions={PIN_EXTENSION: pinned} if pinned else None,
                ) as response:
                    location = response.headers.get("location")
                    if response.status_code in REDIRECT_STATUSES and location:
                        next_url = str(httpx.URL(url).join(location))
                        if origin(next_url) != first_origin:
                            send_headers = {
                                k: v for k, v in send_headers.items() if k.lower() in CROSS_ORIGIN_HEADERS
                            }
                            next_url = without_secrets(next_url, secrets)
                        if response.status_code == 303 or (
                            response.status_code in (301, 302) and method.upper() == "POST"
                        ):
                            method, json_body = "GET", None
                        url, query = next_url, None
                        continue
                    body = self._read_capped(response, cap, deadline_at, shown)
                    return response.status_code, {k.lower(): v for k, v in response.headers.items()}, body
            except httpx.TimeoutException as exc:
                if deadline_at is not None and self.clock() >= deadline_at:
                    raise self._late(shown) from None
                raise _Retryable(type(exc).__name__) from None
            except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
                raise _Retryable(type(exc).__name__) from None
            except httpx.DecodingError as exc:
                raise HttpError(
                    f"undecodable body from {shown} ({type(exc).__name__}: {str(exc)[:120]})",
                    url=shown,
                    reason="bad_body",
                ) from None
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
                raise HttpError(
                    f"request to {shown} failed ({type(exc).__name__}: {str(exc)[:120]})",
                    url=shown,
                    reason="transport",
                ) from None
        raise HttpError(
            f"more than {MAX_REDIRECTS} redirects from {redact_url(url)} (a redirect loop?)",
            url=redact_url(url),
            reason="redirects",
        )

    def _read_capped(
        self, response: httpx.Response, cap: int, deadline_at: float | None, shown: str
    ) -> bytes:
        """The (decoded) body, refused past `cap` bytes or past the deadline, never read whole first."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise HttpError(
                f"{shown} announces {declared} bytes, over the {cap} byte cap", url=shown, reason="too_large"
            )
        chunks: list[bytes] = []
        total = 0
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > cap:
                raise HttpError(f"{shown} sent more than the {cap} byte cap", url=shown, reason="too_large")
            chunks.append(chunk)
            if deadline_at is not None and self.clock() > deadline_at:
                raise self._late(shown)
        return b"".join(chunks)

    def _store(self, key: str, response: CachedResponse) -> None:
        try:
            body = response.content.decode("utf-8")
        except UnicodeDecodeError:
            return  # binary bodies (PDFs) live in the content-addressed PDF store, not here
        keep = {
            k: v
            for k, v in response.headers.items()
            if k.lower() in {"content-type", "etag", "last-modified"}
        }
        self.cache.put(key, {"status": response.status_code, "headers": keep, "body": body})

    def get(self, url: str, **kwargs: Any) -> CachedResponse:
        return self.request("GET", url, **kwargs)

    def evict(self, response: CachedResponse) -> None:
        """Forget a cached body the caller could not use (malformed JSON, a feed that does not parse), so the
        next run asks again instead of failing on the same bytes without a request."""
        if self.cache is not None and response.cache_key:
            self.cache.delete(response.cache_key)

    def decode_json(self, response: CachedResponse) -> Any:
        """JSON body, or HttpError naming the URL; a malformed body is evicted so a retry fetches it afresh."""
        try:
            return response.json()
        except (json.JSONDecodeError, RecursionError) as exc:
            self.evict(response)
            raise HttpError(
                f"malformed JSON from {response.url}: {exc}", url=response.url, reason="bad_body"
            ) from None

    def get_json(self, url: str, **kwargs: Any) -> Any:
        return self.decode_json(self.request("GET", url, **kwargs))

    def post_json(self, url: str, body: Any, **kwargs: Any) -> Any:
        return self.decode_json(self.request("POST", url, json_body=body, **kwargs))


def unreachable_reason(url: str, timeout: float = 5.0) -> str | None:
    """None when `url` answers an HTTP request (any status), else why not (the httpx error's class). Goes
    through the environment's proxy settings like every API call; sends no credential and follows no
    redirect."""
    try:
        with httpx.Client(timeout=timeout, trust_env=True, follow_redirects=False) as client:
            client.head(url)
        return None
    except httpx.HTTPError as exc:
        return type(exc).__name__
    except ValueError as exc:  # not a URL httpx can send (no scheme, bad port)
        return f"invalid URL ({type(exc).__name__})"
