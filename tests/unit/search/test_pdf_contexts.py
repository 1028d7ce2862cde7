"""Real questions about the seven shared PDFs, searched over an index of their parsed passages: the top 5 contexts
hold no junk (stubs under 10 words, bare figure/table pointers, acknowledgments, references) beyond 1 in 30, labels
read as printed, and the papers' in-corpus citations are there to widen along. The embedder is the hashing test
embedder (plumbing, not model quality): what can be returned is what the chunker let into the index."""

from __future__ import annotations

import re

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from section_questions import parse_pdfs

from lumina_assets.core import tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.corpus.citations import CataloguePaper, update_reference_edges
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import model_token_counter, passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService

QUESTIONS = [
    "how does SPECTER use citations for training",
    "how is the literature graph in Semantic Scholar constructed",
    "how was full text extracted from PDFs for the S2ORC corpus",
    "how does PaSa use reinforcement learning to search for papers",
    "which electrode was selected for hand opening with functional electrical stimulation",
    "what AI support do researchers need for expository writing like literature reviews",
    "what does papermage provide for processing scientific documents",
]
WORD = re.compile(r"[^\W\d_]{2,}")
BACK_MATTER = re.compile(
    r"acknowledg|funding|contributions?|competing interests|references|bibliography", re.I
)
POINTER = re.compile(
    r"^(?:see|cf\.?)?\s*(?:the\s+)?(?:fig(?:ure)?s?\.?|tab(?:le)?s?\.?|appendix|section)\s*\d", re.I
)
REFERENCE_ENTRY = re.compile(r"\.\s(?:19|20)\d\d[a-z]?\.\s[A-Z]")


def junk_reason(passage: dict) -> str | None:
    text = passage["text"]
    if len(WORD.findall(text)) < 10:
        return "stub"
    if passage["kind"] == "text" and POINTER.match(text) and len(WORD.findall(text)) < 15:
        return "bare pointer"
    if BACK_MATTER.search(passage.get("section_title") or ""):
        return "back matter"
    if len(REFERENCE_ENTRY.findall(text)) >= 2:
        return "reference list"
    return None


@pytest.fixture(scope="module")
def service(shared_data, tmp_path_factory):
    count = model_token_counter()
    papers, rows, catalogue, bibliographies = [], [], [], {}
    for paper, parsed in parse_pdfs(shared_data / "pdfs"):
        papers.append(
            {
                k: getattr(paper, k)
                for k in ("paper_id", "title", "abstract", "authors", "year", "venue", "doi")
            }
        )
        rows += [p.to_row() for p in passages_for_paper(paper.paper_id, parsed=parsed, count_tokens=count)]
        catalogue.append(CataloguePaper(paper.paper_id, paper.title, paper.doi, paper.arxiv_id, paper.year))
        bibliographies[paper.paper_id] = parsed.references
    uri = str(tmp_path_factory.mktemp("pdf-index") / "lancedb")
    embedder = HashingEmbedder()
    indexing.index_corpus(
        connect_lancedb(uri),
        pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)),
        pl.DataFrame(papers),
        embedder,
    )
    edges = update_reference_edges(catalogue, bibliographies).edges
    tables.write(  # the service reads its tables from the data dir it was built in (this module's)
        tables.CITATION_EDGES,
        pl.DataFrame({"citing": [e.citing for e in edges], "cited": [e.cited for e in edges]}),
    )
    return SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1), edges


def test_top_contexts_of_real_questions_hold_no_junk(service):
    search, _ = service
    contexts, junk = 0, []
    for question in QUESTIONS:
        for result in search.search(SearchRequest(question, k=5, overview=False))["results"]:
            contexts += 1
            reasons = [r for r in map(junk_reason, result["passages"]) if r]
            if reasons:
                junk.append((question, result["title"], reasons))
            for passage in result["passages"]:  # labels as printed, never internal ids
                assert not re.match(
                    r"^(s\d+|abstract|(figure|table|formula)-\d+)$", passage["section_number"] or ""
                )
    assert contexts >= 30
    assert len(junk) <= contexts // 30, junk


def test_citations_in_the_corpus_are_found_for_widening(service):
    search, edges = service
    assert len(edges) == 5
    wide = search.search(
        SearchRequest("construction of the literature graph in semantic scholar", k=3, widen=True)
    )
    linked = [v for r in wide["results"] + wide.get("related", []) for v in r.get("via", [])]
    assert any("cited by" in v or "cites" in v for v in linked), wide.get("related")
