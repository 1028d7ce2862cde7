"""pdf_files -> parsed_papers -> passages materialized on a real batch: local PDFs, a BEIR abstract-only paper
and a broken PDF, with the incremental re-run and the blocking failure-rate check."""

from __future__ import annotations

import shutil

import dagster as dg
import polars as pl
import pytest
from dagster import DagsterInstance

from lumina_assets.core import tables
from lumina_assets.core.schemas import PAPERS_TABLE_SCHEMA, PASSAGE_SCHEMA, rows_to_table
from lumina_assets.defs.parsing import ASSETS, build_resources
from resources.grobid import GrobidResource
from resources.parsing import ParsingConfig

BATCH = "batch-test-1"


def _paper(paper_id: str, **fields) -> dict:
    row = {
        "paper_id": paper_id,
        "title": fields.pop("title", paper_id),
        "source": fields.pop("source", "local_pdf"),
        "ingest_batch": fields.pop("ingest_batch", BATCH),
        "pdf_urls": fields.pop("pdf_urls", []),
        "authors": [],
        "keywords": [],
        "references": [],
    }
    row.update(fields)
    return row


@pytest.fixture
def batch_papers(data_dir, shared_data, tmp_path):
    """Two real PDFs, a truncated copy of one, a BEIR abstract-only paper, and a paper of another batch."""
    pdfs = shared_data / "pdfs"
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes((pdfs / "N18-3011.pdf").read_bytes()[:60_000])
    rows = [
        _paper("pdf:n18", local_path=str(pdfs / "N18-3011.pdf")),
        _paper("pdf:specter", local_path=str(pdfs / "2020.acl-main.207.pdf")),
        _paper("pdf:truncated", local_path=str(truncated)),
        _paper(
            "beir-scifact:4983",
            source="beir",
            title="Microstructural development of human newborn cerebral white matter",
            abstract="Alterations of the architecture of cerebral white matter in the developing human brain "
            "can affect cortical development and result in functional disabilities.",
        ),
        _paper("pdf:other-batch", ingest_batch="batch-other", local_path=str(pdfs / "pasa.pdf")),
    ]
    tables.write(tables.PAPERS, rows_to_table(rows, PAPERS_TABLE_SCHEMA))
    return rows


def _materialize(instance, resources=None):
    return dg.materialize(
        ASSETS,
        instance=instance,
        partition_key=BATCH,
        resources=resources or build_resources(),
        raise_on_error=False,
    )


def _instance():
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("ingest_batches", [BATCH])
    return instance


RELAXED = {"parsing": ParsingConfig(failure_threshold=0.5), "grobid": GrobidResource()}


def test_batch_end_to_end_with_failures_recorded(batch_papers, data_dir):
    result = _materialize(_instance(), RELAXED)
    assert result.success

    files = tables.read(tables.PDF_FILES, BATCH)
    by_id = {row["paper_id"]: row for row in files.iter_rows(named=True)}
    assert set(by_id) == {"pdf:n18", "pdf:specter", "pdf:truncated", "beir-scifact:4983"}  # only this batch
    assert by_id["beir-scifact:4983"]["status"] == "no_pdf"
    assert by_id["pdf:n18"]["status"] == "ok"
    stored = data_dir / "pdfs" / by_id["pdf:n18"]["sha256"][:2] / f"{by_id['pdf:n18']['sha256']}.pdf"
    assert stored.exists() and by_id["pdf:n18"]["path"] == str(stored)

    parsed = tables.read(tables.PARSED_PAPERS, BATCH)
    status = dict(zip(parsed["paper_id"], parsed["status"], strict=True))
    reasons = dict(zip(parsed["paper_id"], parsed["reason"], strict=True))
    assert status["pdf:n18"] == status["pdf:specter"] == "ok"
    assert (status["pdf:truncated"], reasons["pdf:truncated"]) == ("failed", "truncated")
    assert status["beir-scifact:4983"] == "no_pdf"
    assert set(parsed.filter(pl.col("status") == "ok")["parser"]) == {"pymupdf@1.3"}

    passages = tables.read(tables.PASSAGES, BATCH)
    assert passages.schema == pl.from_arrow(PASSAGE_SCHEMA.empty_table()).schema
    per_paper = passages.group_by("paper_id").len()
    counts = dict(zip(per_paper["paper_id"], per_paper["len"], strict=True))
    assert counts["pdf:n18"] > 20 and counts["pdf:specter"] > 20
    assert counts["beir-scifact:4983"] >= 1  # abstract-only
    kinds = set(passages.filter(pl.col("paper_id") == "pdf:specter")["kind"])
    assert {"abstract", "text", "table", "figure"} <= kinds
    assert passages["passage_id"].n_unique() == passages.height
    assert passages.filter(pl.col("text").str.strip_chars() == "").height == 0
    assert passages["token_count"].max() <= ParsingConfig().max_tokens
    n18_sections = set(passages.filter(pl.col("paper_id") == "pdf:n18")["section_title"])
    assert {"Introduction", "Entity Linking Models"} <= n18_sections

    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"parse_failure_rate": True, "no_empty_passages": True}  # 1 of 3 failed, threshold 50 %


