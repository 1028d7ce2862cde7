"""The relevance line on the seven shared PDFs, searched with the bundled MiniLM (the model the line was fitted
for): results above it match, the rest are "less related" (under a divider, out of exports and alerts); a software
manual dropped into the library raises no alert on a saved search for "paper search agent"; "Cohan et al. 2020"
prefers the paper Cohan wrote first in 2020."""

from __future__ import annotations

import pydoc
import re
import shutil
from datetime import UTC, datetime, timedelta

import dagster as dg
import polars as pl
import pymupdf
import pytest
from starlette.testclient import TestClient

from lumina_assets.core import settings, tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.corpus.local import pdf_metadata
from lumina_assets.defs.alerts import alert_hits
from lumina_assets.defs.indexing import passage_index
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.parsing.chunking import model_token_counter, passages_for_paper
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser
from lumina_assets.search import relevance, saved_searches
from lumina_assets.search.api import create_app
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

SPECTER, PASA, FES = "doi:10.18653/v1/2020.acl-main.207", "arxiv:2501.10120", "doi:10.1186/s12984-016-0129-6"
NO_SENTENCES = indexing.IndexConfig(sentence_vectors=False)  # evidence is encoded per request: a faster build


def _paper_rows(pdfs, batch: str, first_seen: str):
    parser, count = PyMuPdfParser(), model_token_counter()
    papers, rows = [], []
    for pdf in pdfs:
        paper = pdf_metadata(pdf)
        parsed = parser.parse(pdf, paper.paper_id)
        fields = ("paper_id", "title", "abstract", "authors", "year", "venue", "doi")
        papers.append(
            {**{k: getattr(paper, k) for k in fields}, "first_seen": first_seen, "ingest_batch": batch}
        )
        rows += [p.to_row() for p in passages_for_paper(paper.paper_id, parsed=parsed, count_tokens=count)]
    return pl.DataFrame(papers), pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA))


def _manual_pdf(path) -> None:
    """A software manual as a PDF: Python's own reference for its regular expression module, 60 lines a page
    (real text about software; it says "search" often, as the manual in the report said "search" and "agent")."""
    lines = pydoc.render_doc(re, renderer=pydoc.plaintext).splitlines()[:180]
    document = pymupdf.open()
    for start in range(0, len(lines), 60):
        page = document.new_page()
        page.insert_text((50, 60), "\n".join(line[:100] for line in lines[start : start + 60]), fontsize=9)
    document.set_metadata({"title": "re - Support for regular expressions"})
    document.save(path)


@pytest.fixture(scope="module")
def library(shared_data, tmp_path_factory):
    """The shared PDFs indexed with the bundled model: (LanceDB folder, the papers table, the passages table)."""
    earlier = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    papers, passages = _paper_rows(sorted((shared_data / "pdfs").glob("*.pdf")), "batch-1", earlier)
    uri = tmp_path_factory.mktemp("relevance") / "lancedb"
    indexing.index_corpus(connect_lancedb(str(uri)), passages, papers, Embedder(), NO_SENTENCES)
    return uri, papers, passages


@pytest.fixture(scope="module")
def service(library):
    embedder = Embedder()
    return SearchService(lambda: SearchEngine(str(library[0]), embedder, SearchConfig()), pool_size=1)


def _search(service, query: str, **fields) -> dict:
    return service.search(SearchRequest.from_mapping({"query": query, "k": 10, "overview": False, **fields}))


def test_the_line_keeps_the_answer_and_drops_the_unrelated_paper(service):
    answer = _search(service, "paper search agent")
    assert answer["relevance_line"] == relevance.RELEVANCE_LINE
    by_id = {r["paper_id"]: r for r in answer["results"]}
    assert answer["results"][0]["paper_id"] == PASA and by_id[PASA]["matching"]
    # hand electrical stimulation has nothing to do with paper search: returned, but under the line
    assert not by_id[FES]["matching"] and by_id[FES]["relevance"] < relevance.RELEVANCE_LINE
    matching = [r for r in answer["results"] if r["matching"]]
    assert answer["matching"] == len(matching) < len(answer["results"])
    # the matching results come first, each part in rank order
    assert answer["results"][: len(matching)] == matching


def test_exports_take_only_the_matching_results_unless_all_are_asked(service):
    http = TestClient(create_app(service), base_url="http://127.0.0.1:8765")
    default = http.get("/api/export", params={"q": "paper search agent", "format": "csv"})
    everything = http.get("/api/export", params={"q": "paper search agent", "format": "csv", "all": "true"})
    assert default.status_code == everything.status_code == 200
    assert int(default.headers["X-Result-Count"]) < int(everything.headers["X-Result-Count"])
    assert "Multi-contact functional electrical stimulation" not in default.text
    assert "Multi-contact functional electrical stimulation" in everything.text
    assert http.get("/api/export", params={"q": "x", "all": "maybe"}).status_code == 422


def test_cohan_et_al_2020_prefers_the_first_author_paper_of_2020(service):
    answer = _search(service, "Cohan et al. 2020")
    assert answer["results"][0]["paper_id"] == SPECTER
    boosts = {r["paper_id"]: r["explanation"]["boosts"] for r in answer["results"]}
    assert "author Cohan ×2" in boosts[SPECTER]
    # a paper matched by its first author counts as matching, though a name has no meaning to compare
    assert answer["results"][0]["matching"]


def test_a_manual_dropped_into_the_library_raises_no_alert(library, tmp_path):
    """The saved search "paper search agent" is evaluated, then a software manual joins the index: before the
    line, every indexed paper was in the top 10, so the manual was a "new result"; now it is below the line."""
    uri, papers, passages = library
    shutil.copytree(uri, settings.lancedb_uri())
    tables.write(tables.PAPERS, papers)
    resources = {"lancedb": LanceDBResource(), "embedder": EmbedderResource()}
    instance = dg.DagsterInstance.ephemeral()
    saved_searches.add(saved_searches.validate("agents", "paper search agent", {}, 10))

    def run_alerts() -> int:
        result = dg.materialize(
            [passage_index, alert_hits], selection=[alert_hits], resources=resources, instance=instance
        )
        assert result.success
        return result.asset_materializations_for_node("alert_hits")[0].metadata["new_hits"].value

    assert run_alerts() == 0  # what the search showed when it was saved is no alert
    manual = tmp_path / "re-manual.pdf"
    _manual_pdf(manual)
    later = (datetime.now(UTC) + timedelta(seconds=2)).isoformat(timespec="seconds")
    new_papers, new_passages = _paper_rows([manual], "batch-2", later)
    tables.write(tables.PAPERS, pl.concat([papers, new_papers], how="diagonal_relaxed"))
    indexing.index_corpus(
        connect_lancedb(settings.lancedb_uri()),
        pl.concat([passages, new_passages], how="diagonal_relaxed"),
        pl.concat([papers, new_papers], how="diagonal_relaxed"),
        Embedder(),
        NO_SENTENCES,
    )
    manual_id = new_papers["paper_id"][0]
    engine = SearchEngine(settings.lancedb_uri(), Embedder(), SearchConfig(), refresh_seconds=0)
    plain = [c.paper_id for c in engine.search("paper search agent", k=10)]
    assert manual_id in plain  # without the line the manual is a top-10 result: the old alert fired on it

    assert run_alerts() == 0
    assert saved_searches.hits_for(saved_searches.get("agents")) == []
