"""Search providers behind one protocol, each answer mapped to `lumina_assets.core.schemas.Context`, so the
judge sees every provider the same way. A provider without its key raises `ProviderUnavailable`, never fakes."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import polars as pl

from lumina_assets.core.schemas import Context

DOI_PATTERN = re.compile(r"\b(10\.\d{4,9}/[^\s\"'<>?#]+)", re.IGNORECASE)


class ProviderUnavailable(RuntimeError):
    """The provider cannot run here (no key, no index); the message says why and is safe to show."""


class Provider(Protocol):
    name: str

    def search(self, query: str, k: int) -> list[Context]: ...


def doi_from_text(text: str | None) -> str | None:
    """A DOI found in a URL or string, lower-cased and without trailing punctuation."""
    if not text:
        return None
    match = DOI_PATTERN.search(text)
    return match.group(1).rstrip(".,;)").lower() if match else None


def map_s2_snippets(payload: dict[str, Any], k: int) -> list[Context]:
    """S2 `/snippet/search`: snippets grouped by paper (rank of each paper's best snippet), up to k papers."""
    contexts: dict[str, Context] = {}
    for item in payload.get("data") or []:
        snippet = item.get("snippet") or {}
        paper = item.get("paper") or {}
        text = (snippet.get("text") or "").strip()
        if not text:
            continue
        corpus_id = paper.get("corpusId")
        key = str(corpus_id or paper.get("title") or len(contexts))
        if key not in contexts:
            if len(contexts) >= k:
                continue
            external = paper.get("externalIds") or {}
            doi = external.get("DOI") or doi_from_text((paper.get("openAccessInfo") or {}).get("disclaimer"))
            contexts[key] = Context(
                title=paper.get("title") or "",
                chunks=[],
                doi=doi.lower() if doi else None,
                url=f"https://www.semanticscholar.org/p/{corpus_id}" if corpus_id else None,
                paper_id=f"s2-corpus:{corpus_id}" if corpus_id else None,
                score=float(item.get("score") or 0.0),
            )
        if text not in contexts[key].chunks:
            contexts[key].chunks.append(text)
    return list(contexts.values())


def map_s2_papers(payload: dict[str, Any], k: int) -> list[Context]:
    """S2 `/paper/search`: one context per paper, its abstract (or TLDR) the only chunk, its id the corpus id if any."""
    contexts = []
    for rank, paper in enumerate((payload.get("data") or [])[:k]):
        text = paper.get("abstract") or ((paper.get("tldr") or {}).get("text")) or ""
        external, s2_id = paper.get("externalIds") or {}, paper.get("paperId")
        doi, corpus_id = external.get("DOI"), external.get("CorpusId")
        contexts.append(
            Context(
                title=paper.get("title") or "",
                chunks=[text.strip()] if text.strip() else [],
                doi=doi.lower() if doi else None,
                url=paper.get("url") or (f"https://www.semanticscholar.org/paper/{s2_id}" if s2_id else None),
                paper_id=f"s2-corpus:{corpus_id}" if corpus_id else (f"s2:{s2_id}" if s2_id else None),
                score=float(k - rank),
            )
        )
    return contexts


def map_serpapi_scholar(payload: dict[str, Any], k: int) -> list[Context]:
    """SerpAPI google_scholar: each organic result's snippet is its one chunk."""
    contexts = []
    for rank, result in enumerate((payload.get("organic_results") or [])[:k]):
        snippet = (result.get("snippet") or "").strip()
        link = result.get("link")
        contexts.append(
            Context(
                title=result.get("title") or "",
                chunks=[snippet] if snippet else [],
                doi=doi_from_text(link),
                url=link,
                paper_id=f"gs:{result['result_id']}" if result.get("result_id") else None,
                score=float(k - rank),
            )
        )
    return contexts


def map_exa(payload: dict[str, Any], k: int) -> list[Context]:
    """Exa `/search` with highlights: the highlights are the chunks (full `text` only when none came back)."""
    contexts = []
    for rank, result in enumerate((payload.get("results") or [])[:k]):
        chunks = [h.strip() for h in result.get("highlights") or [] if h and h.strip()]
        if not chunks and (result.get("text") or "").strip():
            chunks = [result["text"].strip()]
        url = result.get("url")
        contexts.append(
            Context(
                title=result.get("title") or "",
                chunks=chunks,
                doi=doi_from_text(url),
                url=url,
                paper_id=f"exa:{result['id']}" if result.get("id") else None,
                score=float(result.get("score") or (k - rank)),
            )
        )
    return contexts


class SemanticScholarProvider:
    """Snippet search, falling back to paper search when it fails or finds nothing; snippet results get their DOIs
    from `/paper/batch`. Fallbacks and failed lookups are counted."""

    name = "semantic_scholar"

    def __init__(self, client):
        self.client = client
        self.fallbacks = 0
        self.snippet_errors = 0
        self.doi_lookup_failures = 0

    def _add_dois(self, contexts: list[Context]) -> None:
        from lumina_assets.core.http import HttpError

        missing = [c for c in contexts if not c.doi and c.paper_id and c.paper_id.startswith("s2-corpus:")]
        if not missing or not hasattr(self.client, "paper_batch"):
            return
        try:
            records = self.client.paper_batch(["CorpusId:" + c.paper_id.split(":", 1)[1] for c in missing])
        except HttpError:
            self.doi_lookup_failures += 1
            return
        for context, record in zip(missing, records or [], strict=False):
            doi = ((record or {}).get("externalIds") or {}).get("DOI")
            if doi:
                context.doi = doi.lower()

    def search(self, query: str, k: int) -> list[Context]:
        from lumina_assets.core.http import HttpError

        try:
            contexts = map_s2_snippets(self.client.snippet_search(query, limit=max(k * 3, k)), k)
        except HttpError:
            self.snippet_errors += 1
            contexts = []
        if contexts:
            self._add_dois(contexts)
            return contexts
        self.fallbacks += 1
        return map_s2_papers(self.client.paper_search(query, limit=k), k)

    def stats(self) -> dict[str, int]:
        return {
            "snippet_fallbacks": self.fallbacks,
            "snippet_errors": self.snippet_errors,
            "doi_lookup_failures": self.doi_lookup_failures,
        }


class GoogleScholarProvider:
    name = "google_scholar"

    def __init__(self, client):
        self.client = client

    def search(self, query: str, k: int) -> list[Context]:
        return map_serpapi_scholar(self.client.search(query, num=k), k)


class ExaProvider:
    """Exa search, summing the price each fetched response states (`costDollars.total`) or counting it unpriced."""

    name = "exa"

    def __init__(self, client):
        self.client = client
        self.cost_usd = 0.0
        self.unpriced_requests = 0
        self._lock = threading.Lock()  # searches run in several threads

    def search(self, query: str, k: int) -> list[Context]:
        payload = self.client.search(query, num_results=k)
        fetched = getattr(self.client, "fetched", None)
        if fetched is not None and fetched():  # this thread's request was sent, not answered from the cache
            total = (payload.get("costDollars") or {}).get("total")
            with self._lock:
                if isinstance(total, int | float):
                    self.cost_usd += float(total)
                else:
                    self.unpriced_requests += 1
        return map_exa(payload, k)

    def stats(self) -> dict[str, float | int]:
        return {"reported_cost_usd": round(self.cost_usd, 6), "unpriced_requests": self.unpriced_requests}


class LuminaProvider:
    """This project's search engine through `search_fn(query, k)`; `name` tells a baseline config (dense) apart."""

    name = "lumina"

    def __init__(
        self,
        search_fn: Callable[[str, int], list[Context]],
        *,
        name: str = "lumina",
    ):
        self.search_fn = search_fn
        self.name = name

    def describe(self) -> dict[str, Any]:
        """What this provider searched with, for the run manifest (evals.disclosure)."""
        from evals.disclosure import engine_setup

        return {**engine_setup(self.search_fn), "llm": "none"}

    def search(self, query: str, k: int) -> list[Context]:
        contexts = list(self.search_fn(query, k))[:k]
        return [c if isinstance(c, Context) else Context(**c) for c in contexts]


def lumina_search_fn(**engine_kwargs: Any) -> Callable[[str, int], list[Context]]:
    """`lumina_assets.search.engine.SearchEngine(...).search`, or ProviderUnavailable when the engine or index is missing."""
    try:
        from lumina_assets.search.engine import SearchEngine
    except ImportError as exc:
        raise ProviderUnavailable(f"lumina search engine not importable ({exc}): lumina skipped") from exc
    try:
        engine = SearchEngine(**engine_kwargs)
        engine.store()  # opens the index now: a missing index is a reason to skip, not 1 error per question
    except Exception as exc:
        raise ProviderUnavailable(
            f"lumina search index not available ({type(exc).__name__}: {exc}): materialize `passage_index` first"
        ) from exc
    return engine.search


def lumina_api_search_fn(
    base_url: str, *, timeout: float = 120.0, http_client=None
) -> Callable[[str, int], list[Context]]:
    """The same engine through `lumina serve`'s JSON API; a failed call raises, never an empty result."""
    import httpx

    client = http_client or httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, trust_env=False)

    def search(query: str, k: int) -> list[Context]:
        contexts: list[Context] = []
        page = 1
        while len(contexts) < k:
            response = client.post(
                "/api/search", json={"query": query, "k": min(k, 50), "page": page, "overview": False}
            )
            response.raise_for_status()
            data = response.json()
            for result in data["results"]:
                contexts.append(
                    Context(
                        title=result["title"],
                        chunks=[p["text"] for p in result["passages"]],
                        doi=result.get("doi"),
                        url=result.get("url"),
                        paper_id=result["paper_id"],
                        score=float(result["score"]),
                        passage_ids=[p["passage_id"] for p in result["passages"]],
                    )
                )
            if not data.get("has_more") or not data["results"]:
                break
            page += 1
        return contexts[:k]

    return search


