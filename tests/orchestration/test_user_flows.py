"""README's flows as a user walks them (issue 13), on a temporary data dir and instance:

1. `LUMINA_CORPUS=<folder> lumina demo` (corpus, parsing, index) through the named jobs the demo runs;
2. `LUMINA_CORPUS` unset, a PDF dropped into the inbox: one sensor tick, its run, and the eager automation the
   daemon would run after it. The catalogue keeps the folder's papers, only the new paper's passages are embedded,
   and a search finds old and new papers;
3. a second folder with `LUMINA_CORPUS=<other folder>`: both folders' papers stay searchable, only new passages are
   embedded;
4. `lumina remove` takes one paper out of the catalogue and the index, records it, and a re-ingest of its folder
   does not bring it back.

Real PDFs and parsing; the embedder is the hashing one (counted), so the test is about the flow, not the model."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter

import dagster as dg
import polars as pl
import pytest
from hashing_embedder import CountingEmbedder, embedder_resource

from lumina_assets.core import settings, tables
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from lumina_assets.indexing import lancedb_tables as indexing
from sensors.inbox import build_inbox_sensor

pytestmark = pytest.mark.slow

FOLDER_A = ("N18-3011.pdf", "2304.02623v1.pdf")
INBOX_PDF = "2020.acl-main.207.pdf"
FOLDER_B = ("pasa.pdf",)
GROUPS = ["corpus", "parsing", "index"]


COUNTER = CountingEmbedder()


def _definitions() -> dg.Definitions:
    """The shipped Definitions (assets, checks, named jobs, loggers), with the counting embedder."""
    from lumina_assets.definitions import defs

    resources = {**defs.resources, "embedder": embedder_resource(COUNTER)}
    return dg.Definitions(
        assets=list(defs.assets),
        asset_checks=list(defs.asset_checks),
        resources=resources,
        jobs=list(defs.jobs),
        loggers=dict(defs.loggers),
    )


def _folder(shared_data, root, names) -> str:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(shared_data / "pdfs" / name, root / name)
    return str(root)


def _demo(defs, instance, monkeypatch, corpus: str) -> list:
    """`LUMINA_CORPUS=<corpus> lumina demo --groups corpus,parsing,index`, as the CLI runs it."""
    from lumina_assets.cli.runner import run_graph

    monkeypatch.setenv("LUMINA_CORPUS", corpus)
    try:
        reports = run_graph(defs, instance, groups=GROUPS)
    finally:
        monkeypatch.delenv("LUMINA_CORPUS")
    failed = [(r.job, r.partition, r.error) for r in reports if not r.success]
    assert not failed, failed
    return reports


def _automate(defs, instance, cursor):
    """Evaluate the shipped automation conditions and run what they request, one run per partition in topological
    order (as the daemon groups them), until nothing more is requested."""
    order = {key: i for i, key in enumerate(defs.resolve_asset_graph().toposorted_asset_keys)}
    requested = []
    for _ in range(8):
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        cursor = result.cursor
        by_partition: dict = {}
        for key in order:
            for partition in result.get_requested_partitions(key):
                by_partition.setdefault(partition, []).append(key)
        if not by_partition:
            return requested, cursor
        for partition in sorted(by_partition, key=lambda p: (p is None, p or "")):
            keys = sorted(by_partition[partition], key=order.get)
            requested += [(k.to_user_string(), partition) for k in keys]
            outcome = dg.materialize(
                [*defs.assets, *defs.asset_checks],
                selection=keys,
                partition_key=partition,
                instance=instance,
                resources=defs.resources,
                raise_on_error=False,
            )
            assert outcome.success, f"automation run for {keys} [{partition}] failed"
    raise AssertionError(f"automation still requesting: {requested}")


def _new_embed_texts(paper_ids: set[str]) -> list[str]:
    """What the index embeds for these papers' passages (title-prefixed passage text)."""
    passages = tables.read_all(tables.PASSAGES).filter(pl.col("paper_id").is_in(list(paper_ids)))
    rows = indexing.passage_rows(passages, tables.read(tables.PAPERS), indexing.IndexConfig())
    return sorted(rows["embed_text"].to_list())


