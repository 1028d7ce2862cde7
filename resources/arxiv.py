"""arXiv API resource: one request every 3 seconds, as arXiv asks."""

from __future__ import annotations

import httpx
from pydantic import Field

from lumina_assets.core import settings
from lumina_assets.corpus.arxiv import MIN_INTERVAL_SECONDS, ArxivClient
from resources.http import HttpApiResource


class ArxivResource(HttpApiResource):
    base_url: str = Field(
        default_factory=lambda: settings.get().network.arxiv_url, description="LUMINA_ARXIV_URL"
    )
    min_interval_s: float = MIN_INTERVAL_SECONDS
    cache_namespace: str = "arxiv"

    def client(self, transport: httpx.BaseTransport | None = None) -> ArxivClient:
        return ArxivClient(self.http_client(transport))
