"""Widening a search along in-corpus citations: the papers the top results cite or are cited by join the candidate
set, are scored by the same pipeline and re-ranked with a citation bonus (not only listed beside the results)."""

from __future__ import annotations

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.core import tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import WIDEN_BONUS, SearchService

PAPERS = {
    "top": "Citation graph embeddings trained with a triplet loss over citations of scientific papers.",
    "near1": "Citation graph embeddings of scientific papers from citations.",
    "near2": "Citation graph embeddings of scientific documents.",
    "near3": "Embeddings of the citation graph.",
    "linked": "Scientific paper embeddings with a loss.",  # weaker match, cited by "top"
    "unrelated": "Protein folding predicted with attention over residue contacts.",  # also cited by "top"
}
FILLER = [f"Graph embeddings of scientific documents number {i}." for i in range(8)]


@pytest.fixture()
def service(tmp_path, data_dir):
    texts = {**PAPERS, **{f"filler{i}": t for i, t in enumerate(FILLER)}}
    papers = [
        {"paper_id": p, "title": p.title(), "abstract": t, "year": 2020, "source": "test"}
        for p, t in texts.items()
    ]
    rows = [r.to_row() for p, t in texts.items() for r in passages_for_paper(p, title=p.title(), abstract=t)]
    frame = pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA))
    uri = str(tmp_path / "lancedb")
    embedder = HashingEmbedder()
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder)
    tables.write(
        tables.CITATION_EDGES,
        pl.DataFrame({"citing": ["top", "top"], "cited": ["linked", "unrelated"]}),
    )
    return SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1)


QUERY = "citation graph embeddings triplet loss"


def test_widening_reranks_linked_papers_with_the_same_pipeline(service):
    plain = service.search(SearchRequest(QUERY, k=3, overview=False))
    deep = [r["paper_id"] for r in service.search(SearchRequest(QUERY, k=14, overview=False))["results"]]
    assert [r["paper_id"] for r in plain["results"]][0] == "top" and deep.index("linked") >= 4
    assert plain["related"] == [] and all(r["via"] == [] for r in plain["results"])

    wide = service.search(SearchRequest(QUERY, k=3, overview=False, widen=True))
    results = {r["paper_id"]: r for r in wide["results"]}
    ranks = [r["paper_id"] for r in wide["results"]]
    # the paper "top" cites entered the candidates, was scored by the retrievers and moved onto the first page
    assert "linked" in results and ranks.index("linked") < 3
    linked = results["linked"]
    assert linked["via"] == ["cited by \u201cTop\u201d"]
    assert linked["explanation"]["found_by"], "scored by the retrievers, not only listed"
    bonus = linked["explanation"]["citation_bonus"]
    assert bonus == pytest.approx(WIDEN_BONUS * results["top"]["score"], rel=1e-4)
    assert linked["score"] - bonus > 0  # its own pipeline score, plus the bonus
    assert [r["score"] for r in wide["results"]] == sorted(
        (r["score"] for r in wide["results"]), reverse=True
    )
    # the other paper "top" cites gets the same bonus but does not match the query: it stays below
    assert "unrelated" not in ranks[: ranks.index("linked") + 1]
    assert "unrelated" in ranks or [r["paper_id"] for r in wide["related"]] == ["unrelated"]
    assert results["top"]["explanation"]["citation_bonus"] is None  # nothing in the corpus cites "top"