def _passage_embeds(texts: list[str]) -> list[str]:
    """Embedded passage texts (the encoder also sees the passages' sentences, for evidence highlighting)."""
    passages = set(
        indexing.passage_rows(
            tables.read_all(tables.PASSAGES), tables.read(tables.PAPERS), indexing.IndexConfig()
        )["embed_text"].to_list()
    )
    return sorted(t for t in texts if t in passages)


def _search_finds(paper_id: str) -> bool:
    """A query made of a distinctive passage of the paper brings that paper back."""
    from lumina_assets.search.engine import SearchEngine

    passages = tables.read_all(tables.PASSAGES).filter(pl.col("paper_id") == paper_id)
    text = max(passages["text"].to_list(), key=len)
    engine = SearchEngine(settings.lancedb_uri(), COUNTER, refresh_seconds=0)
    hits = engine.search(" ".join(text.split()[:40]), k=5)
    return paper_id in {h.paper_id for h in hits}


def _ids_from(origin_prefix: str) -> set[str]:
    records = tables.read(tables.CATALOGUE_RECORDS)
    papers = set(tables.read(tables.PAPERS)["paper_id"].to_list())
    raw = set(records.filter(pl.col("origin").str.starts_with(origin_prefix))["paper_id"].to_list())
    return raw & papers


