"""Corpus stage: seeds → OpenAlex / arXiv crawl and local papers → normalized, deduplicated `papers` (plus
`rejected_papers`)."""

import dataclasses
import functools
import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow as pa

from lumina_assets.core import settings, tables
from lumina_assets.core.http import redact_url
from lumina_assets.core.hygiene import clean_text, display_name, path_text
from lumina_assets.core.schemas import (
    PAPER_FIELDS,
    PAPERS_TABLE_SCHEMA,
    REJECTED_SCHEMA,
    Paper,
    rows_to_table,
)
from lumina_assets.corpus import batches, catalogue
from lumina_assets.corpus.crawl import ArxivQuery, Seeds, crawl_arxiv, crawl_openalex, load_seeds
from lumina_assets.corpus.enrich import enrich_paper
from lumina_assets.corpus.library import load_local_corpus
from lumina_assets.corpus.local import LoadReport, load_pdf_folder
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.env import env_secret
from resources.openalex import OpenAlexResource
from resources.parsing import ParsingConfig

GROUP = "corpus"
RAW_PAPER_SCHEMA = pa.schema(PAPER_FIELDS)
SAMPLE_COLUMNS = ["paper_id", "title", "year", "source", "ingest_batch"]


def _papers_table(papers: list[Paper]) -> pa.Table:
    return rows_to_table([p.to_row() for p in papers], RAW_PAPER_SCHEMA)


def _read_papers(spec: tables.TableSpec) -> list[Paper]:
    frame = tables.read(spec)
    if frame is None:
        return []
    names = {f.name for f in dataclasses.fields(Paper)}
    return [Paper(**{k: v for k, v in row.items() if k in names}) for row in frame.iter_rows(named=True)]


def _failure_metadata(failures: list[str]) -> dict:
    shown = "\n".join(f"- {f}" for f in failures[:50]) or "none"
    return {"failures": len(failures), "failure_details": dg.MetadataValue.md(shown)}


def _write_raw(spec: tables.TableSpec, papers: list[Paper]) -> tuple[str, pl.DataFrame]:
    table = _papers_table(papers)
    tables.write(spec, table)
    frame = pl.from_arrow(table)
    return tables.content_hash(frame), frame


def _seeds_path() -> Path:
    return settings.tables_dir() / "seed_papers.json"


def read_stored_seeds() -> Seeds:
    """The seeds as the last `seed_papers` run resolved them."""
    raw = json.loads(_seeds_path().read_text(encoding="utf-8"))
    raw["arxiv_queries"] = [ArxivQuery(**q) for q in raw.get("arxiv_queries", [])]
    return Seeds(**raw)


@dg.asset(
    group_name=GROUP,
    code_version="1",
    description="Seed DOIs, arXiv ids, OpenAlex ids and queries from seeds.yaml",
)
def seed_papers(context: dg.AssetExecutionContext, corpus: CorpusResource) -> dg.MaterializeResult:
    seeds = load_seeds(corpus.seeds_file())
    for problem in seeds.problems:
        context.log.warning(problem)
    settings.tables_dir().mkdir(parents=True, exist_ok=True)
    blob = json.dumps(dataclasses.asdict(seeds), sort_keys=True)
    _seeds_path().write_text(blob, encoding="utf-8")
    return dg.MaterializeResult(
        metadata={
            "seed_file": str(corpus.seeds_file()),
            "dois": len(seeds.dois),
            "arxiv_ids": len(seeds.arxiv_ids),
            "openalex_ids": len(seeds.openalex_ids),
            "arxiv_queries": len(seeds.arxiv_queries),
            "crawl_depth": seeds.depth,
            "max_papers": seeds.max_papers,
            "problems": dg.MetadataValue.md("\n".join(f"- {p}" for p in seeds.problems) or "none"),
        },
        data_version=dg.DataVersion(hashlib.sha256(blob.encode()).hexdigest()[:24]),
    )


class CrawlConfig(dg.Config):
    """Run config the polling sensor fills with works it discovered; they are kept for every later crawl."""

    extra_ids: list[str] = []


