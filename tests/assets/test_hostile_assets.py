"""Hostile inputs through the assets: records refused at intake reach rejected_papers with their reason while
the good records are ingested, and a failed step at the CLI names its cause, not Dagster's wrapper."""

from __future__ import annotations

import dagster as dg
import polars as pl
from dagster import DagsterInstance

from lumina_assets.cli.runner import materialize_step
from lumina_assets.core import tables
from lumina_assets.defs import corpus
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from resources.parsing import ParsingConfig


def test_unusable_records_are_rejected_with_their_reason_and_the_rest_ingested(data_dir, tmp_path):
    folder = tmp_path / "hostile-beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes(
        b"\n".join(
            [
                b'{"_id": "good", "title": "Graph neural networks for citation recommendation", '
                b'"text": "We recommend citations with graph neural networks over the citation graph."}',
                b'{"_id": "latin", "title": "Caf\xe9 effects on reading speed of scientific abstracts", '
                b'"text": "Coffee and reading speed: a controlled study of researchers reading abstracts."}',
                b'{"_id": null, "title": "null id", "text": "should be rejected"}',
                b'{"_id": "t", "title": ["a", "b"], "text": "list title"}',
                b'{"_id": "n", "title": "nan text", "text": NaN}',
                b"{not json",
            ]
        )
        + b"\n"
    )
    result = dg.materialize(
        corpus.ASSETS,
        resources={
            "corpus": CorpusResource(corpus_path=str(folder)),
            "parsing": ParsingConfig(),
            "openalex": OpenAlexResource(),
            "arxiv": ArxivResource(),
        },
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    papers = tables.read(tables.PAPERS)
    assert set(papers["source_id"]) == {"good", "latin"}
    assert "Caf\ufffd" in papers.filter(pl.col("source_id") == "latin")["title"][0]
    rejected = tables.read(tables.REJECTED_PAPERS)
    reasons = dict(zip(rejected["paper_id"], rejected["reason"], strict=True))
    assert reasons["beir-hostile-beir:line-3"] == "unusable_id"
    assert reasons["beir-hostile-beir:line-4"] == "unusable_title"
    assert reasons["beir-hostile-beir:line-5"] == "unusable_text"
    assert reasons["beir-hostile-beir:line-6"] == "invalid_json"
    local = result.asset_materializations_for_node("local_papers")[0].metadata
    assert "unusable_title: corpus.jsonl line 4" in local["failure_details"].value
    assert "line 2" in local["repaired"].value
    assert result.asset_materializations_for_node("papers")[0].metadata["rejected"].value >= 4


@dg.asset
def fragile_asset() -> None:
    raise ValueError("corpus.jsonl line 7: unusable _id None")


@dg.asset(check_specs=[dg.AssetCheckSpec("sane", asset="gated_asset", blocking=True)])
def gated_asset():
    yield dg.MaterializeResult(
        check_results=[dg.AssetCheckResult(passed=False, description="all 4 PDFs failed to parse (corrupt)")]
    )


def test_cli_step_report_names_the_cause_not_the_wrapper():
    instance = DagsterInstance.ephemeral()
    report = materialize_step([fragile_asset], [fragile_asset], instance=instance, resources={})
    assert not report.success
    assert "ValueError: corpus.jsonl line 7: unusable _id None" in report.error
    assert "Error occurred while executing" not in report.error
    gated = materialize_step([gated_asset], [gated_asset], instance=instance, resources={})
    assert gated.failed_checks == ["gated_asset.sane: all 4 PDFs failed to parse (corrupt)"]
    assert not gated.success and "all 4 PDFs failed" in gated.error
