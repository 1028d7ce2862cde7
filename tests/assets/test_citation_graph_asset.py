"""The citation_graph asset turns the parsed bibliographies in parsed_papers into citation_edges (besides OpenAlex
reference ids), and a paper that joins the catalogue later gets the edges of the papers that already cite it."""

from __future__ import annotations

import dagster as dg
import polars as pl

from lumina_assets.core import tables
from lumina_assets.core.schemas import (
    PAPERS_TABLE_SCHEMA,
    PARSED_PAPERS_SCHEMA,
    ParsedPaper,
    Reference,
    rows_to_table,
)
from lumina_assets.defs.citations import citation_graph

LITGRAPH = "Construction of the Literature Graph in Semantic Scholar"
SPECTER = "SPECTER: Document-level Representation Learning using Citation-informed Transformers"
# as printed in SPECTER's and Beyond Summarization's reference lists
CITES_LITGRAPH = Reference(
    "b1",
    "Waleed Ammar, ..., and Oren Etzioni. 2018. Construction of the literature graph in semantic scholar. In "
    "NAACL-HLT.",
    title="Construction of the literature graph in semantic scholar",
    year=2018,
    authors=["Waleed Ammar"],
)
CITES_SPECTER = Reference(
    "b7",
    "Arman Cohan, ... 2020. SPECTER: Document-level Representation Learning using Citation-informed Transformers.",
    title="SPECTER: Document-level Representation Learning using Citation-informed Transformers",
    year=2020,
    authors=["Arman Cohan"],
)


def _write(papers: list[tuple[str, str, int]], bibliographies: dict[str, list[Reference]]) -> None:
    rows = [{"paper_id": pid, "title": title, "year": year, "authors": []} for pid, title, year in papers]
    tables.write(tables.PAPERS, rows_to_table(rows, PAPERS_TABLE_SCHEMA))
    parsed = [
        {
            "paper_id": pid,
            "status": "ok",
            "parsed_json": ParsedPaper(paper_id=pid, parser="pymupdf", references=refs).to_json(),
        }
        for pid, refs in bibliographies.items()
    ]
    tables.write(tables.PARSED_PAPERS, rows_to_table(parsed, PARSED_PAPERS_SCHEMA), "batch-1")


def _edges() -> set[tuple[str, str]]:
    frame = tables.read(tables.CITATION_EDGES)
    return {(row["citing"], row["cited"]) for row in frame.iter_rows(named=True)}


def test_parsed_references_become_edges_and_a_late_paper_gets_its_citers(data_dir):
    _write(
        [("specter", SPECTER, 2020), ("beyond", "Beyond Summarization", 2023)],
        {
            "specter": [CITES_LITGRAPH],
            "beyond": [CITES_SPECTER, CITES_LITGRAPH],
        },
    )
    result = citation_graph(dg.build_asset_context())
    assert _edges() == {("beyond", "specter")}
    assert result.metadata["edges_by_match"].value == {"title": 1}

    _write(
        [("specter", SPECTER, 2020), ("beyond", "Beyond Summarization", 2023), ("litgraph", LITGRAPH, 2018)],
        {"specter": [CITES_LITGRAPH], "beyond": [CITES_SPECTER, CITES_LITGRAPH]},
    )
    result = citation_graph(dg.build_asset_context())
    assert _edges() == {("beyond", "specter"), ("specter", "litgraph"), ("beyond", "litgraph")}
    assert result.metadata["bibliographies_matched_to_new_papers_only"] == 2
    degrees = tables.read(tables.CITATION_GRAPH)
    assert degrees.filter(pl.col("paper_id") == "litgraph")["in_degree"].item() == 2
