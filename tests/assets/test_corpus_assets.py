"""The corpus group materialized through Dagster on a small real local corpus, with an ephemeral instance."""

from __future__ import annotations

import shutil

import dagster as dg
import polars as pl
import pytest
from dagster import DagsterInstance

from lumina_assets.core import settings, tables
from lumina_assets.defs import corpus
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from resources.parsing import ParsingConfig


@pytest.fixture
def mini_beir(shared_data, tmp_path):
    """The first 40 SciFact documents plus one line that is not JSON."""
    lines = (shared_data / "scifact" / "corpus.jsonl").read_text().splitlines()[:40]
    folder = tmp_path / "scifact-mini"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("\n".join(lines[:20] + ["{not json"] + lines[20:]) + "\n")
    return folder


def run_corpus(corpus_path, instance, tags=None):
    return dg.materialize(
        corpus.ASSETS,
        resources={
            "corpus": CorpusResource(corpus_path=str(corpus_path)),
            "parsing": ParsingConfig(),
            "openalex": OpenAlexResource(),
            "arxiv": ArxivResource(),
        },
        instance=instance,
        tags=tags,
    )


def test_definitions_load_without_side_effects():
    from lumina_assets.definitions import defs

    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {
        "seed_papers",
        "openalex_works",
        "arxiv_works",
        "local_papers",
        "papers",
        "citation_graph",
    } <= keys


def test_corpus_group_materializes_offline_and_second_run_changes_nothing(data_dir, mini_beir):
    instance = DagsterInstance.ephemeral()
    result = run_corpus(mini_beir, instance, tags={INGEST_BATCH_TAG: "batch-test-1"})
    assert result.success
    papers = tables.read(tables.PAPERS)
    assert papers.height == 40 and papers["paper_id"].n_unique() == 40
    assert set(papers["ingest_batch"]) == {"batch-test-1"}
    assert instance.get_dynamic_partitions(INGEST_BATCHES.name) == ["batch-test-1"]
    local = result.asset_materializations_for_node("local_papers")[0].metadata
    assert local["failures"].value == 1 and "line 21" in local["failure_details"].value
    skipped = result.asset_materializations_for_node("openalex_works")[0].metadata
    assert "offline" in skipped["skipped"].value

    again = run_corpus(mini_beir, instance)
    meta = again.asset_materializations_for_node("papers")[0].metadata
    assert meta["renormalized"].value == 0 and meta["new_papers"].value == 0
    assert instance.get_dynamic_partitions(INGEST_BATCHES.name) == ["batch-test-1"]
    first_version = result.asset_materializations_for_node("papers")[0].tags["dagster/data_version"]
    assert again.asset_materializations_for_node("papers")[0].tags["dagster/data_version"] == first_version


def test_new_documents_join_a_new_batch_and_old_ones_keep_theirs(data_dir, mini_beir, shared_data):
    instance = DagsterInstance.ephemeral()
    run_corpus(mini_beir, instance, tags={INGEST_BATCH_TAG: "batch-a"})
    extra = (shared_data / "scifact" / "corpus.jsonl").read_text().splitlines()[40:43]
    with (mini_beir / "corpus.jsonl").open("a") as handle:
        handle.write("\n".join(extra) + "\n")
    result = run_corpus(mini_beir, instance, tags={INGEST_BATCH_TAG: "batch-b"})
    papers = tables.read(tables.PAPERS)
    counts = dict(papers.group_by("ingest_batch").len().iter_rows())
    assert counts == {"batch-a": 40, "batch-b": 3}
    assert result.asset_materializations_for_node("papers")[0].metadata["new_papers"].value == 3
    assert sorted(instance.get_dynamic_partitions(INGEST_BATCHES.name)) == ["batch-a", "batch-b"]