def test_corpus_folder_then_inbox_then_second_folder(shared_data, data_dir, tmp_path, monkeypatch):
    started = time.perf_counter()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    defs = _definitions()
    instance = dg.DagsterInstance.ephemeral()
    folder_a = _folder(shared_data, tmp_path / "folder_a", FOLDER_A)

    # 1. LUMINA_CORPUS=folder_a lumina demo: named jobs, batch in the run tags.
    reports = _demo(defs, instance, monkeypatch, folder_a)
    assert [r.job for r in reports] == ["crawl_corpus", "parse_batch", "index_passages"]
    runs = {r.job_name: r for r in instance.get_runs()}
    assert set(runs) == {"crawl_corpus", "parse_batch", "index_passages"}
    assert runs["parse_batch"].tags["dagster/partition"] in instance.get_dynamic_partitions(
        INGEST_BATCHES.name
    )
    papers_a = set(tables.read(tables.PAPERS)["paper_id"].to_list())
    assert len(papers_a) == 2
    first_embeds = _passage_embeds(COUNTER.texts)
    assert first_embeds == _new_embed_texts(papers_a)

    # 2. LUMINA_CORPUS unset (make ui), a PDF dropped into the inbox: the sensor's run, then the automation.
    _, automation_cursor = _automate(defs, instance, None)  # a deployment already ticking
    COUNTER.texts.clear()
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True)
    shutil.copyfile(shared_data / "pdfs" / INBOX_PDF, inbox / INBOX_PDF)
    os.utime(inbox / INBOX_PDF, (time.time() - 60, time.time() - 60))
    tick = build_inbox_sensor()(dg.build_sensor_context(instance=instance))
    [request] = tick.run_requests
    instance.add_dynamic_partitions(INGEST_BATCHES.name, [request.tags[INGEST_BATCH_TAG]])
    ingest = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=request.asset_selection,
        instance=instance,
        resources=defs.resources,
        tags=request.tags,
    )
    assert ingest.success
    requested, _ = _automate(defs, instance, automation_cursor)
    assert ("passage_index", None) in requested and (
        "parsed_papers",
        request.tags[INGEST_BATCH_TAG],
    ) in requested

    papers = set(tables.read(tables.PAPERS)["paper_id"].to_list())
    new = papers - papers_a
    assert papers_a < papers and len(new) == 1, "the folder's papers must stay in the catalogue"
    assert _ids_from("corpus:") == papers_a and _ids_from("inbox") == new
    # Only the new paper's passages were embedded, each once; titles: only the new paper's.
    embedded = _passage_embeds(COUNTER.texts)
    assert embedded == _new_embed_texts(new)
    assert max(Counter(embedded).values()) == 1
    title_of = dict(tables.read(tables.PAPERS).select("paper_id", "title").iter_rows())
    others = [t for t in COUNTER.texts if t not in set(embedded)]
    assert {title_of[p] for p in papers_a}.isdisjoint(others)
    index_meta = ingest.asset_materializations_for_node("papers")[0].metadata
    assert index_meta["papers"].value == 3 and index_meta["new_papers"].value == 1
    db = defs.resources["lancedb"].connect()
    indexed = indexing.open_table(db, indexing.PASSAGES_TABLE).to_arrow()
    assert set(indexed.column("paper_id").to_pylist()) == papers
    for paper_id in papers:
        assert _search_finds(paper_id), paper_id

    # 3. A second folder: LUMINA_CORPUS=folder_b lumina demo. Both folders and the inbox paper stay.
    COUNTER.texts.clear()
    folder_b = _folder(shared_data, tmp_path / "folder_b", FOLDER_B)
    _demo(defs, instance, monkeypatch, folder_b)
    after_b = set(tables.read(tables.PAPERS)["paper_id"].to_list())
    from_b = after_b - papers
    assert papers < after_b and len(from_b) == 1
    assert _passage_embeds(COUNTER.texts) == _new_embed_texts(from_b)
    for paper_id in after_b:
        assert _search_finds(paper_id), paper_id
    print(
        f"\nflow wall time (folder, inbox + automation, second folder): {time.perf_counter() - started:.1f}s"
    )

    # 4. lumina remove: out of the catalogue and the index, recorded, and kept out when its folder comes again.
    from lumina_assets.cli import catalogue as catalogue_cli
    from lumina_assets.cli import main as cli_main

    gone = sorted(papers_a)[0]
    monkeypatch.setattr("lumina_assets.definitions.defs", defs)
    monkeypatch.setattr("lumina_assets.cli.runner.instance", lambda: instance)
    assert cli_main.main(["remove", gone, "--dry-run"]) == 0
    assert gone in set(tables.read(tables.PAPERS)["paper_id"].to_list())
    assert (
        catalogue_cli.run_remove(
            type("Args", (), {"paper_ids": [gone], "dry_run": False, "reason": "duplicate upload"})()
        )
        == 0
    )
    assert gone not in set(tables.read(tables.PAPERS)["paper_id"].to_list())
    removed = tables.read(tables.REMOVED_PAPERS).row(0, named=True)
    assert (removed["paper_id"], removed["action"], removed["reason"]) == (gone, "remove", "duplicate upload")
    assert removed["origins"].startswith("corpus:")
    indexed = indexing.open_table(db, indexing.PASSAGES_TABLE).to_arrow()
    assert gone not in set(indexed.column("paper_id").to_pylist())
    assert not _search_finds_safe(gone)
    assert [r.job_name for r in instance.get_runs(limit=1)] == ["curate_catalogue"]
    COUNTER.texts.clear()
    _demo(defs, instance, monkeypatch, folder_a)
    assert gone not in set(tables.read(tables.PAPERS)["paper_id"].to_list())
    rejected = tables.read(tables.REJECTED_PAPERS).filter(pl.col("paper_id") == gone)
    assert rejected["reason"].to_list() == ["removed"]
    assert COUNTER.texts == []  # nothing new, nothing re-embedded


def _search_finds_safe(paper_id: str) -> bool:
    """Whether a search made of the paper's own text still returns it (False when it is gone)."""
    from lumina_assets.search.engine import SearchEngine

    passages = tables.read_all(tables.PASSAGES).filter(pl.col("paper_id") == paper_id)
    text = max(passages["text"].to_list(), key=len)
    engine = SearchEngine(settings.lancedb_uri(), COUNTER, refresh_seconds=0)
    return paper_id in {h.paper_id for h in engine.search(" ".join(text.split()[:40]), k=20)}
