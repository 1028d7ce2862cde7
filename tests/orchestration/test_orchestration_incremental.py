"""One new PDF arrives: the inbox sensor makes a batch, the automation conditions carry it from `papers` through
parsing to the index, and only that paper is parsed and embedded. A run killed mid-batch and run again loses
nothing and duplicates nothing. Real PDFs, the real embedding model, the real Definitions' automation conditions."""

from __future__ import annotations

import os
import shutil
import time

import dagster as dg
import polars as pl
import pytest

from lumina_assets.core import settings, tables
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.embedding import Embedder
from resources.embedder import EmbedderResource
from sensors.inbox import build_inbox_sensor

FIRST_PDF = "2304.02623v1.pdf"  # 4 pages
SECOND_PDF = "N18-3011.pdf"  # 8 pages

pytestmark = pytest.mark.slow


class CountingEmbedder:
    """The real embedder, recording every text it is asked to embed."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.texts: list[str] = []

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    def encode(self, texts, **kwargs):
        self.texts += list(texts)
        return self.inner.encode(texts, **kwargs)


COUNTER: CountingEmbedder | None = None


class CountingEmbedderResource(EmbedderResource):
    def get_embedder(self):
        return COUNTER


@pytest.fixture(scope="module")
def counting_embedder() -> CountingEmbedder:
    global COUNTER
    COUNTER = CountingEmbedder(Embedder(batch_size=32))
    return COUNTER


def _definitions() -> dg.Definitions:
    """The shipped stages and their automation conditions, with the embedder swapped for the counting one."""
    from lumina_assets.defs import corpus
    from lumina_assets.defs import indexing as index
    from lumina_assets.defs import parsing as parse

    assets, checks, resources = [], [], {}
    for stage in (corpus, parse, index):
        assets += stage.ASSETS
        checks += stage.CHECKS
        resources.update(stage.build_resources())
    resources["embedder"] = CountingEmbedderResource()
    return dg.Definitions(assets=assets, asset_checks=checks, resources=resources)


def _drop(shared_data, name: str) -> None:
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared_data / "pdfs" / name, inbox / name)
    old = time.time() - 60
    os.utime(inbox / name, (old, old))


def _execute(defs, instance, keys, partition_key=None, tags=None) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=list(keys),
        partition_key=partition_key,
        instance=instance,
        resources=defs.resources,
        tags=dict(tags or {}),
        raise_on_error=False,
    )


def _automate(defs, instance, cursor=None, max_rounds: int = 8):
    """Evaluate the shipped automation conditions and run what they request (topological order, one run per
    partition, as the daemon groups them) until they request nothing."""
    order = {key: i for i, key in enumerate(defs.resolve_asset_graph().toposorted_asset_keys)}
    requested: list[tuple[str, str | None]] = []
    for _ in range(max_rounds):
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        cursor = result.cursor
        by_partition: dict[str | None, list[dg.AssetKey]] = {}
        for key in order:
            for partition in result.get_requested_partitions(key) if key in order else ():
                by_partition.setdefault(partition, []).append(key)
        if not by_partition:
            return requested, cursor
        # Partitioned steps first: the unpartitioned index reads what they write.
        for partition in sorted(by_partition, key=lambda p: (p is None, p or "")):
            keys = sorted(by_partition[partition], key=order.get)
            requested += [(k.to_user_string(), partition) for k in keys]
            outcome = _execute(defs, instance, keys, partition)
            assert outcome.success, f"automation run for {keys} [{partition}] failed"
    raise AssertionError(f"automation still requesting after {max_rounds} rounds: {requested}")


def _ingest(defs, instance, cursor, automation_cursor=None):
    """One inbox sensor tick and the run it requests, as the daemon does it: the new partition exists before the
    ingestion run has written the batch's papers, and the automation sensor may tick in between."""
    tick = build_inbox_sensor()(dg.build_sensor_context(cursor=cursor, instance=instance))
    [request] = tick.run_requests
    batch = request.tags[INGEST_BATCH_TAG]
    instance.add_dynamic_partitions(INGEST_BATCHES.name, [batch])
    if automation_cursor is not None:
        early = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=automation_cursor)
        premature = [
            key.to_user_string()
            for key in (dg.AssetKey("pdf_files"), dg.AssetKey("parsed_papers"), dg.AssetKey("passages"))
            if batch in early.get_requested_partitions(key)
        ]
        assert not premature, f"{premature} requested for {batch} before `papers` assigned its papers"
        automation_cursor = early.cursor
    assert _execute(defs, instance, request.asset_selection, None, request.tags).success
    return batch, tick.cursor, automation_cursor


def _embed_texts(batch: str) -> set[str]:
    passages = tables.read(tables.PASSAGES, batch)
    papers = tables.read(tables.PAPERS)
    return set(indexing.passage_rows(passages, papers, indexing.IndexConfig())["embed_text"].to_list())


