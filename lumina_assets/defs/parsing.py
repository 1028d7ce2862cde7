"""Parsing stage: `pdf_files` -> `parsed_papers` -> `passages`, each partitioned by ingest batch; the work is in
`lumina_assets.parsing`."""

import json
import warnings
from collections import Counter
from typing import Any

import dagster as dg
import polars as pl

from lumina_assets.core import settings, tables
from lumina_assets.core.schemas import (
    PARSED_PAPERS_SCHEMA,
    PASSAGE_SCHEMA,
    PDF_FILES_SCHEMA,
    ParsedPaper,
    rows_to_table,
)
from lumina_assets.defs.partitions import INGEST_BATCHES
from lumina_assets.parsing.batch import (
    parse_batch,
    parser_failure_share,
    passages_for_batch,
    systemic_failure,
)
from lumina_assets.parsing.pdf_store import PdfStore, fetch_paper_pdf, remove_stale_temp_files
from resources.grobid import GrobidResource
from resources.parsing import ParsingConfig

GROUP = "parsing"
# what a failed blocking check means past its own run: passage_index reads it (defs/batch_holds.py)
HELD = "the index leaves this batch out until it is re-run and passes, or its papers are removed"

# every new batch rewrites the unpartitioned `papers`: ignoring it, a batch's steps follow their own partition only
ON_NEW_BATCH = dg.AutomationCondition.eager().ignore(dg.AssetSelection.assets("papers"))

# pdf_files waits for `papers` to write the batch: the inbox sensor adds the partition before the ingest run fills it
ON_BATCH_WRITTEN = (
    dg.AutomationCondition.missing()
    & dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)


