"""The Dagster resources of the external search providers: each configures the shared HTTP layer and hands
out its API client (`evals.provider_clients`); names, resource keys and key variables come from
`evals.registry`."""

from __future__ import annotations

from typing import ClassVar

import dagster as dg
import httpx
from pydantic import Field

from evals.provider_clients import ExaClient, SemanticScholarClient, SerpApiScholarClient
from evals.registry import PROVIDERS, external_specs
from lumina_assets.core import settings
from lumina_assets.core.http import HttpClient
from lumina_assets.core.llm import derived_concurrency
from resources.env import env_secret
from resources.http import HttpApiResource


class _ProviderResource(HttpApiResource):
    """A search provider: the shared HTTP knobs plus a key; without the key it is skipped, never faked."""

    provider: ClassVar[str]  # its name in evals.registry
    api_key: str = ""
    base_url: str = ""
    concurrency: int = Field(
        default=0,
        description="searches in flight at once; 0: the rate min_interval_s allows × expected_latency_s",
    )
    expected_latency_s: float = Field(
        default=1.0, description="typical seconds one search takes; sizes the derived concurrency"
    )

    def resolved_concurrency(self) -> int:
        rpm = 60.0 / self.min_interval_s if self.min_interval_s > 0 else 0.0
        return self.concurrency if self.concurrency > 0 else derived_concurrency(rpm, self.expected_latency_s)

    def available(self) -> bool:
        return bool(self.resolved_api_key())

    def unavailable_reason(self) -> str:
        return "" if self.available() else f"{self.api_key_env} is not set: {self.provider} skipped"

    def _http(self, headers: dict[str, str], transport: httpx.BaseTransport | None) -> HttpClient:
        return self.http_client(transport, headers=headers, cache_namespace=f"http/{self.provider}")


class SemanticScholarResource(_ProviderResource):
    """Semantic Scholar Graph API (1 request/s with a key, `x-api-key` header)."""

    provider: ClassVar[str] = "semantic_scholar"
    base_url: str = Field(
        default_factory=lambda: settings.get().network.semantic_scholar_url,
        description="LUMINA_SEMANTIC_SCHOLAR_URL",
    )
    min_interval_s: float = 1.0
    api_key_env: str = PROVIDERS[provider].key_env

    def get_client(self, transport: httpx.BaseTransport | None = None) -> SemanticScholarClient:
        headers = {"x-api-key": key} if (key := self.resolved_api_key()) else {}
        return SemanticScholarClient(self._http(headers, transport), concurrency=self.resolved_concurrency())


class SerpApiScholarResource(_ProviderResource):
    """SerpAPI Google Scholar (key as the `api_key` query parameter, redacted by the HTTP layer)."""

    provider: ClassVar[str] = "google_scholar"
    base_url: str = Field(
        default_factory=lambda: settings.get().network.serpapi_url, description="LUMINA_SERPAPI_URL"
    )
    api_key_env: str = PROVIDERS[provider].key_env

    def get_client(self, transport: httpx.BaseTransport | None = None) -> SerpApiScholarClient:
        return SerpApiScholarClient(
            self._http({}, transport), self.resolved_api_key(), concurrency=self.resolved_concurrency()
        )


class ExaResource(_ProviderResource):
    """Exa neural search (`x-api-key` header; 10 requests/s to `/search` by default)."""

    provider: ClassVar[str] = "exa"
    base_url: str = Field(
        default_factory=lambda: settings.get().network.exa_url, description="LUMINA_EXA_URL"
    )
    min_interval_s: float = 0.1
    expected_latency_s: float = 1.5
    api_key_env: str = PROVIDERS[provider].key_env
    category: str = "research paper"

    def get_client(self, transport: httpx.BaseTransport | None = None) -> ExaClient:
        headers = {"x-api-key": key} if (key := self.resolved_api_key()) else {}
        return ExaClient(
            self._http(headers, transport), category=self.category, concurrency=self.resolved_concurrency()
        )


RESOURCE_CLASSES = {
    cls.provider: cls for cls in (SemanticScholarResource, SerpApiScholarResource, ExaResource)
}


def build_provider_resources() -> dict[str, dg.ConfigurableResource]:
    """One resource per external provider of the registry, under its resource key. Keys through `dg.EnvVar` only
    when set: a missing key means the provider is skipped, not a broken code location."""
    return {
        spec.resource_key: RESOURCE_CLASSES[spec.name](api_key=env_secret(spec.key_env))
        for spec in external_specs()
    }
