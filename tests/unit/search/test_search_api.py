"""The search API (`lumina serve`): response schema, filters that exclude, bad input, neighbours, citations, PDFs by
hash, pagination; on a small index built with the deterministic hashing embedder (plumbing, not model quality)."""

from __future__ import annotations

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from starlette.testclient import TestClient
from tools import missing_tool

from bench.serve_load import serve_in_thread
from lumina_assets.core import tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.api import create_app
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService

TOPICS = [
    (
        "Citation-informed transformers for scientific documents",
        "We train document embeddings with a triplet loss over the citation graph. Citations provide the training "
        "signal: a cited paper is a positive and an uncited one a negative. The model needs no citations at inference.",
    ),
    (
        "Venue prediction from abstracts",
        "We predict the publication venue of a paper from its abstract. Venues cluster by topic. Accuracy is modest.",
    ),
    (
        "Protein folding with attention",
        "Attention layers predict residue contacts. Folding accuracy improves with deeper models. Citations are rare.",
    ),
    (
        "Graph neural networks for citation recommendation",
        "A graph neural network over the citation graph recommends references. Training uses observed citations as "
        "positives. Recall at ten doubles.",
    ),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    embedder = HashingEmbedder()
    papers, passages = [], []
    for i in range(24):
        title, abstract = TOPICS[i % len(TOPICS)]
        paper_id = f"doi:10.1/p{i}"
        papers.append(
            {
                "paper_id": paper_id,
                "title": f"{title} ({i})",
                "abstract": abstract,
                "doi": f"10.1/p{i}",
                "year": 2010 + i % 12,
                "authors": ["Arman Cohan", "Ada Lovelace"] if i % 3 == 0 else ["Someone Else"],
                "venue": "ACL" if i % 2 == 0 else "Nature Medicine",
                "source": "test",
            }
        )
        # the citation-transformer papers are split into short passages, so their hits have neighbours to expand
        split = {"max_tokens": 16} if i % len(TOPICS) == 0 else {}
        passages += [
            p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract, **split)
        ]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA)).with_columns(
        pl.lit(3, dtype=pl.Int32).alias("page_start"), pl.lit(4, dtype=pl.Int32).alias("page_end")
    )
    uri = str(root / "lancedb")
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder)
    return root, uri, frame


@pytest.fixture()
def client(index_dir, data_dir):
    root, uri, frame = index_dir
    tables.write(tables.PASSAGES, frame, partition="batch1")
    tables.write(
        tables.CITATION_EDGES,
        pl.DataFrame({"citing": ["doi:10.1/p0", "doi:10.1/p4"], "cited": ["doi:10.1/p3", "doi:10.1/p0"]}),
    )
    embedder = HashingEmbedder()
    service = SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=2)
    return TestClient(create_app(service), base_url="http://127.0.0.1:8765"), service


