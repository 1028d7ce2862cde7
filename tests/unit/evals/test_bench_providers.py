"""Provider contract tests: each client through lumina_assets.core.http.HttpClient with an httpx.MockTransport, each
response mapped to contexts {title, chunks, doi, url}.

Semantic Scholar paper search and SerpAPI Google Scholar replay real recordings from ../shared/data/api_fixtures.
No recording exists for Semantic Scholar snippet search or for Exa: those fixtures are BUILT HERE from the providers'
documented response schemas (S2 Graph API OpenAPI `/snippet/search`: data[].snippet{text, snippetKind, section,
snippetOffset}, data[].score, data[].paper{corpusId, title, authors, openAccessInfo}; Exa `/search` docs:
results[]{id, url, title, score, publishedDate, author, highlights[], highlightScores[]}, requestId, costDollars).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml

from evals.provider_clients import EXA_HIGHLIGHT_CHARACTERS
from evals.providers import (
    BM25Provider,
    ExaProvider,
    GoogleScholarProvider,
    LuminaProvider,
    ProviderUnavailable,
    SemanticScholarProvider,
    doi_from_text,
    map_exa,
    map_s2_papers,
    map_s2_snippets,
    map_serpapi_scholar,
)
from lumina_assets.core.schemas import Context
from resources.providers import (
    ExaResource,
    SemanticScholarResource,
    SerpApiScholarResource,
    build_provider_resources,
)

S2_SNIPPETS_DOCUMENTED = {
    "data": [
        {
            "snippet": {
                "text": "The literature graph is a property graph with directed edges between papers, authors and entities.",
                "snippetKind": "body",
                "section": "Introduction",
                "snippetOffset": {"start": 1200, "end": 1302},
                "annotations": {"sentences": [{"start": 0, "end": 102}], "refMentions": []},
            },
            "score": 0.91,
            "paper": {
                "corpusId": 19170988,
                "title": "Construction of the Literature Graph in Semantic Scholar",
                "authors": ["Waleed Ammar", "Dirk Groeneveld"],
                "openAccessInfo": {
                    "license": "CCBY",
                    "status": "HYBRID",
                    "disclaimer": "https://doi.org/10.18653/v1/N18-3011",
                },
            },
        },
        {
            "snippet": {
                "text": "We describe a deployed scalable system for organizing published scientific literature.",
                "snippetKind": "abstract",
                "section": "",
                "snippetOffset": {"start": 0, "end": 86},
            },
            "score": 0.85,
            "paper": {
                "corpusId": 19170988,
                "title": "Construction of the Literature Graph in Semantic Scholar",
                "authors": [],
                "openAccessInfo": {},
            },
        },
        {
            "snippet": {
                "text": "S2ORC contains 81.1M English-language academic papers.",
                "snippetKind": "abstract",
                "section": "",
                "snippetOffset": {"start": 0, "end": 55},
            },
            "score": 0.6,
            "paper": {
                "corpusId": 215416146,
                "title": "S2ORC: The Semantic Scholar Open Research Corpus",
                "authors": [],
                "openAccessInfo": {},
            },
        },
    ],
    "retrievalVersion": "pa1-v1",
}

EXA_DOCUMENTED = {
    "requestId": "b5947044c4b78efa9552a7c89b306d95",
    "resolvedSearchType": "neural",
    "results": [
        {
            "id": "https://arxiv.org/abs/2004.07180",
            "url": "https://arxiv.org/abs/2004.07180",
            "title": "SPECTER: Document-level Representation Learning using Citation-informed Transformers",
            "score": 0.41,
            "publishedDate": "2020-04-15T00:00:00.000Z",
            "author": "Arman Cohan",
            "highlights": [
                "We propose SPECTER, a new method to generate document-level embedding of scientific documents.",
                "SPECTER outperforms a variety of competitive baselines on the benchmark.",
            ],
            "highlightScores": [0.52, 0.33],
        },
        {
            "id": "https://doi.org/10.18653/v1/2020.acl-main.447",
            "url": "https://doi.org/10.18653/v1/2020.acl-main.447",
            "title": "S2ORC: The Semantic Scholar Open Research Corpus",
            "score": 0.38,
            "highlights": [],
            "text": "We introduce S2ORC, a large corpus of 81.1M English-language academic papers.",
        },
    ],
    "costDollars": {"total": 0.006},
}


def load_cassette(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]


class Recorder:
    """MockTransport handler serving a body per path, recording every request it sees."""

    def __init__(self, bodies: dict[str, tuple[int, str]]):
        self.bodies = bodies
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        for suffix, (status, body) in self.bodies.items():
            if request.url.path.endswith(suffix):
                return httpx.Response(
                    status, content=body.encode("utf-8"), headers={"content-type": "application/json"}
                )
        return httpx.Response(404, json={"error": "not recorded"})


@pytest.fixture
def s2_search_body(shared_data) -> str:
    interactions = load_cassette(
        shared_data / "api_fixtures/semantic_scholar/semanticscholar-py/test_search_paper.yaml"
    )
    return interactions[0]["response"]["body"]["string"]


def test_s2_snippet_mapping_groups_snippets_by_paper():
    contexts = map_s2_snippets(S2_SNIPPETS_DOCUMENTED, k=10)
    assert [c.title for c in contexts] == [
        "Construction of the Literature Graph in Semantic Scholar",
        "S2ORC: The Semantic Scholar Open Research Corpus",
    ]
    assert len(contexts[0].chunks) == 2 and contexts[0].chunks[0].startswith("The literature graph")
    assert contexts[0].url == "https://www.semanticscholar.org/p/19170988"
    assert contexts[0].doi == "10.18653/v1/n18-3011"
    assert (
        map_s2_snippets(S2_SNIPPETS_DOCUMENTED, k=1)[0].chunks[1].startswith("We describe")
    )  # k counts papers


def test_s2_paper_search_recording_maps_titles(s2_search_body):
    payload = json.loads(s2_search_body)
    contexts = map_s2_papers(payload, k=5)
    assert len(contexts) == 5
    assert contexts[0].title == payload["data"][0]["title"]
    assert contexts[0].chunks == []  # recorded with fields=title only: no text, nothing invented
    assert contexts[0].url.endswith(payload["data"][0]["paperId"])


def test_s2_provider_snippets_first_then_paper_search_fallback(data_dir, s2_search_body):
    recorder = Recorder(
        {"/snippet/search": (200, json.dumps({"data": []})), "/paper/search": (200, s2_search_body)}
    )
    resource = SemanticScholarResource(
        api_key="s2-secret", base_url="https://s2.test/graph/v1", min_interval_s=0.0
    )
    provider = SemanticScholarProvider(resource.get_client(transport=httpx.MockTransport(recorder)))
    contexts = provider.search("turing", 3)
    assert len(contexts) == 3 and provider.fallbacks == 1
    snippet_request, paper_request = recorder.requests
    assert snippet_request.url.path == "/graph/v1/snippet/search"
    assert parse_qs(urlsplit(str(snippet_request.url)).query)["query"] == ["turing"]
    assert paper_request.headers["x-api-key"] == "s2-secret"
    assert "abstract" in parse_qs(urlsplit(str(paper_request.url)).query)["fields"][0]

    # second run: served from the disk cache, zero HTTP calls
    again = SemanticScholarProvider(resource.get_client(transport=httpx.MockTransport(recorder)))
    assert [c.title for c in again.search("turing", 3)] == [c.title for c in contexts]
    assert len(recorder.requests) == 2
    for path in (data_dir / "cache").rglob("*.json"):
        assert "s2-secret" not in path.read_text(encoding="utf-8")


def test_s2_provider_uses_snippets_when_present(data_dir):
    recorder = Recorder({"/snippet/search": (200, json.dumps(S2_SNIPPETS_DOCUMENTED))})
    resource = SemanticScholarResource(api_key="k", base_url="https://s2.test/graph/v1", min_interval_s=0.0)
    provider = SemanticScholarProvider(resource.get_client(transport=httpx.MockTransport(recorder)))
    assert len(provider.search("literature graph", 5)) == 2 and provider.fallbacks == 0


def test_s2_rate_limit_is_one_request_per_second(data_dir):
    waits: list[float] = []
    now = [100.0]
    recorder = Recorder({"/snippet/search": (200, json.dumps(S2_SNIPPETS_DOCUMENTED))})
    resource = SemanticScholarResource(api_key="k", base_url="https://s2-rate.test/graph/v1")
    client = resource.get_client(transport=httpx.MockTransport(recorder))
    client.http.sleep = waits.append
    client.http.clock = lambda: now[0]
    client.snippet_search("a", 5)
    client.snippet_search("b", 5)
    assert waits == [pytest.approx(1.0)]


def test_serpapi_google_scholar_recording(data_dir, shared_data):
    body = (
        shared_data / "api_fixtures/serpapi_google_scholar/google_scholar_q-bananas_num-2.json"
    ).read_text()
    contexts = map_serpapi_scholar(json.loads(body), k=10)
    assert [c.title for c in contexts] == [r["title"] for r in json.loads(body)["organic_results"]]
    assert contexts[0].chunks and contexts[0].chunks[0].startswith("… created by the European CMO")
    assert contexts[0].url.startswith("https://books.google.com/")

    recorder = Recorder({"/search.json": (200, body)})
    resource = SerpApiScholarResource(api_key="serp-secret", base_url="https://serp.test")
    provider = GoogleScholarProvider(resource.get_client(transport=httpx.MockTransport(recorder)))
    assert len(provider.search("bananas", 2)) == 2
    params = parse_qs(urlsplit(str(recorder.requests[0].url)).query)
    assert params["engine"] == ["google_scholar"] and params["q"] == ["bananas"] and params["num"] == ["2"]
    provider.search("bananas", 2)
    assert len(recorder.requests) == 1  # cached, although the key is a query parameter (kept out of the key)
    for path in (data_dir / "cache").rglob("*.json"):
        assert "serp-secret" not in path.read_text(encoding="utf-8")


def test_exa_documented_schema(data_dir):
    contexts = map_exa(EXA_DOCUMENTED, k=10)
    assert contexts[0].chunks == EXA_DOCUMENTED["results"][0]["highlights"]
    assert contexts[1].chunks == [
        EXA_DOCUMENTED["results"][1]["text"]
    ]  # no highlights: the text, not nothing
    assert contexts[1].doi == "10.18653/v1/2020.acl-main.447"

    recorder = Recorder({"/search": (200, json.dumps(EXA_DOCUMENTED))})
    resource = ExaResource(api_key="exa-secret", base_url="https://exa.test")
    provider = ExaProvider(resource.get_client(transport=httpx.MockTransport(recorder)))
    assert len(provider.search("document embeddings for science", 2)) == 2
    request = recorder.requests[0]
    body = json.loads(request.content)
    assert request.method == "POST" and request.headers["x-api-key"] == "exa-secret"
    assert body["numResults"] == 2 and body["contents"]["highlights"] == {
        "maxCharacters": EXA_HIGHLIGHT_CHARACTERS
    }
    provider.search("document embeddings for science", 2)
    assert len(recorder.requests) == 1


def test_providers_without_keys_are_skipped_with_a_reason(monkeypatch):
    for name in ("SEMANTIC_SCHOLAR_API_KEY", "SERPAPI_API_KEY", "EXA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    resources = build_provider_resources()
    assert not any(r.available() for r in resources.values())
    assert "SEMANTIC_SCHOLAR_API_KEY" in resources["semantic_scholar"].unavailable_reason()
    assert "EXA_API_KEY" in resources["exa"].unavailable_reason()


def test_doi_from_text():
    assert doi_from_text("https://doi.org/10.1038/NATURE12373.") == "10.1038/nature12373"
    assert doi_from_text("https://example.org/paper") is None


def test_lumina_provider_uses_injected_search():
    calls = []

    def search(query, k):
        calls.append((query, k))
        return [Context(title=f"t{i}", chunks=[f"c{i}"], paper_id=f"p{i}") for i in range(k + 3)]

    contexts = LuminaProvider(search).search("q", 4)
    assert calls == [("q", 4)] and len(contexts) == 4


def test_bm25_provider_groups_passages_per_paper():
    import polars as pl

    passages = pl.DataFrame(
        {
            "passage_id": ["a1", "a2", "b1", "c1"],
            "paper_id": ["A", "A", "B", "C"],
            "text": [
                "vitamin d supplementation reduces fractures",
                "fractures in elderly adults with vitamin d",
                "insulin resistance in obesity",
                "vitamin c and colds",
            ],
        }
    )
    papers = pl.DataFrame(
        {
            "paper_id": ["A", "B", "C"],
            "title": ["Paper A", "Paper B", "Paper C"],
            "doi": ["10.1/a", None, None],
        }
    )
    contexts = BM25Provider(passages, papers).search("vitamin d fractures", 2)
    assert contexts[0].paper_id == "A" and sorted(contexts[0].passage_ids) == ["a1", "a2"]
    assert contexts[0].title == "Paper A" and contexts[0].url == "https://doi.org/10.1/a"
    assert len(contexts) <= 2 and all(c.paper_id != "B" for c in contexts)
    with pytest.raises(ProviderUnavailable):
        BM25Provider(passages.head(0))
