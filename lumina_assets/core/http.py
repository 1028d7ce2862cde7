"""The one HTTP layer every external API goes through: retries with backoff and Retry-After, a per-host
rate limit, and an on-disk response cache keyed by request, so a rematerialization repeats no call."""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# Query parameters and headers that carry credentials: never in cache keys, logs or error messages.
SECRET_NAMES = frozenset(
    {"api_key", "apikey", "key", "x-api-key", "authorization", "token", "access_token", "mailto", "email"}
)


class HttpError(RuntimeError):
    """A request that failed for good; the message names the (redacted) URL and the reason."""

    def __init__(self, message: str, *, url: str, status: int | None = None):
        super().__init__(message)
        self.url = url
        self.status = status


def redact_url(url: str, params: Mapping[str, Any] | None = None) -> str:
    """URL with every secret query value replaced, safe for logs and exceptions."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in httpx.QueryParams(parts.query).multi_items()]
    query += [(k, str(v)) for k, v in (params or {}).items() if v is not None]
    shown = [(k, "***" if k.lower() in SECRET_NAMES else v) for k, v in query]
    base = f"{parts.scheme}://{parts.netloc}{parts.path}"
    return f"{base}?{urlencode(shown)}" if shown else base


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
        return json.loads(self.content)


class DiskCache:
    """Content store of JSON-serializable values keyed by a hash; shared by the HTTP layer and LLM calls."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @staticmethod
    def key_for(*parts: Any) -> str:
        blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            log.warning("ignoring unreadable cache entry %s", path)
            return None

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def put(self, key: str, value: Any) -> None:
        from lumina_assets.core.tables import atomic_replace

        text = json.dumps(value, ensure_ascii=False)
        # atomic: a killed run never leaves half an entry
        atomic_replace(self._path(key), lambda temp: temp.write_text(text, encoding="utf-8"))


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
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    by_status: dict[int, int] = field(default_factory=dict)

    def as_metadata(self) -> dict[str, int]:
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
    """httpx client with retry, backoff, Retry-After, per-host rate limit and a response cache.

    `transport` lets tests serve recorded responses; `sleep` and `clock` let them skip real waiting.
    """

    def __init__(
        self,
        *,
        base_url: str = "",
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        min_interval: float = 0.0,
        cache_dir: Path | str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        user_agent: str = "lumina/0.1 (academic search benchmark)",
    ):
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.min_interval = min_interval
        self.cache = DiskCache(cache_dir) if cache_dir else None
        self.sleep = sleep
        self.clock = clock
        self.stats = HttpStats()
        merged = {"User-Agent": user_agent, **(headers or {})}
        self._client = httpx.Client(
            timeout=timeout, headers=merged, transport=transport, follow_redirects=True
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

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_max, self.backoff_base * (2**attempt) * (1 + random.random() * 0.25))

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
    ) -> CachedResponse:
        """Send once through cache, rate limit and retries; raise HttpError naming the URL when it fails for good.

        Statuses in `ok_statuses` (e.g. 404 for "not found is an answer") return instead of raising.
        """
        full_url = self._absolute(url)
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        shown = redact_url(full_url, clean_params)
        allowed = set(ok_statuses)
        key = self._cache_key(method, full_url, clean_params, json_body) if self.cache and use_cache else None
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return CachedResponse(
                    status_code=hit["status"],
                    headers=hit["headers"],
                    content=hit["body"].encode("utf-8"),
                    url=shown,
                    from_cache=True,
                    cache_key=key,
                )
        host = urlsplit(full_url).netloc
        last_problem = "no attempt made"
        for attempt in range(self.max_retries + 1):
            RateLimiter.wait(host, self.min_interval, self.sleep, self.clock)
            self.stats.requests += 1
            try:
                response = self._client.request(
                    method, full_url, params=clean_params, json=json_body, headers=headers
                )
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_problem = f"{type(exc).__name__}"
                wait = self._backoff(attempt)
            else:
                status = response.status_code
                self.stats.by_status[status] = self.stats.by_status.get(status, 0) + 1
                if 200 <= status < 300 or status in allowed:
                    result = CachedResponse(
                        status, dict(response.headers), response.content, shown, cache_key=key
                    )
                    if key is not None:  # a 404 the caller treats as an answer is cached too
                        self._store(key, result)
                    return result
                if status not in RETRY_STATUSES:
                    self.stats.failures += 1
                    raise HttpError(f"HTTP {status} from {shown}", url=shown, status=status)
                last_problem = f"HTTP {status}"
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                wait = (
                    min(self.backoff_max, retry_after) if retry_after is not None else self._backoff(attempt)
                )
            if attempt < self.max_retries:
                self.stats.retries += 1
                log.info(
                    "retrying %s after %s (attempt %d, waiting %.1fs)", shown, last_problem, attempt + 1, wait
                )
                self.sleep(wait)
        self.stats.failures += 1
        status = int(last_problem.split()[1]) if last_problem.startswith("HTTP ") else None
        raise HttpError(
            f"{last_problem} from {shown} after {self.max_retries + 1} attempts", url=shown, status=status
        )

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

    def decode_json(self, response: CachedResponse) -> Any:
        """JSON body, or HttpError naming the URL; a malformed body is evicted so a retry fetches it afresh."""
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            if self.cache is not None and response.cache_key:
                self.cache.delete(response.cache_key)
            raise HttpError(f"malformed JSON from {response.url}: {exc}", url=response.url) from exc

    def get_json(self, url: str, **kwargs: Any) -> Any:
        return self.decode_json(self.request("GET", url, **kwargs))

    def post_json(self, url: str, body: Any, **kwargs: Any) -> Any:
        return self.decode_json(self.request("POST", url, json_body=body, **kwargs))