def _search(http, **body):
    response = http.post("/api/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_schema_metadata_passages_highlights_and_explanations(client):
    http, _ = client
    data = _search(http, query="citation graph training signal", k=5)
    assert {
        "query",
        "k",
        "page",
        "has_more",
        "constraints",
        "filters",
        "results",
        "overview",
        "timings_ms",
    } <= set(data)
    assert 1 <= len(data["results"]) <= 5
    first = data["results"][0]
    assert {
        "rank",
        "paper_id",
        "title",
        "authors",
        "year",
        "venue",
        "doi",
        "url",
        "pdf",
        "score",
        "explanation",
        "passages",
    } <= set(first)
    assert first["rank"] == 1 and first["venue"] in ("ACL", "Nature Medicine") and first["year"]
    assert first["explanation"]["found_by"], "which retrievers found the paper"
    passage = first["passages"][0]
    assert {
        "passage_id",
        "kind",
        "section_number",
        "section_title",
        "page_start",
        "page_end",
        "text",
        "highlights",
    } <= set(passage)
    assert (passage["page_start"], passage["page_end"]) == (3, 4)  # from the passages table
    marked = [h for p in first["passages"] for h in p["highlights"]]
    assert marked
    for p in first["passages"]:
        for h in p["highlights"]:
            assert 0 <= h["start"] < h["end"] <= len(p["text"])
    best = max(marked, key=lambda h: h["score"])
    text = next(p["text"] for p in first["passages"] if best in p["highlights"])
    assert "citation" in text[best["start"] : best["end"]].lower()
    # overview: extractive (no LLM), labelled, every sentence cites a returned passage
    overview = data["overview"]
    assert overview["method"] == "extractive" and "xtractive" in overview["label"]
    numbers = {p["number"] for r in data["results"] for p in r["passages"]}
    assert overview["sentences"] and all(set(s["citations"]) <= numbers for s in overview["sentences"])


def test_filters_exclude(client):
    http, _ = client
    years = _search(http, query="citation graph", k=20, year_min=2015, year_max=2017)
    assert years["results"] and all(2015 <= r["year"] <= 2017 for r in years["results"])
    assert {c["mode"] for c in years["constraints"]} == {"filter"}
    author = _search(http, query="citation graph", k=20, author="Cohan")
    assert author["results"] and all("Arman Cohan" in r["authors"] for r in author["results"])
    venue = _search(http, query="citation graph", k=20, venue="nature")
    assert venue["results"] and all(r["venue"] == "Nature Medicine" for r in venue["results"])
    typed = _search(http, query="citation graph venue:ACL year>=2018", k=20)
    assert typed["results"] and all(r["venue"] == "ACL" and r["year"] >= 2018 for r in typed["results"])
    nobody = _search(http, query="citation graph", author="Nobody")
    assert nobody["results"] == [] and "Nobody" in nobody["message"]
    # a natural-language cue only boosts, and says how to make it a filter
    cue = _search(http, query="citation graph papers after 2019", k=20)
    year = next(c for c in cue["constraints"] if c["kind"] == "year")
    assert year["mode"] == "boost" and year["as_filter"] == "year>=2020"
    assert any(r["year"] < 2020 for r in cue["results"])


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        ({"query": ""}, 422, "empty"),
        ({"query": "   "}, 422, "empty"),
        ({"query": "x" * 100_000}, 413, "too large"),
        ({"query": "x" * 1500}, 413, "too long"),
        ({"query": "cells\x00 and\x1b[31m"}, 422, "control characters"),
        ({"query": "citation", "k": 0}, 422, "k must be between"),
        ({"query": "citation", "k": 1000}, 422, "k must be between"),
        ({"query": "citation", "k": "ten"}, 422, "k must be an integer"),
        ({"query": "citation", "page": 99}, 422, "page must be between"),
        ({"query": "citation", "k": 50, "page": 5}, 422, "k × page"),
        ({"query": "citation", "year_min": 2020, "year_max": 2010}, 422, "year_min"),
        ({"query": "citation", "author": "a\x07b"}, 422, "control"),
        ({"query": "citation", "colour": "red"}, 422, "unknown field"),
        ({"k": 3}, 422, "query is required"),
    ],
)
def test_bad_input_is_a_4xx_with_a_message(client, body, status, fragment):
    http, _ = client
    response = http.post("/api/search", json=body)
    assert response.status_code == status, response.text
    assert fragment in response.json()["error"]


