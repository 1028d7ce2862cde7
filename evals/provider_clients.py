"""Raw clients of the external search APIs; each returns the provider's JSON untouched (`evals.providers` maps it).
They go through `lumina_assets.core.http.HttpClient`; a key travels only in a header or a query parameter the
HTTP layer redacts and keeps out of cache keys."""

from __future__ import annotations

import threading
from typing import Any

from lumina_assets.core.http import HttpClient

S2_PAPER_FIELDS = "title,abstract,tldr,externalIds,url,year,authors,openAccessPdf"
# Exa's `maxCharacters` (docs/benchmark.md): one excerpt a little longer than the equal form's CONTEXT_TOKENS words
EXA_HIGHLIGHT_CHARACTERS = 1000


class SemanticScholarClient:
    """Graph API: `/snippet/search` for passages, `/paper/search` (title + abstract) as the fallback."""

    def __init__(self, http: HttpClient, *, concurrency: int = 1):
        self.http = http
        self.concurrency = concurrency

    def snippet_search(self, query: str, limit: int) -> dict[str, Any]:
        return self.http.get_json("/snippet/search", params={"query": query, "limit": limit})

    def paper_search(self, query: str, limit: int, fields: str = S2_PAPER_FIELDS) -> dict[str, Any]:
        return self.http.get_json("/paper/search", params={"query": query, "limit": limit, "fields": fields})

    def paper_batch(self, ids: list[str], fields: str = "externalIds") -> list[Any]:
        """`POST /paper/batch`: one record (or null) per id, e.g. `CorpusId:123`; snippet search gives no DOIs."""
        return self.http.post_json("/paper/batch", {"ids": ids}, params={"fields": fields})


class SerpApiScholarClient:
    """SerpAPI `engine=google_scholar`: organic results whose snippets are the contexts' chunks."""

    def __init__(self, http: HttpClient, api_key: str, *, concurrency: int = 1):
        self.http = http
        self._api_key = api_key
        self.concurrency = concurrency

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
    """Exa `/search` with `contents.highlights`: the highlight is the context's chunk."""

    def __init__(self, http: HttpClient, *, category: str = "research paper", concurrency: int = 1):
        self.http = http
        self.category = category
        self.concurrency = concurrency
        self._last = threading.local()

    def fetched(self) -> bool | None:
        """Whether this thread's last search was sent (not answered from the cache); None before any."""
        return getattr(self._last, "fetched", None)

    def search(self, query: str, num_results: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "query": query,
            "numResults": num_results,
            "type": "auto",
            "contents": {"highlights": {"maxCharacters": EXA_HIGHLIGHT_CHARACTERS}},
        }
        if self.category:
            body["category"] = self.category
        response = self.http.request("POST", "/search", json_body=body)
        self._last.fetched = not response.from_cache
        return self.http.decode_json(response)
