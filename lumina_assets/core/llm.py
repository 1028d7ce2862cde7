"""LLM access (benchmark, search stages): one client over anthropic, openai, openai-compatible servers and
`offline`. Completions are cached on disk by (backend, model, endpoint, prompt, params), so a rematerialization
costs no call; tokens and estimated cost are counted per client. Keys are never logged or cached."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumina_assets.core import prices
from lumina_assets.core.disk_cache import DiskCache
from lumina_assets.core.http import RateLimiter

BACKENDS = ("anthropic", "openai", "openai-compatible", "offline")
DEFAULT_QUESTION_MODEL = "claude-sonnet-4-6"
DEFAULT_JUDGE_MODEL = "gpt-4o"

# How long a client that could not connect answers LLMUnavailable at once instead of waiting out the SDK's
# connection retries.
UNREACHABLE_RETRY_SECONDS = 60.0


class LLMUnavailable(RuntimeError):
    """Raised when a caller asks an offline client for a completion, or one whose endpoint could not be reached
    a moment ago: callers must use their offline path."""


class BudgetExhausted(RuntimeError):
    """The run's counted spend reached its budget: the run stops here, and a rerun resumes from the cache. Never a
    failed judgment or refinement: callers let it through."""


_RATE_FILE_LOCKS: dict[str, threading.Lock] = {}
_RATE_FILE_LOCKS_GUARD = threading.Lock()


def shared_rate_wait(path: Path, interval: float, sleep: Callable[[float], None] = time.sleep) -> float:
    """At most one request per `interval` seconds across every process using `path`: each takes the next
    free slot (kept in the file under a lock) and sleeps until it. A process's threads queue on an
    in-process lock first."""
    from filelock import FileLock

    with _RATE_FILE_LOCKS_GUARD:
        local = _RATE_FILE_LOCKS.setdefault(str(path), threading.Lock())
    path.parent.mkdir(parents=True, exist_ok=True)
    with local, FileLock(str(path) + ".lock", poll_interval=0.002):
        try:
            next_free = float(path.read_text(encoding="utf-8") or 0.0)
        except (FileNotFoundError, ValueError):
            next_free = 0.0
        now = time.time()
        slot = max(now, next_free)
        path.write_text(repr(slot + interval), encoding="utf-8")
    if slot > now:
        sleep(slot - now)
    return slot


@dataclass(frozen=True)
class RequestSlot:
    """The request hook that waits for the next slot of one limit: shared by the run's processes through
    `rate_file`, else by the clients of this process under `name`. Equal hooks are one limit, so an HTTP client
    shared by several LLM clients of that limit carries it once and each attempt takes exactly one slot."""

    interval: float
    rate_file: Path | None
    name: str

    def __call__(self, request: Any = None) -> None:
        if self.rate_file is not None:
            shared_rate_wait(self.rate_file, self.interval)
        else:
            RateLimiter.wait(self.name, self.interval, time.sleep, time.monotonic)


DEFAULT_CONCURRENCY = 4  # in flight at once where no rate is configured to size it from
MAX_DERIVED_CONCURRENCY = 256


def derived_concurrency(requests_per_minute: float, latency_s: float) -> int:
    """Requests in flight that keep an API at its configured rate: rate × latency (Little's law), rounded up,
    between 1 and MAX_DERIVED_CONCURRENCY; DEFAULT_CONCURRENCY where no rate is configured."""
    if requests_per_minute <= 0 or latency_s <= 0:
        return DEFAULT_CONCURRENCY
    return max(1, min(MAX_DERIVED_CONCURRENCY, math.ceil(requests_per_minute / 60.0 * latency_s)))


def is_connection_error(error: BaseException) -> bool:
    """The SDKs' "could not reach the endpoint" (anthropic / openai `APIConnectionError`, timeouts included),
    told by class name so neither SDK is imported here."""
    return any(cls.__name__ == "APIConnectionError" for cls in type(error).__mro__)


@dataclass
class LLMReply:
    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cached: bool
    backend: str
    model: str


@dataclass
class LLMUsage:
    """Counters an asset turns into metadata: calls actually sent, cache hits, tokens and estimated cost."""

    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unknown_cost_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, reply: LLMReply) -> None:
        with self._lock:
            if reply.cached:
                self.cache_hits += 1
                return
            self.calls += 1
            self.input_tokens += reply.input_tokens
            self.output_tokens += reply.output_tokens
            if reply.cost_usd is None:
                self.unknown_cost_calls += 1
            else:
                self.cost_usd += reply.cost_usd

    def as_metadata(self, prefix: str = "llm") -> dict[str, Any]:
        return {
            f"{prefix}_calls": self.calls,
            f"{prefix}_cache_hits": self.cache_hits,
            f"{prefix}_input_tokens": self.input_tokens,
            f"{prefix}_output_tokens": self.output_tokens,
            f"{prefix}_estimated_cost_usd": round(self.cost_usd, 6),
            f"{prefix}_calls_with_unknown_price": self.unknown_cost_calls,
        }


class LLMClient:
    """A completion client with a disk cache. `http_client` (an httpx2.Client) is handed to the real SDK client,
    which is how tests put a mock transport under the anthropic / openai SDKs."""

    def __init__(
        self,
        *,
        backend: str,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        max_retries: int = 3,
        http_client: Any = None,
        label: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        requests_per_minute: float = 0.0,
        concurrency: int = DEFAULT_CONCURRENCY,
        budget: Any = None,
        rate_file: str | os.PathLike | None = None,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"unknown LLM backend {backend!r}; expected one of {BACKENDS}")
        self.backend = backend
        self.model = model
        self.base_url = base_url or None
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.cache = DiskCache(cache_dir) if cache_dir else None
        self.usage = LLMUsage()
        self.label = label or ("offline" if backend == "offline" else f"{backend}:{model}")
        self._api_key = api_key
        self._http_client = http_client
        self._sdk: Any = None
        self._sdk_lock = threading.Lock()  # threads asking at once build one SDK client
        self._clock = clock
        self.requests_per_minute = requests_per_minute  # 0: no limit of Lumina's own (the API's still holds)
        self.rate_file = Path(rate_file) if rate_file else None  # shares the limit with the run's processes
        # requests in flight at once: callers run this many threads, and the client never sends more at a time
        self.concurrency = max(1, int(concurrency))
        self._in_flight = threading.BoundedSemaphore(self.concurrency)
        self._asking_guard = threading.Lock()
        self._asking_locks: dict[str, list] = {}  # cache key -> [lock, waiting threads]
        self.budget = budget  # a `core.budget.Budget` shared by the run's clients, or None
        self._unreachable: tuple[float, str] | None = None  # (when, error class) of the last failed connect

    @property
    def is_offline(self) -> bool:
        return self.backend == "offline"

    def _client(self) -> Any:
        with self._sdk_lock:
            if self._sdk is None:
                self._sdk = self._build_sdk()
            return self._sdk

    def _build_sdk(self) -> Any:
        common: dict[str, Any] = {"max_retries": self.max_retries, "timeout": self.timeout}
        http_client = self._http_client
        if self.requests_per_minute > 0:
            # every attempt the SDK sends, its own retries of 429 and 5xx included, takes a slot of the limit
            if http_client is None:
                http_client = self._default_http_client()
            hooks = http_client.event_hooks
            slot = RequestSlot(60.0 / self.requests_per_minute, self.rate_file, f"llm:{self.label}")
            if slot not in hooks.get("request", []):  # a client shared by clients of one limit takes one slot
                hooks["request"] = [*hooks.get("request", []), slot]
                http_client.event_hooks = hooks
        if http_client is not None:
            common["http_client"] = http_client
        if self.base_url:
            common["base_url"] = self.base_url
        if self.backend == "anthropic":
            import anthropic

            return anthropic.Anthropic(api_key=self._api_key, **common)
        import openai

        # openai-compatible servers (vLLM, Ollama, llama.cpp) often need no key; the SDK insists on one.
        return openai.OpenAI(api_key=self._api_key or "not-needed", **common)

    def _default_http_client(self) -> Any:
        """The SDK's own default HTTP client, with room for `concurrency` pooled connections."""
        import httpx2

        if self.backend == "anthropic":
            from anthropic import DefaultHttpxClient
        else:
            from openai import DefaultHttpxClient
        keep = max(100, self.concurrency)
        return DefaultHttpxClient(
            limits=httpx2.Limits(max_connections=max(1000, keep), max_keepalive_connections=keep)
        )

    def cache_key(self, prompt: str, params: dict[str, Any]) -> str:
        """Two endpoints serving one model name (a gateway and a local server, say) never share answers; the
        default endpoint keeps the key it always had, so existing caches stay valid."""
        if self.base_url:
            return DiskCache.key_for(self.backend, self.model, self.base_url, prompt, params)
        return DiskCache.key_for(self.backend, self.model, prompt, params)

    def complete(
        self,
        prompt: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        system: str | None = None,
    ) -> LLMReply:
        """One user-turn completion, from the cache when this exact (backend, model, prompt, params) was seen."""
        if self.is_offline:
            raise LLMUnavailable("offline LLM backend: use the caller's offline path")
        params = {"temperature": temperature, "max_tokens": max_tokens or self.max_tokens, "system": system}
        key = self.cache_key(prompt, params)
        cached = self._from_cache(key)
        if cached is not None:
            return cached
        # one call per prompt at a time: a thread asking what another is asking waits for that answer (the cache)
        with self._asking(key):
            cached = self._from_cache(key)
            if cached is not None:
                return cached
            return self._call(key, prompt, params)

    def _from_cache(self, key: str) -> LLMReply | None:
        hit = self.cache.get(key) if self.cache is not None else None
        return self._reply(hit, cached=True) if hit is not None else None

    def _reply(self, record: dict[str, Any], *, cached: bool) -> LLMReply:
        """The reply a cache record stands for, counted in `usage`."""
        reply = LLMReply(
            text=record["text"],
            input_tokens=record["input_tokens"],
            output_tokens=record["output_tokens"],
            cost_usd=record.get("cost_usd"),
            cached=cached,
            backend=self.backend,
            model=self.model,
        )
        self.usage.add(reply)
        return reply

    @contextlib.contextmanager
    def _asking(self, key: str):
        """Held while `key`'s prompt is being asked: in this process (a lock per key) and in every process sharing
        the cache (a lock file, removed before it is released: filelock's next holder then takes a fresh one)."""
        from filelock import FileLock

        with self._asking_guard:
            entry = self._asking_locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        path = self.cache.root / "asking" / f"{key}.lock" if self.cache is not None else None
        try:
            with entry[0], FileLock(str(path)) if path else contextlib.nullcontext():
                try:
                    yield
                finally:
                    if path:
                        path.unlink(missing_ok=True)
        finally:
            with self._asking_guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._asking_locks[key]

    def _call(self, key: str, prompt: str, params: dict[str, Any]) -> LLMReply:
        self._refuse_while_unreachable()
        try:
            with self._in_flight:
                if self.budget is not None:
                    self.budget.check()
                if self.backend == "anthropic":
                    text, tokens_in, tokens_out = self._anthropic(prompt, params)
                else:
                    text, tokens_in, tokens_out = self._openai(prompt, params)
        except Exception as error:  # an answer, even an error status, means the endpoint is there
            self._unreachable = (self._clock(), type(error).__name__) if is_connection_error(error) else None
            raise
        self._unreachable = None
        record = {
            "text": text,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": prices.llm_cost(self.model, tokens_in, tokens_out),
            "backend": self.backend,
            "model": self.model,
        }
        if self.cache is not None:
            self.cache.put(key, record)
        reply = self._reply(record, cached=False)
        if self.budget is not None:
            self.budget.spend(reply.cost_usd)
        return reply

    def _refuse_while_unreachable(self) -> None:
        """LLMUnavailable at once while the endpoint failed to connect less than UNREACHABLE_RETRY_SECONDS ago."""
        if self._unreachable is None:
            return
        when, why = self._unreachable
        waited = self._clock() - when
        if waited < UNREACHABLE_RETRY_SECONDS:
            raise LLMUnavailable(
                f"{self.label} could not be reached {waited:.0f} s ago ({why}); asked again after "
                f"{UNREACHABLE_RETRY_SECONDS:g} s"
            )

    def _anthropic(self, prompt: str, params: dict[str, Any]) -> tuple[str, int, int]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params["max_tokens"],
            "messages": [{"role": "user", "content": prompt}],
        }
        if params["system"]:
            kwargs["system"] = params["system"]
        if params["temperature"] is not None:
            # anthropic 2.x has no typed sampling parameters; the Messages API still accepts the field.
            kwargs["extra_body"] = {"temperature": params["temperature"]}
        message = self._client().messages.create(**kwargs)
        text = "".join(
            getattr(block, "text", "") for block in message.content if getattr(block, "type", "") == "text"
        )
        usage = message.usage
        return text, int(usage.input_tokens or 0), int(usage.output_tokens or 0)

    def _openai(self, prompt: str, params: dict[str, Any]) -> tuple[str, int, int]:
        messages = []
        if params["system"]:
            messages.append({"role": "system", "content": params["system"]})
        messages.append({"role": "user", "content": prompt})
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": params["max_tokens"],
        }
        if params["temperature"] is not None:
            kwargs["temperature"] = params["temperature"]
        completion = self._client().chat.completions.create(**kwargs)
        text = completion.choices[0].message.content or ""
        usage = completion.usage
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        return text, tokens_in, tokens_out