def test_bad_json_and_get_form(client):
    http, _ = client
    response = http.post("/api/search", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "JSON" in response.json()["error"]
    assert http.get("/api/search", params={"q": "citation graph", "k": "2"}).json()["k"] == 2
    assert http.get("/api/search", params={"q": "citation", "k": "-1"}).status_code == 422


def test_pagination_neighbours_citations_and_page(client):
    http, _ = client
    first = _search(http, query="citation graph", k=3, page=1, overview=False)
    second = _search(http, query="citation graph", k=3, page=2, overview=False)
    assert first["has_more"] and second["page"] == 2 and second["results"][0]["rank"] == 4
    assert not {r["paper_id"] for r in first["results"]} & {r["paper_id"] for r in second["results"]}
    assert first["overview"] is None
    passage = first["results"][0]["passages"][0]
    around = http.get("/api/passages/" + passage["passage_id"].replace("#", "%23")).json()
    assert around["passage"]["passage_id"] == passage["passage_id"]
    assert http.get("/api/passages/nope%23x:0").status_code == 404
    links = http.get("/api/papers/doi:10.1/p0/citations").json()
    assert [c["paper_id"] for c in links["cites"]] == ["doi:10.1/p3"]
    assert [c["paper_id"] for c in links["cited_by"]] == ["doi:10.1/p4"]
    widened = _search(http, query="citation graph training signal", k=2, widen=True, overview=False)
    returned = {r["paper_id"] for r in widened["results"]}
    assert all(r["paper_id"] not in returned and r["via"] for r in widened["related"])
    if "doi:10.1/p0" in returned:
        assert {"doi:10.1/p3", "doi:10.1/p4"} & {r["paper_id"] for r in widened["related"]}
    page = http.get("/")
    assert page.status_code == 200 and 'id="q"' in page.text and "/api/search" in page.text


def test_pdfs_only_by_content_hash(client, shared_data):
    from lumina_assets.parsing.pdf_store import PdfStore

    http, _ = client
    stored = PdfStore().put_file(shared_data / "pdfs" / "pasa.pdf")
    response = http.get(f"/pdf/{stored.sha256}")
    assert response.status_code == 200 and response.content[:5] == b"%PDF-"
    assert http.get("/pdf/" + "0" * 64).status_code == 404
    assert http.get("/pdf/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert http.get("/pdf/pasa.pdf").status_code == 404


def test_benchmark_provider_through_the_api(client):
    from evals.providers import LuminaProvider, lumina_api_search_fn

    http, service = client
    provider = LuminaProvider(lumina_api_search_fn("http://127.0.0.1:8765", http_client=http))
    contexts = provider.search("citation graph training signal", 4)
    with service.pool.engine() as engine:
        direct = engine.search("citation graph training signal", 4)
    assert [c.paper_id for c in contexts] == [c.paper_id for c in direct]
    assert [c.chunks for c in contexts] == [c.chunks for c in direct]
    assert [c.passage_ids for c in contexts] == [c.passage_ids for c in direct]


PAGE_SCRIPT = r"""
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const job = JSON.parse(process.argv[2]);
(async () => {
  const out = {};
  const browser = await chromium.launch({ executablePath: job.chromium, args: job.flags, headless: true });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
    await page.goto(job.url);
    await page.fill("#q", "citation graph training signal");
    await page.click("#go");
    await page.waitForSelector(".result mark", { timeout: 60000 });
    out.results = await page.locator(".result").count();
    out.marks = await page.locator(".result mark").count();
    out.overview = await page.locator("#overview").innerText();
    await page.locator(".expand").first().click();
    await page.waitForSelector(".passage.context", { timeout: 30000 }).catch(() => null);
    out.context_shown = await page.locator(".expand").first().innerText();
    out.contexts = await page.locator(".passage.context").count();
    await page.screenshot({ path: job.screenshot, fullPage: true });
    await page.fill("#venue", "Nature");
    await page.dispatchEvent("#venue", "change");
    await page.waitForFunction(() => [...document.querySelectorAll(".result .meta")].length > 0 &&
      [...document.querySelectorAll(".result .meta:first-of-type")].every((m) => m.innerText.includes("Nature Medicine")), null, { timeout: 60000 });
    out.venues = await page.locator(".result .meta").first().innerText();
    out.filtered = await page.locator(".result").count();
  } catch (e) { out.error = String(e); }
  await browser.close();
  console.log(JSON.stringify(out));
})();
"""


@pytest.mark.slow
def test_search_page_in_headless_chromium(client, tmp_path):
    """Search, highlighted evidence, overview, expand neighbours, a venue filter that excludes, in a real browser
    (Debian chromium driven by npm playwright-core, as devtools/ui_check.py does); skipped where either is missing."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "devtools"))
    import ui_check

    missing = ui_check.missing_browser_tools()
    if missing:
        missing_tool("the search page check needs " + ", ".join(missing))
    _, service = client
    server, thread, port = serve_in_thread(create_app(service))
    try:
        job = {
            "url": f"http://127.0.0.1:{port}/",
            "chromium": ui_check.find_chromium(),
            "flags": ui_check.CHROMIUM_FLAGS,
            "screenshot": str(tmp_path / "search_page.png"),
        }
        script = tmp_path / "page.js"
        script.write_text(PAGE_SCRIPT)
        done = subprocess.run(
            ["node", str(script), json.dumps(job)],
            capture_output=True,
            text=True,
            timeout=240,
            env={**__import__("os").environ, "PLAYWRIGHT_CORE": str(ui_check.find_playwright_core())},
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in out, out
    assert out["results"] >= 1 and out["marks"] >= 1
    assert "[1]" in out["overview"] and "xtractive" in out["overview"]
    assert (
        out["context_shown"] == "context shown" and out["contexts"] >= 1
    )  # a neighbour drawn around the hit
    assert "Nature Medicine" in out["venues"]
    assert (tmp_path / "search_page.png").stat().st_size > 10_000


def test_a_request_encodes_its_query_once(index_dir, data_dir):
    """The evidence scorer reuses the vector the engine encoded the query with (same model, same text)."""
    _, uri, _ = index_dir

    class CountingQueries(HashingEmbedder):
        def __init__(self):
            super().__init__()
            self.queries: list[str] = []

        def encode_queries(self, texts):
            self.queries += list(texts)
            return super().encode_queries(texts)

    embedder = CountingQueries()
    service = SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1)
    embedder.queries.clear()
    answer = service.search(SearchRequest.from_mapping({"query": "citation graph training signal", "k": 3}))
    assert answer["results"] and any(p["highlights"] for r in answer["results"] for p in r["passages"])
    assert embedder.queries == ["citation graph training signal"]