def test_pdf_folder_corpus_and_inbox(data_dir, shared_data):
    pdfs = data_dir.parent / "pdfs"
    pdfs.mkdir()
    for name in ("N18-3011.pdf", "2304.02623v1.pdf"):
        shutil.copy(shared_data / "pdfs" / name, pdfs / name)
    inbox = data_dir / "inbox"
    inbox.mkdir()
    shutil.copy(shared_data / "pdfs" / "pasa.pdf", inbox / "pasa.pdf")
    (inbox / "broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    result = run_corpus(pdfs, DagsterInstance.ephemeral())
    assert result.success
    papers = tables.read(tables.PAPERS)
    assert papers.height == 3
    assert papers.filter(pl.col("local_path").is_null()).height == 0
    local = result.asset_materializations_for_node("local_papers")[0].metadata
    assert local["failures"].value == 1 and "broken.pdf" in local["failure_details"].value


def test_empty_seed_file_is_reported_not_fatal(data_dir, tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("")
    result = dg.materialize(
        [corpus.seed_papers],
        resources={"corpus": CorpusResource(seeds_path=str(seeds))},
        instance=DagsterInstance.ephemeral(),
    )
    meta = result.asset_materializations_for_node("seed_papers")[0].metadata
    assert result.success and "is empty" in meta["problems"].value


def test_live_crawl_without_openalex_key_is_skipped_with_the_reason(data_dir, tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("dois: ['10.18653/v1/N18-3011']\n")
    result = dg.materialize(
        [corpus.seed_papers, corpus.openalex_works],
        resources={
            "corpus": CorpusResource(seeds_path=str(seeds)),
            "openalex": OpenAlexResource(api_key=None),
        },
        instance=DagsterInstance.ephemeral(),
    )
    meta = result.asset_materializations_for_node("openalex_works")[0].metadata
    assert "OPENALEX_API_KEY is not set" in meta["skipped"].value


def test_dagster_definitions_validate_passes(tmp_path):
    """The same check a user's `dagster definitions validate` runs on workspace.yaml."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = settings.PROJECT_ROOT
    dagster = Path(sys.executable).parent / "dagster"
    completed = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "Validation successful" in completed.stderr + completed.stdout


def test_atomic_replace_keeps_the_old_file_when_a_write_fails(tmp_path):
    from lumina_assets.core.tables import atomic_replace

    target = tmp_path / "deep" / "table.bin"
    atomic_replace(target, lambda temp: temp.write_bytes(b"first"))
    assert target.read_bytes() == b"first"

    def broken(temp):
        temp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_replace(target, broken)
    assert target.read_bytes() == b"first"
    assert [p.name for p in target.parent.iterdir()] == ["table.bin"]  # no partial file left behind


def _pdf_printing_a_doi(folder, doi: str) -> None:
    import pymupdf

    folder.mkdir()
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 90), "Pooled prime editing screens of variants", fontsize=18)
    page.insert_text((72, 130), "Michael Herger", fontsize=11)
    page.insert_text((72, 160), f"https://doi.org/{doi}", fontsize=9)
    body = "Prime editing installs every variant of a gene in a pooled screen and reads out function. " * 12
    page.insert_textbox(pymupdf.Rect(72, 190, 540, 760), body, fontsize=10)
    document.save(folder / "screen.pdf")


def test_local_pdfs_are_enriched_by_their_printed_doi_only_when_switched_on(data_dir, tmp_path, shared_data):
    """With enrichment on, a PDF's printed DOI completes its record from OpenAlex (a local server answering the
    recorded OpenAlex body for that DOI) and the source is labelled; off (the default) nothing is asked."""
    from orchestration_servers import static_http_server

    doi = "10.1016/j.xgen.2025.100814"
    corpus_dir = tmp_path / "pdfs"
    _pdf_printing_a_doi(corpus_dir, doi)
    api = tmp_path / "api"
    (api / "works").mkdir(parents=True)
    recorded = shared_data / "api_fixtures" / "openalex_extracted"
    (api / "works" / "doi:10.1016").mkdir()  # the DOI's slash is a path separator on the server
    shutil.copy(
        recorded / "test_doi_search_paper_attributes0__interaction2.json", api / "works" / f"doi:{doi}"
    )

    def run(enrich: bool, base_url: str):
        return dg.materialize(
            [corpus.local_papers],
            resources={
                "corpus": CorpusResource(corpus_path=str(corpus_dir), enrich_local_papers=enrich),
                "parsing": ParsingConfig(),
                "openalex": OpenAlexResource(base_url=base_url, api_key="test-key"),
                "arxiv": ArxivResource(base_url=base_url),
            },
            instance=DagsterInstance.ephemeral(),
        )

    with static_http_server(api) as base_url:
        off = run(False, base_url)
        plain = tables.read(tables.LOCAL_PAPERS).row(0, named=True)
        on = run(True, base_url)
        enriched = tables.read(tables.LOCAL_PAPERS).row(0, named=True)
    assert off.success and on.success
    assert plain["doi"] == doi and not any(s.endswith("_enriched") for s in plain["metadata_sources"])
    assert off.asset_materializations_for_node("local_papers")[0].metadata["enriched"].value == 0
    assert on.asset_materializations_for_node("local_papers")[0].metadata["enriched"].value == 1
    assert any(s.endswith(":openalex_enriched") for s in enriched["metadata_sources"])
    assert len(enriched["authors"]) > len(plain["authors"])  # the recorded work lists every author