class BM25Provider:
    """Baseline `bm25` as BEIR defines it (`bm25_config`): Okapi BM25 over one title + abstract document per paper
    ranks the papers; a paper's context is its passages, best BM25 passage score first."""

    name = "bm25"
    K1 = 1.2
    B = 0.75

    def __init__(
        self, passages: pl.DataFrame, papers: pl.DataFrame | None = None, *, max_chunks_per_context: int = 3
    ):
        from evals.lexical import LexicalIndex

        if passages is None or passages.height == 0:
            raise ProviderUnavailable("no passages table: bm25 skipped (materialize `passages` first)")
        self.passages = passages.select("passage_id", "paper_id", "text").to_dicts()
        meta: dict[str, dict[str, Any]] = {}
        if papers is not None and papers.height:
            cols = [c for c in ("paper_id", "title", "doi", "abstract") if c in papers.columns]
            meta = {row["paper_id"]: row for row in papers.select(cols).to_dicts()}
        self.meta = meta
        self.max_chunks = max_chunks_per_context
        self.by_paper: dict[str, list[int]] = {}
        for index, passage in enumerate(self.passages):
            self.by_paper.setdefault(passage["paper_id"], []).append(index)
        self.paper_ids = list(self.by_paper)
        self.documents = [self._document(paper_id) for paper_id in self.paper_ids]
        self.index = LexicalIndex(self.documents, k1=self.K1, b=self.B)
        self.passage_index = LexicalIndex([p["text"] for p in self.passages], k1=self.K1, b=self.B)

    def _document(self, paper_id: str) -> str:
        meta = self.meta.get(paper_id, {})
        abstract = (meta.get("abstract") or "").strip()
        body = abstract or " ".join(self.passages[i]["text"] for i in self.by_paper[paper_id])
        return f"{meta.get('title') or ''} {body}".strip()

    def describe(self) -> dict[str, Any]:
        """The full configuration, printed in the report's setup section."""
        return {"baseline_config": bm25_config(self.max_chunks)}

    def search(self, query: str, k: int) -> list[Context]:
        passage_scores = self.passage_index.scores(query)
        contexts = []
        for index, score in self.index.search(query, k):
            if score <= 0:
                continue
            paper_id = self.paper_ids[index]
            members = self.by_paper[paper_id]
            if passage_scores is not None:
                members = sorted(members, key=lambda i: -float(passage_scores[i]))  # stable: ties keep order
            members = members[: self.max_chunks]
            meta = self.meta.get(paper_id, {})
            doi = meta.get("doi")
            contexts.append(
                Context(
                    title=meta.get("title") or "",
                    chunks=[self.passages[i]["text"] for i in members],
                    doi=doi,
                    url=f"https://doi.org/{doi}" if doi else None,
                    paper_id=paper_id,
                    score=float(score),
                    passage_ids=[self.passages[i]["passage_id"] for i in members],
                )
            )
        return contexts


