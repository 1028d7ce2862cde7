"""OpenAlex resource. An API key has been required since Feb 2026 (set OPENALEX_API_KEY)."""

from __future__ import annotations

import httpx
from pydantic import Field

from lumina_assets.core import settings
from lumina_assets.corpus.openalex import OpenAlexClient
from resources.http import HttpApiResource


class OpenAlexResource(HttpApiResource):
    base_url: str = Field(
        default_factory=lambda: settings.get().network.openalex_url, description="LUMINA_OPENALEX_URL"
    )
    api_key: str | None = Field(default=None, description="from dg.EnvVar('OPENALEX_API_KEY')")
    mailto: str | None = Field(default=None, description="contact address for OpenAlex's polite pool")
    min_interval_s: float = 0.11  # OpenAlex allows 10 requests per second
    cache_namespace: str = "openalex"
    api_key_env: str = "OPENALEX_API_KEY"

    def client(self, transport: httpx.BaseTransport | None = None) -> OpenAlexClient:
        return OpenAlexClient(
            self.http_client(transport), api_key=self.resolved_api_key() or None, mailto=self.mailto
        )