def test_rerun_reuses_unchanged_papers(batch_papers, data_dir):
    instance = _instance()
    assert _materialize(instance, RELAXED).success
    first = tables.read(tables.PASSAGES, BATCH)
    second_run = _materialize(instance, RELAXED)
    assert second_run.success
    materializations = {
        m.asset_key.path[-1]: m.metadata for m in second_run.asset_materializations_for_node("parsed_papers")
    }
    assert materializations["parsed_papers"]["parsed_this_run"].value == 0
    assert materializations["parsed_papers"]["reused_unchanged"].value == 3
    passage_meta = second_run.asset_materializations_for_node("passages")[0].metadata
    assert passage_meta["papers_rebuilt"].value == 0
    assert tables.read(tables.PASSAGES, BATCH).sort("passage_id").equals(first.sort("passage_id"))


def test_a_bad_file_never_keeps_the_good_papers_out(batch_papers):
    """1 of 3 PDFs truncated, default config: the bad file is recorded with its reason and skipped, the
    check passes (bad input is not systemic) and the good papers reach passages."""
    result = _materialize(_instance())
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"parse_failure_rate": True, "no_empty_passages": True}
    parsed_meta = result.asset_materializations_for_node("parsed_papers")[0].metadata
    assert "`pdf:truncated` (" in parsed_meta["failed_files"].value
    assert "truncated.pdf): truncated" in parsed_meta["failed_files"].value
    indexed = set(tables.read(tables.PASSAGES, BATCH)["paper_id"])
    assert {"pdf:n18", "pdf:specter"} <= indexed


def test_a_parser_that_fails_everything_blocks_indexing(batch_papers):
    """GROBID configured but unreachable: every PDF fails, which is systemic; the blocking check stops the
    batch before passages and says why."""
    broken = {"parsing": ParsingConfig(parser="grobid"), "grobid": GrobidResource(url="http://127.0.0.1:9")}
    result = _materialize(_instance(), broken)
    assert not result.success
    evaluations = [e for e in result.get_asset_check_evaluations() if e.check_name == "parse_failure_rate"]
    assert len(evaluations) == 1 and not evaluations[0].passed
    assert "all 3 PDFs failed" in evaluations[0].description
    assert tables.read(tables.PARSED_PAPERS, BATCH) is not None
    assert tables.read(tables.PASSAGES, BATCH) is None


def test_systemic_failure_rule():
    from lumina_assets.parsing.batch import systemic_failure

    rule = {"threshold": 0.25, "min_documents": 10}
    assert systemic_failure({"truncated": 2, "stream_too_large": 1}, 5, **rule) is None  # bad files only
    assert systemic_failure({"corrupt": 1}, 1, **rule) is None  # one bad file alone is not a broken parser
    assert "all 3" in systemic_failure({"corrupt": 3}, 3, **rule)
    assert systemic_failure({"parser_error": 2}, 9, **rule) is None  # too few documents to tell
    assert "failed in the parser" in systemic_failure({"parser_error": 3, "encrypted": 5}, 10, **rule)
    assert systemic_failure({"parser_error": 2, "encrypted": 6}, 10, **rule) is None


def test_local_file_moved_after_intake_still_parses(batch_papers, data_dir, tmp_path, shared_data):
    inbox_copy = tmp_path / "inbox.pdf"
    shutil.copy(shared_data / "pdfs" / "N18-3011.pdf", inbox_copy)
    rows = [_paper("pdf:inbox", local_path=str(inbox_copy))]
    tables.write(tables.PAPERS, rows_to_table(rows, PAPERS_TABLE_SCHEMA))
    instance = _instance()
    dg.materialize(ASSETS[:1], instance=instance, partition_key=BATCH, resources=build_resources())
    inbox_copy.unlink()  # the store keeps its own copy
    result = dg.materialize(ASSETS, instance=instance, partition_key=BATCH, resources=build_resources())
    assert result.success
    assert tables.read(tables.PARSED_PAPERS, BATCH)["status"].to_list() == ["ok"]