def bm25_config(max_chunks: int = 3) -> dict[str, Any]:
    """The bm25 baseline's configuration as the report prints it (tests pin it)."""
    return {
        "method": "Okapi BM25, one document per paper (BEIR's BM25 baseline)",
        "document": "title + abstract (the paper's passages in order where it has no abstract)",
        "k1": BM25Provider.K1,
        "b": BM25Provider.B,
        "idf": "ln(1 + (N - n + 0.5) / (n + 0.5))",
        "tokenizer": "lumina_assets.search.text.tokenize (lower-cased \\w+ words, English stop words, Snowball)",
        "context": f"the paper's passages, best passage BM25 score first, at most {max_chunks}",
    }


def describe(provider) -> dict[str, Any]:
    """What the provider searched with (lumina: configuration, index, models); {} when it does not say."""
    return provider.describe() if hasattr(provider, "describe") else {}


def http_stats(provider) -> dict[str, int]:
    """The provider's HTTP counters (requests, retries, cache hits) for asset metadata; {} for local providers."""
    client = getattr(provider, "client", None)
    http = getattr(client, "http", None)
    return http.stats.as_metadata() if http is not None else {}


def contexts_from_rows(rows: Sequence[dict[str, Any]]) -> list[Context]:
    return [
        Context(
            title=r.get("title") or "",
            chunks=list(r.get("chunks") or []),
            doi=r.get("doi"),
            url=r.get("url"),
            paper_id=r.get("paper_id"),
            score=float(r.get("score") or 0.0),
            passage_ids=list(r.get("passage_ids") or []),
            ranked_passage_ids=list(r.get("ranked_passage_ids") or []),
        )
        for r in rows
    ]