def _batch_check(name: str, **kwargs) -> dg.AssetCheckSpec:
    """A check evaluated per batch partition, whose latest result holds a batch out of the index (defs/batch_holds.py);
    partitioned checks are a Dagster preview feature, whose warning says only that."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(name, partitions_def=INGEST_BATCHES, **kwargs)


def _batch_papers(batch: str) -> pl.DataFrame:
    papers = tables.read(tables.PAPERS)
    if papers is None:
        raise dg.Failure("the papers table does not exist yet: materialize `papers` first")
    return papers.filter(pl.col("ingest_batch") == batch)


def _previous_rows(spec: tables.TableSpec, batch: str) -> dict[str, dict[str, Any]]:
    previous = tables.read(spec, batch)
    if previous is None:
        return {}
    return {row["paper_id"]: row for row in previous.iter_rows(named=True)}


def _md_failures(rows: list[dict[str, Any]], sources: dict[str, str] | None = None, limit: int = 50) -> str:
    """One line per failed paper: which paper, from which file or URL, and why."""
    failed = [row for row in rows if row["status"] == "failed"]
    lines = []
    for row in failed[:limit]:
        source = (sources or {}).get(row["paper_id"]) or row.get("source_url")
        where = f" ({source})" if source else ""
        detail = f": {str(row['detail'])[:160]}" if row.get("detail") else ""
        lines.append(f"- `{row['paper_id']}`{where}: {row['reason']}{detail}")
    if len(failed) > limit:
        lines.append(f"- ... {len(failed) - limit} more")
    return "\n".join(lines) or "_none_"


def _md_counts(counts: dict[str, int]) -> str:
    if not counts:
        return "_none_"
    return "\n".join(f"- `{key}`: {value}" for key, value in sorted(counts.items(), key=lambda kv: -kv[1]))


@dg.asset(
    group_name=GROUP,
    partitions_def=INGEST_BATCHES,
    deps=[dg.AssetDep("papers")],
    code_version="1",
    pool="pdf_download",
    automation_condition=ON_BATCH_WRITTEN,
    description="The PDF of each paper of the batch in the content-addressed store (local file or download).",
)
def pdf_files(context: dg.AssetExecutionContext, parsing: ParsingConfig) -> dg.MaterializeResult:
    batch = context.partition_key
    papers = _batch_papers(batch)
    previous = _previous_rows(tables.PDF_FILES, batch)
    store = PdfStore()
    stale = remove_stale_temp_files(store)
    needs_download = parsing.download_pdfs and any(
        not row["local_path"] and row["pdf_urls"] for row in papers.iter_rows(named=True)
    )
    client = parsing.http_client() if needs_download else None
    rows = []
    try:
        for paper in papers.iter_rows(named=True):
            rows.append(
                fetch_paper_pdf(
                    paper,
                    store,
                    client,
                    max_bytes=parsing.max_bytes,
                    previous=previous.get(paper["paper_id"]),
                )
            )
    finally:
        if client is not None:
            client.close()
    frame = pl.from_arrow(rows_to_table(rows, PDF_FILES_SCHEMA))
    tables.write(tables.PDF_FILES, frame, batch)
    statuses = Counter(row["status"] for row in rows)
    failures = Counter(row["reason"] for row in rows if row["status"] == "failed")
    metadata = {
        "papers": len(rows),
        "pdfs": statuses.get("ok", 0),
        "no_pdf": statuses.get("no_pdf", 0),
        "failed": statuses.get("failed", 0),
        "reused": sum(1 for row in rows if row.get("reason") == "reused"),
        "bytes": int(sum(row["bytes"] or 0 for row in rows)),
        "stale_temp_files_removed": stale,
        "failures_by_reason": dg.MetadataValue.md(_md_counts(dict(failures))),
        "failed_files": dg.MetadataValue.md(_md_failures(rows)),
        "table": str(tables.PDF_FILES.path(batch)),
        "sample": dg.MetadataValue.md(
            tables.markdown_sample(frame, ["paper_id", "status", "reason", "bytes"])
        ),
    }
    if client is not None:
        metadata.update(client.stats.as_metadata())
    return dg.MaterializeResult(
        metadata=metadata,
        data_version=dg.DataVersion(tables.content_hash(frame, ["paper_id", "sha256", "status"])),
    )


def _paper_markdown(paper: ParsedPaper, limit: int = 12) -> str:
    lines = [f"**{paper.title or paper.paper_id}** ({paper.parser}, {paper.page_count} pages)", ""]
    for section in paper.sections[:limit]:
        pages = f"p{section.page_start}-{section.page_end}" if section.page_start else ""
        lines.append(f"- {section.number} {section.title} {pages} ({len(section.text)} chars)")
    if len(paper.sections) > limit:
        lines.append(f"- ... {len(paper.sections) - limit} more sections")
    kinds = Counter(e.kind for e in paper.elements)
    lines.append("")
    lines.append(
        f"{len(paper.references)} references, {len(paper.citations)} citation links, "
        + ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items()))
    )
    return "\n".join(lines)


@dg.asset(
    group_name=GROUP,
    partitions_def=INGEST_BATCHES,
    deps=[pdf_files],
    code_version="1",
    automation_condition=dg.AutomationCondition.eager(),
    check_specs=[
        _batch_check(
            "parse_failure_rate",
            asset="parsed_papers",
            blocking=True,
            description=(
                "no systemic parse failure: every PDF failing (from 3 on), or parser failures (errors, crashes) "
                "above ParsingConfig.failure_threshold from failure_check_min_documents PDFs on; bad files "
                "alone never block the batch"
            ),
        )
    ],
    description="A structured document per paper (sections, references, citations, figures, tables, formulas).",
)
def parsed_papers(
    context: dg.AssetExecutionContext, parsing: ParsingConfig, grobid: GrobidResource
) -> dg.MaterializeResult:
    batch = context.partition_key
    files = tables.read(tables.PDF_FILES, batch)
    if files is None:
        raise dg.Failure(f"pdf_files has no partition {batch}: materialize it first")
    parser = parsing.build_parser(grobid.options())
    sources = {row["paper_id"]: row["source_url"] for row in files.iter_rows(named=True)}
    result = parse_batch(
        files.iter_rows(named=True),
        _previous_rows(tables.PARSED_PAPERS, batch),
        parser,
        workers=parsing.workers,
        limits=parsing.pdf_limits().process(),
        log_fn=context.log.warning,
        progress_fn=context.log.info,
    )
    rows, sample, seconds = result.rows, result.sample, result.seconds
    frame = pl.from_arrow(rows_to_table(rows, PARSED_PAPERS_SCHEMA))
    tables.write(tables.PARSED_PAPERS, frame, batch)

    statuses = Counter(row["status"] for row in rows)
    failures = Counter(row["reason"] for row in rows if row["status"] == "failed")
    with_pdf = statuses.get("ok", 0) + statuses.get("failed", 0)
    failure_rate = statuses.get("failed", 0) / with_pdf if with_pdf else 0.0
    ok = frame.filter(pl.col("status") == "ok")
    if sample is None and ok.height:
        sample = ParsedPaper.from_json(ok["parsed_json"][0])
    verdict = systemic_failure(
        failures,
        with_pdf,
        threshold=parsing.failure_threshold,
        min_documents=parsing.failure_check_min_documents,
    )
    check = dg.AssetCheckResult(
        check_name="parse_failure_rate",
        passed=verdict is None,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{verdict}: {HELD}"
        if verdict
        else "no systemic parse failure; bad files are recorded and skipped",
        metadata={
            "failure_rate": round(failure_rate, 4),
            "parser_failure_rate": round(parser_failure_share(failures, with_pdf), 4),
            "threshold": parsing.failure_threshold,
            "min_documents": parsing.failure_check_min_documents,
            "failed": statuses.get("failed", 0),
            "papers_with_pdf": with_pdf,
            "failures_by_reason": dg.MetadataValue.json(dict(failures)),
            "verdict": verdict or "ok",
        },
    )
    return dg.MaterializeResult(
        metadata={
            "papers": len(rows),
            "parsed": statuses.get("ok", 0),
            "failures": statuses.get("failed", 0),
            "no_pdf": statuses.get("no_pdf", 0),
            "parsed_this_run": result.parsed_now,
            "reused_unchanged": result.reused,
            "failure_rate": round(failure_rate, 4),
            "failures_by_reason": dg.MetadataValue.md(_md_counts(dict(failures))),
            "failed_files": dg.MetadataValue.md(_md_failures(rows, sources)),
            "parsers": dg.MetadataValue.json(dict(Counter(r["parser"] for r in rows if r.get("parser")))),
            "pages": int(ok["page_count"].sum() or 0) if ok.height else 0,
            "pages_per_second_this_run": round(result.pages_now / seconds, 1) if seconds else 0.0,
            "sections": int(ok["sections"].sum() or 0) if ok.height else 0,
            "references": int(ok["references"].sum() or 0) if ok.height else 0,
            "elements": int(ok["elements"].sum() or 0) if ok.height else 0,
            "sample": dg.MetadataValue.md(_paper_markdown(sample) if sample else "_no parsed paper_"),
            "table": str(tables.PARSED_PAPERS.path(batch)),
        },
        data_version=dg.DataVersion(tables.content_hash(frame, ["paper_id", "sha256", "parser", "status"])),
        check_results=[check],
    )


@dg.asset(
    group_name=GROUP,
    partitions_def=INGEST_BATCHES,
    deps=[parsed_papers, dg.AssetDep("papers")],
    code_version="1",
    automation_condition=ON_NEW_BATCH,
    check_specs=[
        _batch_check(
            "no_empty_passages",
            asset="passages",
            blocking=True,
            description="every passage has text and every paper of the batch has at least one passage",
        )
    ],
    description="Section-aware retrieval passages (text, abstract, figure, table, formula) in model tokens.",
)
def passages(context: dg.AssetExecutionContext, parsing: ParsingConfig) -> dg.MaterializeResult:
    from lumina_assets.parsing.chunking import model_token_counter

    batch = context.partition_key
    papers = _batch_papers(batch)
    parsed = tables.read(tables.PARSED_PAPERS, batch)
    parsed_rows = {row["paper_id"]: row for row in parsed.iter_rows(named=True)} if parsed is not None else {}
    settings_key = f"{parsing.tokenizer or 'bundled-minilm'}:{parsing.max_tokens}"
    state_file = settings.tables_dir() / "passages_state" / f"{batch}.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    built = passages_for_batch(
        papers.iter_rows(named=True),
        parsed_rows,
        previous=tables.read(tables.PASSAGES, batch),
        state=state,
        settings_key=settings_key,
        token_counter=lambda: model_token_counter(parsing.tokenizer or None),
        max_tokens=parsing.max_tokens,
    )
    rows, new_state, rebuilt, reused = built.rows, built.state, built.rebuilt, built.reused
    frame = pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA))
    tables.write(tables.PASSAGES, frame, batch)
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(new_state))

    empty = frame.filter(pl.col("text").is_null() | (pl.col("text").str.strip_chars() == "")).height
    covered = set(frame["paper_id"].unique().to_list()) if frame.height else set()
    missing = [pid for pid in papers["paper_id"].to_list() if pid not in covered]
    passed = empty == 0 and not missing
    check = dg.AssetCheckResult(
        check_name="no_empty_passages",
        passed=passed,
        description=(
            "every passage has text and every paper has a passage"
            if passed
            else f"{empty} empty passages, {len(missing)} papers without a passage "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): {HELD}"
        ),
        metadata={
            "empty_passages": empty,
            "papers_without_passages": len(missing),
            "examples": dg.MetadataValue.json(missing[:10]),
        },
    )
    kinds = Counter(frame["kind"].to_list()) if frame.height else Counter()
    stops = Counter(frame["stop_reason"].to_list()) if frame.height else Counter()
    tokens = frame["token_count"] if frame.height else pl.Series([0])
    return dg.MaterializeResult(
        metadata={
            "passages": frame.height,
            "papers": papers.height,
            "papers_rebuilt": rebuilt,
            "papers_reused": reused,
            "by_kind": dg.MetadataValue.json(dict(kinds)),
            "stop_reasons": dg.MetadataValue.json(dict(stops)),
            "max_tokens": parsing.max_tokens,
            "tokens_mean": round(float(tokens.mean() or 0), 1),
            "tokens_max": int(tokens.max() or 0),
            "sample": dg.MetadataValue.md(
                tables.markdown_sample(frame, ["passage_id", "kind", "section_title", "page_start", "text"])
            ),
            "table": str(tables.PASSAGES.path(batch)),
        },
        data_version=dg.DataVersion(tables.content_hash(frame, ["passage_id", "text"])),
        check_results=[check],
    )


ASSETS: list = [pdf_files, parsed_papers, passages]
CHECKS: list = []  # the checks are declared on the assets (check_specs) so they run per partition


def build_resources() -> dict:
    return {
        "parsing": ParsingConfig(allow_private_pdf_urls=settings.get().network.allow_private_urls),
        "grobid": GrobidResource(),
    }
