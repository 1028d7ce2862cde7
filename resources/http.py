"""Base for every resource that talks to an external HTTP API: the knobs users need (base URL, timeout,
retries, rate limit, response cache), built on the one shared HttpClient."""

from __future__ import annotations

import dagster as dg
import httpx
from pydantic import Field

from lumina_assets.core import settings
from lumina_assets.core.http import DEFAULT_DEADLINE_SECONDS, DEFAULT_MAX_RESPONSE_BYTES, HttpClient
from resources.env import first_secret


class HttpApiResource(dg.ConfigurableResource):
    """Subclasses set their own defaults; `api_key` fields on subclasses must come from dg.EnvVar."""

    base_url: str
    timeout_s: float = Field(default=30.0, description="connect / read timeout of each request")
    deadline_s: float = Field(
        default=DEFAULT_DEADLINE_SECONDS,
        description="total time one call may take, retries and redirects included",
    )
    max_response_mb: float = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES / (1024 * 1024),
        description="larger API answers are refused (too_large)",
    )
    max_retries: int = 4
    backoff_base_s: float = 1.0
    min_interval_s: float = Field(default=0.0, description="minimum seconds between requests to this host")
    cache_responses: bool = Field(default=True, description="keep responses on disk so reruns repeat no call")
    cache_namespace: str = "http"
    api_key_env: str = Field(
        default="",
        description="environment variable holding the API key, read through dg.EnvVar when `api_key` is not "
        "given; a class default, so overriding any other field in run config keeps the key",
    )

    def resolved_api_key(self) -> str:
        """The key: `api_key` when given (a dg.EnvVar), else the variable named by `api_key_env` (resources/env.py
        says why both), else ""."""
        return getattr(self, "api_key", None) or first_secret([self.api_key_env])

    def http_client(
        self,
        transport: httpx.BaseTransport | None = None,
        *,
        headers: dict[str, str] | None = None,
        cache_namespace: str | None = None,
    ) -> HttpClient:
        """A configured client; tests pass a transport that serves recorded responses."""
        namespace = cache_namespace or self.cache_namespace
        return HttpClient(
            base_url=self.base_url,
            headers=headers,
            timeout=self.timeout_s,
            deadline=self.deadline_s,
            max_bytes=int(self.max_response_mb * 1024 * 1024),
            max_retries=self.max_retries,
            backoff_base=self.backoff_base_s,
            min_interval=self.min_interval_s,
            cache_dir=(settings.cache_dir() / namespace) if self.cache_responses else None,
            transport=transport,
        )
