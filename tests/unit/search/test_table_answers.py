"""A question that asks for a figure in a table is answered by the row of the table it names: a table row is
scored with its caption (its words and its cosine), so "Google Scholar recall@20 on AutoScholarQuery" lights
Table 5's Google Scholar row, not the same row of Table 6 (RealScholarQuery); the caption and header are the
rows' context and never the highlight; the extractive overview quotes the row whole after its table's label.
Searched with the bundled MiniLM over two of the shared PDFs (PaSa and the Semantic Scholar literature graph)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from section_questions import parse_pdfs

from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.parsing.chunking import model_token_counter, passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.evidence import table_caption, table_sentences
from lumina_assets.search.overview import Reference, extractive_overview, refusal_reason
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService

pytestmark = pytest.mark.slow
PDFS = ("pasa.pdf", "N18-3011.pdf")
QUESTIONS = [
    q
    for line in (Path(__file__).parents[2] / "support" / "table_questions.jsonl").read_text().splitlines()
    if line.strip()
    for q in [json.loads(line)]
    if q["paper"] in ("arxiv:2501.10120", "doi:10.18653/v1/n18-3011")
]


@pytest.fixture(scope="module")
def service(shared_data, tmp_path_factory) -> SearchService:
    folder = tmp_path_factory.mktemp("table_pdfs")
    for name in PDFS:
        (folder / name).symlink_to(shared_data / "pdfs" / name)
    count, papers, rows = model_token_counter(), [], []
    for paper, parsed in parse_pdfs(folder):
        papers.append({k: getattr(paper, k) for k in ("paper_id", "title", "abstract", "authors", "year")})
        rows += [p.to_row() for p in passages_for_paper(paper.paper_id, parsed=parsed, count_tokens=count)]
    uri = str(tmp_path_factory.mktemp("tables") / "lancedb")
    embedder = Embedder()
    indexing.index_corpus(
        connect_lancedb(uri),
        pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)),
        pl.DataFrame(papers),
        embedder,
    )
    engine = SearchEngine(uri, embedder, SearchConfig(), background_loading=False)
    return SearchService(lambda: engine, pool_size=1)


def _answer(service: SearchService, query: str) -> dict:
    return service.search(SearchRequest.from_mapping({"query": query, "k": 5, "overview": True}))


def _best(result: dict) -> tuple[dict, str]:
    """The result's best highlighted passage and sentence (the page draws that passage first)."""
    score, passage, mark = max(
        ((m["score"], p, m) for p in result["passages"] for m in p["highlights"]), key=lambda m: m[0]
    )
    return passage, passage["text"][mark["start"] : mark["end"]]


@pytest.mark.parametrize(
    ("query", "table", "value"),
    [
        ("Google Scholar recall@20 on AutoScholarQuery", "Table 5", "Recall@20: 0.0609"),
        ("Google Scholar recall@20 on RealScholarQuery", "Table 6", "Recall@20: 0.1514"),
    ],
)
def test_the_row_of_the_named_table_is_the_evidence_and_the_quote(service, query, table, value):
    answer = _answer(service, query)
    pasa = next(r for r in answer["results"] if r["paper_id"] == "arxiv:2501.10120")
    passage, sentence = _best(pasa)
    assert passage["text"].startswith(f"{table} ") and sentence.startswith("Method: Google Scholar;")
    assert value in sentence
    quote = answer["overview"]["sentences"][0]["text"]
    assert quote.startswith(f"{table} (Results on ") and "Method: Google Scholar;" in quote and value in quote


def test_a_caption_is_never_the_highlight_of_a_table_with_rows(service):
    shown = 0
    for question in QUESTIONS:
        for result in _answer(service, question["query"])["results"]:
            for passage in result["passages"]:
                spans, roles = table_sentences(passage["text"])
                for mark in passage["highlights"]:
                    role = roles[[s for s, _ in spans].index(mark["start"])]
                    assert role != "caption", (
                        question["query"],
                        passage["text"][mark["start"] : mark["end"]],
                    )
                    shown += role == "row"
    assert shown >= len(QUESTIONS)  # rows were highlighted, so the check above ran on tables


def test_table_sentences_join_a_row_cut_at_an_abbreviation_and_find_the_caption():
    text = (
        "Table 3 Results of the entity extraction model. Columns: Description | F1. "
        "Description: Without LM; F1: 49.9. Description: Avg. of 15 models with LM; F1: 55.2."
    )
    spans, roles = table_sentences(text)
    assert [text[s:e] for s, e in spans][-1] == "Description: Avg. of 15 models with LM; F1: 55.2."
    assert roles == ["caption", "caption", "row", "row"]
    assert table_caption(text) == "Table 3 Results of the entity extraction model."
    assert table_sentences("We report Table 3. It has rows.")[1] == ["", ""]


def test_the_overview_quotes_a_row_whole_after_its_table_label():
    text = (
        "Table 9 Performance of the Crawler on AutoScholarQuery. Columns: α | Crawler Recall. "
        "α: 1.5; Crawler Recall: 0.7931. α: 2.0; Crawler Recall: 0.8063."
    )
    row = "α: 2.0; Crawler Recall: 0.8063."
    reference = Reference(1, "p#table-9:0", "p", "PaSa", text, row, 1.0, 0.5)
    caption = Reference(
        2,
        "q#table-1:0",
        "q",
        "Other",
        "Table 1 Results. Columns: A | B. A: x; B: 1.",
        "Table 1 Results.",
        1.0,
        0.5,
    )
    overview = extractive_overview([reference, caption])
    assert (
        overview.text
        == "Table 9 (Performance of the Crawler on AutoScholarQuery): α: 2.0; Crawler Recall: 0.8063. [1]"
    )
    assert overview.refused[0]["reason"] == "a figure or table caption"
    assert refusal_reason("Table 2 shows that recall rises with depth.") is None  # a finding about a table