def test_one_new_pdf_is_parsed_and_embedded_alone(shared_data, data_dir, counting_embedder):
    defs = _definitions()
    instance = dg.DagsterInstance.ephemeral()

    # The automation sensor is already ticking when the first PDF arrives (as in a running deployment).
    requested, automation_cursor = _automate(defs, instance)
    assert requested == []
    _drop(shared_data, FIRST_PDF)
    first_batch, sensor_cursor, automation_cursor = _ingest(defs, instance, None, automation_cursor)
    requested, automation_cursor = _automate(defs, instance, automation_cursor)
    assert ("passage_index", None) in requested
    assert {("parsed_papers", first_batch), ("passages", first_batch)} <= set(requested)
    first_texts = _embed_texts(first_batch)
    assert first_texts and first_texts <= set(counting_embedder.texts)

    counting_embedder.texts.clear()
    _drop(shared_data, SECOND_PDF)
    second_batch, _, automation_cursor = _ingest(defs, instance, sensor_cursor, automation_cursor)
    assert second_batch != first_batch
    requested, _ = _automate(defs, instance, automation_cursor)

    # Parsing ran for the new batch only.
    parsed_partitions = {p for k, p in requested if k in ("pdf_files", "parsed_papers", "passages")}
    assert parsed_partitions == {second_batch}, requested
    assert ("passage_index", None) in requested
    new_parsed = tables.read(tables.PARSED_PAPERS, second_batch)
    assert new_parsed.height == 1 and new_parsed["status"].to_list() == ["ok"]

    # The embedder saw the new paper's passages and nothing of the first paper.
    second_texts = _embed_texts(second_batch)
    seen = set(counting_embedder.texts)
    assert second_texts <= seen
    assert not (seen & first_texts)
    new_paper = new_parsed["paper_id"][0]
    papers = tables.read(tables.PAPERS)
    new_title = papers.filter(pl.col("paper_id") == new_paper)["title"][0]
    passage_texts = [t for t in counting_embedder.texts if t in second_texts]
    assert len(passage_texts) == len(second_texts)  # each passage embedded once
    # everything else embedded is the new paper's: its title / abstract vectors, and the sentences of its passages
    # (stored sentence vectors); nothing of the first paper
    others = [t for t in counting_embedder.texts if t not in second_texts]
    new_abstract = papers.filter(pl.col("paper_id") == new_paper)["abstract"][0] or ""

    def of_new_paper(text: str) -> bool:
        return new_title in text or text in new_abstract or any(text in passage for passage in second_texts)

    assert all(of_new_paper(t) for t in others), [t for t in others if not of_new_paper(t)][:3]

    # The index holds both papers' passages exactly once.
    table = indexing.open_table(defs.resources["lancedb"].connect(), indexing.PASSAGES_TABLE)
    ids = table.to_arrow().column("passage_id").to_pylist()
    all_passages = tables.read_all(tables.PASSAGES)
    assert sorted(ids) == sorted(all_passages["passage_id"].unique().to_list())


KILL_SWITCH_SCRIPT = """
import os, sys, time
sys.path.insert(0, {tests_dir!r})
import dagster as dg
import test_orchestration_incremental as t
from lumina_assets.indexing.embedding import Embedder
from resources.embedder import EmbedderResource

from lumina_assets.indexing import lancedb_tables

def stop_before_papers(*args, **kwargs):  # the papers table is written after the passages are
    open({marker!r}, "w").write("passages written")
    time.sleep(600)

lancedb_tables._index_papers = stop_before_papers
t.COUNTER = t.CountingEmbedder(Embedder(batch_size=32))
defs = t._definitions()
instance = dg.DagsterInstance.get()
assert t._execute(defs, instance, [dg.AssetKey("pdf_files"), dg.AssetKey("parsed_papers"), dg.AssetKey("passages")],
                  {batch!r}).success
t._execute(defs, instance, [dg.AssetKey("passage_index")])
"""


def test_run_killed_mid_batch_then_rerun_loses_and_duplicates_nothing(
    shared_data, data_dir, tmp_path, counting_embedder, monkeypatch
):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()  # on disk, shared with the process that gets killed
    _drop(shared_data, FIRST_PDF)
    _drop(shared_data, SECOND_PDF)
    defs = _definitions()
    batch, _, _ = _ingest(defs, instance, None)
    marker = tmp_path / "killed_here"
    script = KILL_SWITCH_SCRIPT.format(tests_dir=str(Path(__file__).parent), marker=str(marker), batch=batch)
    worker = subprocess.Popen(
        [sys.executable, "-c", script],
        start_new_session=True,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert worker.poll() is None, worker.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the worker never reached the index step"
            time.sleep(0.5)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)  # mid-batch: passages written, paper rows not
        worker.wait(timeout=30)

    db = defs.resources["lancedb"].connect()
    passages = tables.read(tables.PASSAGES, batch)
    expected_ids = sorted(passages["passage_id"].unique().to_list())
    half_done = indexing.open_table(db, indexing.PASSAGES_TABLE)
    assert half_done is not None and half_done.count_rows() == len(expected_ids)
    assert indexing.open_table(db, indexing.PAPERS_TABLE) is None or (
        indexing.open_table(db, indexing.PAPERS_TABLE).count_rows() < 2
    )
    killed = [r for r in instance.get_runs() if r.status == dg.DagsterRunStatus.STARTED]
    assert killed, "the killed run should be left as STARTED (run monitoring marks it failed in a deployment)"

    # Run it again, as a retry would: the parse chain and the index.
    counting_embedder.texts.clear()
    keys = [dg.AssetKey("pdf_files"), dg.AssetKey("parsed_papers"), dg.AssetKey("passages")]
    assert _execute(defs, instance, keys, batch).success
    assert _execute(defs, instance, [dg.AssetKey("passage_index")]).success

    reparsed = tables.read(tables.PARSED_PAPERS, batch)
    assert reparsed["paper_id"].n_unique() == reparsed.height == 2
    after = tables.read(tables.PASSAGES, batch)
    assert sorted(after["passage_id"].to_list()) == expected_ids  # nothing lost, nothing twice
    ids = indexing.open_table(db, indexing.PASSAGES_TABLE).to_arrow().column("passage_id").to_pylist()
    assert sorted(ids) == expected_ids
    papers_ids = indexing.open_table(db, indexing.PAPERS_TABLE).to_arrow().column("paper_id").to_pylist()
    assert sorted(papers_ids) == sorted(reparsed["paper_id"].to_list())
    # Passages already written before the kill were not embedded again.
    assert not (set(counting_embedder.texts) & _embed_texts(batch))
