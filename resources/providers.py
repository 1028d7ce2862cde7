"""External search providers the benchmark compares Lumina with: raw API clients over the shared HTTP layer.

Each client returns the provider's JSON untouched (mapping to contexts lives in `evals.providers`, next to the
provider protocol), goes through `lumina_assets.core.http.HttpClient` (retry, Retry-After, per-host rate limit, disk
cache) and takes its base URL from config. Keys arrive through `dg.EnvVar` and travel only in a header or in a
query parameter the HTTP layer redacts and keeps out of cache keys.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import httpx
from pydantic import Field

from lumina_assets.core import settings
from lumina_assets.core.http import HttpClient
from resources.http import HttpApiResource

S2_SNIPPET_FIELDS = "snippet.text,snippet.snippetKind,snippet.section,snippet.snippetOffset"
S2_PAPER_FIELDS = "title,abstract,tldr,externalIds,url,year,authors,openAccessPdf"


class SemanticScholarClient:
    """Graph API: `/snippet/search` for passages, `/paper/search` (title + abstract) as the fallback."""

    def __init__(self, http: HttpClient):
        self.http = http

    def snippet_search(self, query: str, limit: int) -> dict[str, Any]:
        return self.http.get_json("/snippet/search", params={"query": query, "limit": limit})

    def paper_search(self, query: str, limit: int, fields: str = S2_PAPER_FIELDS) -> dict[str, Any]:
        return self.http.get_json("/paper/search", params={"query": query, "limit": limit, "fields": fields})

    def paper_batch(self, ids: list[str], fields: str = "externalIds") -> list[Any]:
        """`POST /paper/batch`: one record (or null) per id, e.g. `CorpusId:123`; snippet search gives no DOIs."""
        return self.http.post_json("/paper/batch", {"ids": ids}, params={"fields": fields})


class SerpApiScholarClient:
    """SerpAPI `engine=google_scholar`: organic results whose snippets are the contexts' chunks."""

    def __init__(self, http: HttpClient, api_key: str):
        self.http = http
        self._api_key = api_key

    def search(self, query: str, num: int) -> dict[str, Any]:
        params = {
            "engine": "google_scholar",
            "q": query,
            "num": min(num, 20),
            "hl": "en",
            "api_key": self._api_key,
        }
        return self.http.get_json("/search.json", params=params)


class ExaClient:
    """Exa `/search` with `contents.highlights`: the highlights are the contexts' chunks."""

    def __init__(self, http: HttpClient, *, category: str = "research paper", highlight_sentences: int = 3):
        self.http = http
        self.category = category
        self.highlight_sentences = highlight_sentences

    def search(self, query: str, num_results: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "query": query,
            "numResults": num_results,
            "type": "auto",
            "contents": {"highlights": {"numSentences": self.highlight_sentences, "highlightsPerUrl": 3}},
        }
        if self.category:
            body["category"] = self.category
        return self.http.post_json("/search", body)


class _ProviderResource(HttpApiResource):
    """A search provider: the shared HTTP knobs plus a key; without the key it is skipped, never faked."""

    api_key: str = ""
    base_url: str = ""

    def available(self) -> bool:
        return bool(self.resolved_api_key())

    def unavailable_reason(self) -> str:
        return ""

    def _http(self, name: str, headers: dict[str, str], transport: httpx.BaseTransport | None) -> HttpClient:
        return self.http_client(transport, headers=headers, cache_namespace=f"http/{name}")


class SemanticScholarResource(_ProviderResource):
    """Semantic Scholar Graph API (1 request/s with a key, `x-api-key` header)."""

    base_url: str = Field(
        default_factory=settings.semantic_scholar_url, description="LUMINA_SEMANTIC_SCHOLAR_URL"
    )
    min_interval_s: float = 1.0
    api_key_env: str = "SEMANTIC_SCHOLAR_API_KEY"

    def unavailable_reason(self) -> str:
        return "" if self.available() else "SEMANTIC_SCHOLAR_API_KEY is not set: semantic_scholar skipped"

    def get_client(self, transport: httpx.BaseTransport | None = None) -> SemanticScholarClient:
        headers = {"x-api-key": key} if (key := self.resolved_api_key()) else {}
        return SemanticScholarClient(self._http("semantic_scholar", headers, transport))


class SerpApiScholarResource(_ProviderResource):
    """SerpAPI Google Scholar (key as the `api_key` query parameter, redacted by the HTTP layer)."""

    base_url: str = Field(default_factory=settings.serpapi_url, description="LUMINA_SERPAPI_URL")
    api_key_env: str = "SERPAPI_API_KEY"

    def unavailable_reason(self) -> str:
        return "" if self.available() else "SERPAPI_API_KEY is not set: google_scholar skipped"

    def get_client(self, transport: httpx.BaseTransport | None = None) -> SerpApiScholarClient:
        return SerpApiScholarClient(self._http("google_scholar", {}, transport), self.resolved_api_key())


class ExaResource(_ProviderResource):
    """Exa neural search (`x-api-key` header)."""

    base_url: str = Field(default_factory=settings.exa_url, description="LUMINA_EXA_URL")
    api_key_env: str = "EXA_API_KEY"
    category: str = "research paper"

    def unavailable_reason(self) -> str:
        return "" if self.available() else "EXA_API_KEY is not set: exa skipped"

    def get_client(self, transport: httpx.BaseTransport | None = None) -> ExaClient:
        headers = {"x-api-key": key} if (key := self.resolved_api_key()) else {}
        return ExaClient(self._http("exa", headers, transport), category=self.category)


def _env_key(name: str) -> Any:
    return dg.EnvVar(name) if settings.is_set(name) else ""


def build_provider_resources() -> dict[str, dg.ConfigurableResource]:
    """Keys through `dg.EnvVar` only when set: a missing key means the provider is skipped, not a broken location."""
    return {
        "semantic_scholar": SemanticScholarResource(api_key=_env_key("SEMANTIC_SCHOLAR_API_KEY")),
        "google_scholar": SerpApiScholarResource(api_key=_env_key("SERPAPI_API_KEY")),
        "exa": ExaResource(api_key=_env_key("EXA_API_KEY")),
    }