def _with_discovered(spec: tables.TableSpec, seeds: Seeds, extra_ids: list[str]) -> tuple[Seeds, int]:
    """Seeds plus every id a sensor has ever discovered for this source (persisted beside the tables)."""
    path = settings.tables_dir() / f"{spec.name}.discovered.json"
    known = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    merged = list(dict.fromkeys([*known, *extra_ids]))
    if merged != known:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(merged), encoding="utf-8")
    if spec == tables.OPENALEX_WORKS:
        seeds.openalex_ids = list(dict.fromkeys([*seeds.openalex_ids, *merged]))
    else:
        seeds.arxiv_ids = list(dict.fromkeys([*seeds.arxiv_ids, *merged]))
    return seeds, len(merged)


def _skipped(spec: tables.TableSpec, reason: str, context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    context.log.info(f"{spec.name} skipped: {reason}")
    content, _ = _write_raw(spec, [])
    return dg.MaterializeResult(
        metadata={"papers": 0, "skipped": reason}, data_version=dg.DataVersion(content)
    )


def _crawl(context, spec, name: str, source, crawl, extra_ids: list[str], *, depths: bool = False):
    """Crawl one source from the seeds plus every discovered id and write its table. A source the HTTP layer could
    not reach is said in the log and the metadata; the run succeeds and the catalogue keeps its earlier records."""
    seeds, discovered = _with_discovered(spec, read_stored_seeds(), extra_ids)
    client = source.client()
    result = crawl(client, seeds)
    content, frame = _write_raw(spec, result.papers)
    metadata = {"papers": len(result.papers), "discovered_by_sensor": discovered}
    if depths:
        by_depth = Counter(p.crawl_depth for p in result.papers)
        metadata["by_depth"] = dg.MetadataValue.json({str(k): v for k, v in sorted(by_depth.items())})
    if client.http.unreachable_hosts:
        where = redact_url(source.base_url)
        reasons = ", ".join(sorted(set(client.http.unreachable_hosts.values())))
        context.log.warning(
            f"{name} unreachable at {where} ({reasons}): nothing new from it in this run; the catalogue keeps "
            "its earlier records"
        )
        metadata.update(unreachable=where, unreachable_reason=reasons)
    sample = ["paper_id", "title", "year", *(["crawl_depth"] if depths else [])]
    return dg.MaterializeResult(
        metadata={
            **metadata,
            **_failure_metadata(result.failures),
            **client.http.stats.as_metadata(),
            "sample": dg.MetadataValue.md(tables.markdown_sample(frame, sample)),
        },
        data_version=dg.DataVersion(content),
    )


@dg.asset(group_name=GROUP, code_version="1", deps=[seed_papers], pool="openalex")
def openalex_works(
    context: dg.AssetExecutionContext, config: CrawlConfig, corpus: CorpusResource, openalex: OpenAlexResource
) -> dg.MaterializeResult:
    """Seed works and their references, breadth-first to the configured depth, capped at max_papers."""
    if not corpus.live_crawl_enabled():
        return _skipped(tables.OPENALEX_WORKS, "a local corpus is configured (offline mode)", context)
    if not openalex.resolved_api_key():
        return _skipped(
            tables.OPENALEX_WORKS,
            "OPENALEX_API_KEY is not set; OpenAlex requires a key since Feb 2026",
            context,
        )
    return _crawl(
        context, tables.OPENALEX_WORKS, "OpenAlex", openalex, crawl_openalex, config.extra_ids, depths=True
    )


@dg.asset(group_name=GROUP, code_version="1", deps=[seed_papers], pool="arxiv")
def arxiv_works(
    context: dg.AssetExecutionContext, config: CrawlConfig, corpus: CorpusResource, arxiv: ArxivResource
) -> dg.MaterializeResult:
    """Seeded arXiv ids and query results (one request every 3 s)."""
    if not corpus.live_crawl_enabled():
        return _skipped(tables.ARXIV_WORKS, "a local corpus is configured (offline mode)", context)
    return _crawl(context, tables.ARXIV_WORKS, "arXiv", arxiv, crawl_arxiv, config.extra_ids)


# pool: with enrichment on it asks arXiv (one client at a time for everyone); offline arxiv_works skips at once
@dg.asset(group_name=GROUP, code_version="2", pool="arxiv")
def local_papers(
    context: dg.AssetExecutionContext,
    corpus: CorpusResource,
    parsing: ParsingConfig,
    openalex: OpenAlexResource,
    arxiv: ArxivResource,
) -> dg.MaterializeResult:
    """Papers from LUMINA_CORPUS (folder of PDFs or BEIR directory) and the data/inbox folder of new PDFs.
    Each PDF is opened under the parsing limits; a refused file or record is rejected with its reason. With
    enrichment switched on, a PDF's printed DOI / arXiv id completes its record from OpenAlex / arXiv."""
    enricher, enrich_clients = None, []
    if corpus.enrichment_enabled():
        openalex_client = openalex.client() if openalex.resolved_api_key() else None
        arxiv_client = arxiv.client()
        enrich_clients = [c for c in (openalex_client, arxiv_client) if c is not None]
        enricher = functools.partial(enrich_paper, openalex=openalex_client, arxiv=arxiv_client)
    report = LoadReport()
    kinds: Counter = Counter()
    origins: list[str] = []  # per paper: the corpus folder or the inbox it came from (see corpus.catalogue)
    limits = parsing.pdf_limits()
    path = corpus.local_corpus()
    if path is not None:
        try:
            loaded = load_local_corpus(path, limits=limits, enricher=enricher)
        except (OSError, ValueError) as error:  # the corpus is refused, the inbox below still comes in
            shown = display_name(path)
            message = clean_text(str(error))  # an OSError names the path as given: maybe not UTF-8
            report.reject(f"corpus:{path_text(path)}", shown, "local_corpus", "unreadable_corpus", message)
            loaded = LoadReport()
        report.extend(loaded)
        kinds[loaded.kind or "corpus"] += len(loaded.papers)
        origins += [catalogue.corpus_origin(path)] * len(loaded.papers)
    inbox = settings.inbox_dir()
    if inbox.is_dir():
        loaded = load_pdf_folder(inbox, limits=limits, enricher=enricher)
        report.extend(loaded)
        kinds["inbox"] += len(loaded.papers)
        origins += [catalogue.INBOX_ORIGIN] * len(loaded.papers)
    for failure in report.errors:
        context.log.warning(failure)
    table = _papers_table(report.papers).append_column("origin", pa.array(origins, pa.string()))
    tables.write(tables.LOCAL_PAPERS, table)
    frame = pl.from_arrow(table)
    tables.write(
        tables.LOCAL_REJECTED,
        rows_to_table([dataclasses.asdict(r) for r in report.rejected], REJECTED_SCHEMA),
    )
    return dg.MaterializeResult(
        metadata={
            "papers": len(report.papers),
            "corpus_path": display_name(path) if path else "none",
            "enriched": sum(
                any(s.endswith("_enriched") for s in p.metadata_sources or []) for p in report.papers
            ),
            **{k: v for c in enrich_clients for k, v in c.http.stats.as_metadata().items()},
            "by_kind": dg.MetadataValue.json(dict(kinds)),
            **_failure_metadata(
                [f"{r.reason}: {m}" for r, m in zip(report.rejected, report.errors, strict=True)]
            ),
            "rejected_by_reason": dg.MetadataValue.json(dict(Counter(r.reason for r in report.rejected))),
            "repaired": dg.MetadataValue.md("\n".join(f"- {r}" for r in report.repairs[:50]) or "none"),
            "sample": dg.MetadataValue.md(
                tables.markdown_sample(frame, ["paper_id", "title", "source", "source_id"])
            ),
        },
        data_version=dg.DataVersion(tables.content_hash(frame)),
    )


class PapersConfig(dg.Config):
    """Explicit removals (the only way a paper leaves the catalogue); `lumina remove` / `lumina prune` set these."""

    remove_ids: list[str] = []  # catalogue paper ids to take out
    prune_origins: list[str] = []  # origins (openalex, arxiv, inbox, corpus:<path>) whose records are dropped
    reason: str = ""  # recorded in removed_papers with each removal


def _raw_records() -> list[catalogue.Record]:
    """This run's source tables, each record tagged with the origin it came from."""
    records = [catalogue.Record("openalex", p) for p in _read_papers(tables.OPENALEX_WORKS)]
    records += [catalogue.Record("arxiv", p) for p in _read_papers(tables.ARXIV_WORKS)]
    local = tables.read(tables.LOCAL_PAPERS)
    if local is not None:
        origins = local["origin"].to_list() if "origin" in local.columns else [None] * local.height
        for origin, paper in zip(origins, _read_papers(tables.LOCAL_PAPERS), strict=True):
            records.append(catalogue.Record(origin or catalogue.INBOX_ORIGIN, paper))
    return records


def _apply_removals(
    config: PapersConfig, records: list[catalogue.Record], seeds: Seeds, context: dg.AssetExecutionContext
) -> tuple[list[catalogue.Record], list[dict]]:
    """Prunes drop an origin's records; removals by id and the papers a prune leaves without a record go to
    removed_papers (kept out of every later run until restored)."""
    removed = catalogue.removed_ids()
    known = sorted(catalogue.origin_counts(records))
    entries: list[dict] = []
    for name in config.prune_origins:
        origin = catalogue.resolve_origin(name, known)
        plan, records = catalogue.plan_prune(
            origin,
            records,
            removed=removed,
            languages=seeds.languages,
            require_abstract=seeds.require_abstract,
        )
        context.log.warning(
            f"prune {origin}: {plan.records_dropped} records dropped, {len(plan.papers)} papers removed"
        )
        entries += [
            {**p, "action": "prune", "reason": config.reason or f"pruned source {origin}"}
            for p in plan.papers
        ]
    if config.remove_ids:
        current = tables.read(tables.PAPERS)
        built = catalogue.build(
            records, removed=removed, languages=seeds.languages, require_abstract=seeds.require_abstract
        )
        plan = catalogue.plan_remove(config.remove_ids, current, built.origins)
        for unknown in plan.unknown_ids:
            context.log.warning(f"remove {unknown}: not in the catalogue")
        entries += [
            {**p, "action": "remove", "reason": config.reason or "removed by hand"} for p in plan.papers
        ]
    for entry in entries:
        context.log.warning(f"removed {entry['paper_id']} ({entry['action']}): {entry['reason']}")
    catalogue.record_removals(entries)
    return records, entries


@dg.asset(
    group_name=GROUP,
    code_version="2",
    deps=[openalex_works, arxiv_works, local_papers, seed_papers],
    automation_condition=dg.AutomationCondition.eager(),
)
def papers(context: dg.AssetExecutionContext, config: PapersConfig) -> dg.MaterializeResult:
    """The catalogue: one normalized row per work from every record any source has contributed (see
    corpus.catalogue). Sources add and update; a paper leaves only through an explicit removal (this asset's
    config, `lumina remove`, `lumina prune`). New works join a new ingest batch (a dynamic partition) so parsing and
    indexing only touch them; known works keep their batch and first_seen."""
    seeds = read_stored_seeds() if _seeds_path().exists() else Seeds()
    raw = _raw_records()
    input_hash = batches.inputs_fingerprint(raw, catalogue.removed_ids())
    previous = tables.read(tables.PAPERS)
    state_path = settings.tables_dir() / "papers.inputs"
    removing = bool(config.remove_ids or config.prune_origins)
    if (
        not removing
        and previous is not None
        and state_path.exists()
        and state_path.read_text() == input_hash
        and tables.CATALOGUE_RECORDS.path().exists()
    ):
        return dg.MaterializeResult(
            metadata={
                "papers": previous.height,
                "renormalized": 0,
                "new_papers": 0,
                "unchanged_inputs": True,
            },
            data_version=dg.DataVersion(tables.content_hash(previous, ["paper_id", "content_hash"])),
        )
    stored = catalogue.read_records()
    if not stored and previous is not None and not tables.CATALOGUE_RECORDS.path().exists():
        # a papers table written before the catalogue existed: its rows are the records of earlier runs
        stored = [catalogue.Record(catalogue.EARLIER_RUNS_ORIGIN, p) for p in _read_papers(tables.PAPERS)]
    records, changed_records = catalogue.merge_records(stored, raw)
    records, removals = _apply_removals(config, records, seeds, context)
    catalogue.write_records(records)
    result = catalogue.build(
        records,
        removed=catalogue.removed_ids(),
        languages=seeds.languages,
        require_abstract=seeds.require_abstract,
    )
    now = datetime.now(UTC)
    batch = batches.new_batch_key(context.run.tags.get(INGEST_BATCH_TAG) if context.run else None, now)
    assigned = batches.assign_batches(
        result.papers, previous, batch=batch, now=now.isoformat(timespec="seconds")
    )
    rows, new_ids = assigned.rows, assigned.new_ids
    if new_ids:
        context.instance.add_dynamic_partitions(INGEST_BATCHES.name, [batch])
    table = rows_to_table(rows, PAPERS_TABLE_SCHEMA)
    tables.write(tables.PAPERS, table)
    local_rejected = tables.read(tables.LOCAL_REJECTED)  # files and records refused at intake
    intake = local_rejected.to_dicts() if local_rejected is not None else []
    rejected = rows_to_table([*intake, *(dataclasses.asdict(r) for r in result.rejected)], REJECTED_SCHEMA)
    tables.write(tables.REJECTED_PAPERS, rejected)
    state_path.write_text(input_hash)
    frame = pl.from_arrow(table)
    by_source = Counter(row["source"] for row in rows)
    gone = sorted(set(assigned.left) - {e["paper_id"] for e in removals})
    return dg.MaterializeResult(
        metadata={
            "papers": len(rows),
            "new_papers": len(new_ids),
            "changed_papers": assigned.changed,
            "renormalized": len(records),
            "records": len(records),
            "records_new_or_changed": changed_records,
            "removed": len(removals),
            "removed_papers": dg.MetadataValue.md(
                "\n".join(f"- {e['paper_id']} ({e['action']}): {e['reason']}" for e in removals[:50])
                or "none"
            ),
            # ids that left without a removal: merged into another work (a DOI found later), never a missing source
            "ids_merged_away": dg.MetadataValue.json(gone[:50]),
            "by_origin": dg.MetadataValue.json(catalogue.origin_counts(records)),
            "ingest_batch": batch if new_ids else "none (no new papers)",
            "rejected": len(result.rejected) + len(intake),
            "rejected_by_reason": dg.MetadataValue.json(
                dict(Counter(r.reason for r in result.rejected) + Counter(r["reason"] for r in intake))
            ),
            "by_source": dg.MetadataValue.json(dict(by_source)),
            "table": str(tables.PAPERS.path()),
            "sample": dg.MetadataValue.md(tables.markdown_sample(frame, SAMPLE_COLUMNS)),
        },
        data_version=dg.DataVersion(tables.content_hash(frame, ["paper_id", "content_hash"])),
    )


@dg.asset_check(asset=papers, description="paper ids are unique and every paper has a title")
def papers_unique_and_titled() -> dg.AssetCheckResult:
    frame = tables.read(tables.PAPERS)
    if frame is None:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "papers table missing"})
    duplicates = frame.height - frame["paper_id"].n_unique()
    untitled = int(frame.filter(pl.col("title").is_null() | (pl.col("title").str.strip_chars() == "")).height)
    return dg.AssetCheckResult(
        passed=duplicates == 0 and untitled == 0,
        metadata={"duplicate_ids": duplicates, "untitled": untitled, "papers": frame.height},
    )


ASSETS = [seed_papers, openalex_works, arxiv_works, local_papers, papers]
CHECKS = [papers_unique_and_titled]


def build_resources() -> dict:
    return {
        "corpus": CorpusResource(),
        "openalex": OpenAlexResource(api_key=env_secret("OPENALEX_API_KEY", missing=None)),
        "arxiv": ArxivResource(),
    }
