"""Citation stage: `citation_graph`, in-corpus citation edges from OpenAlex references and parsed bibliographies;
it runs with the index, after parsing."""

import dataclasses
import json
from collections import Counter

import dagster as dg
import polars as pl

from lumina_assets.core import settings, tables
from lumina_assets.corpus.citations import (
    CitationMatch,
    catalogue_papers,
    references_from_json,
    update_reference_edges,
)


def _reference_edges(frame: pl.DataFrame) -> tuple[list[dict], dict]:
    """Edges from the parsed bibliographies, updated incrementally from the last run's."""
    parsed = tables.read_all(tables.PARSED_PAPERS)
    bibliographies = {}
    if parsed is not None and parsed.height:
        for row in (
            parsed.filter(pl.col("status") == "ok").select("paper_id", "parsed_json").iter_rows(named=True)
        ):
            bibliographies[row["paper_id"]] = references_from_json(row["parsed_json"])
    state_path = settings.tables_dir() / "citation_edges.state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    previous_frame = tables.read(tables.CITATION_EDGES)
    previous = []
    if previous_frame is not None and "ref_id" in previous_frame.columns and state:
        previous = [
            CitationMatch(r["citing"], r["cited"], r["ref_id"], r["how"], r["score"] or 0.0)
            for r in previous_frame.filter(pl.col("how") != "openalex").iter_rows(named=True)
        ]
    update = update_reference_edges(
        catalogue_papers(frame.iter_rows(named=True)), bibliographies, previous, state
    )
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps(update.state))
    counts = {
        "bibliographies": len(bibliographies),
        "rematched": update.rematched,
        "extended": update.extended,
    }
    return [dataclasses.asdict(edge) for edge in update.edges], counts


@dg.asset(
    group_name="index",  # with passage_index: what search reads, after parsing (the index_passages job)
    code_version="2",
    deps=[dg.AssetDep("papers"), dg.AssetDep("parsed_papers")],
    automation_condition=dg.AutomationCondition.eager(),
)
def citation_graph(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Citation edges among corpus papers with in/out degree: references resolved through OpenAlex ids, and the
    parsed bibliographies of the PDFs matched to catalogue papers by DOI, arXiv id or title (corpus.citations).
    In the index group: it follows both the catalogue and the parsed papers, like the passage index."""
    frame = tables.read(tables.PAPERS)
    if frame is None:
        raise dg.Failure("papers has not been materialized yet")
    by_openalex = {
        f"openalex:{row['openalex_id']}": row["paper_id"]
        for row in frame.select("paper_id", "openalex_id").iter_rows(named=True)
        if row["openalex_id"]
    }
    ids = set(frame["paper_id"].to_list())
    edges = []
    for row in frame.select("paper_id", "references").iter_rows(named=True):
        for ref in row["references"] or []:
            target = by_openalex.get(ref, ref if ref in ids else None)
            if target and target != row["paper_id"]:
                edges.append({"citing": row["paper_id"], "cited": target, "how": "openalex", "score": 100.0})
    parsed_edges, counts = _reference_edges(frame)
    edges += parsed_edges
    schema = {
        "citing": pl.String,
        "cited": pl.String,
        "ref_id": pl.String,
        "how": pl.String,
        "score": pl.Float64,
    }
    edge_frame = pl.DataFrame(edges, schema=schema).unique(subset=["citing", "cited"], keep="first")
    tables.write(tables.CITATION_EDGES, edge_frame)
    degrees = (
        frame.select("paper_id", "title")
        .join(
            edge_frame.group_by("citing").len("out_degree"), left_on="paper_id", right_on="citing", how="left"
        )
        .join(edge_frame.group_by("cited").len("in_degree"), left_on="paper_id", right_on="cited", how="left")
        .with_columns(pl.col("out_degree").fill_null(0), pl.col("in_degree").fill_null(0))
        .sort("in_degree", descending=True)
    )
    tables.write(tables.CITATION_GRAPH, degrees)
    return dg.MaterializeResult(
        metadata={
            "papers": degrees.height,
            "edges": edge_frame.height,
            "edges_by_match": dg.MetadataValue.json(dict(Counter(edge_frame["how"].to_list()))),
            "bibliographies": counts["bibliographies"],
            "bibliographies_rematched": counts["rematched"],
            "bibliographies_matched_to_new_papers_only": counts["extended"],
            "papers_with_citations": int((degrees["in_degree"] > 0).sum()),
            "most_cited": dg.MetadataValue.md(
                tables.markdown_sample(degrees, ["paper_id", "title", "in_degree", "out_degree"])
            ),
        },
        data_version=dg.DataVersion(tables.content_hash(edge_frame, ["citing", "cited"])),
    )


ASSETS: list = [citation_graph]
CHECKS: list = []


def build_resources() -> dict:
    return {}
