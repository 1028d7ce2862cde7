"""A blocking check holds its batch out of the index across runs, as the automation sensor runs them.

Inside one run a failed blocking check stops the steps after it (tests/assets/test_guards_fire.py). Under the shipped
Definitions' automation the index runs later, in its own run, and reads every batch: here a batch whose
`no_empty_passages` failed is materialized tick by tick (its passages file is written), the index that the next tick
requests leaves its papers out and says why in its metadata, a run of the index started by hand does too, and once
the batch is fixed and re-run with its checks passing, the next tick's index takes it. The catalogue is written
directly and reported to the instance as the ingest run would; parsing and indexing are the shipped assets, the
embedder the hashing one (the test is about the flow, not the model)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import httpx
import pytest
from hashing_embedder import embedder_resource
from orchestration_servers import free_port, stop_process_group

from lumina_assets.core import tables
from lumina_assets.core.schemas import PAPERS_TABLE_SCHEMA, rows_to_table
from lumina_assets.defs.partitions import INGEST_BATCHES
from lumina_assets.indexing import lancedb_tables as indexing

GOOD, BAD = "batch-good", "batch-bad"


def _definitions() -> dg.Definitions:
    """The shipped Definitions' assets, checks and automation conditions, with the hashing embedder."""
    from lumina_assets.definitions import defs

    return dg.Definitions(
        assets=list(defs.assets),
        asset_checks=list(defs.asset_checks),
        resources={**defs.resources, "embedder": embedder_resource()},
    )


def _paper(paper_id: str, batch: str, title: str | None, abstract: str | None) -> dict:
    return {
        "paper_id": paper_id,
        "title": title,
        "abstract": abstract,
        "source": "beir",
        "ingest_batch": batch,
        "pdf_urls": [],
        "authors": [],
        "keywords": [],
        "references": [],
    }


GOOD_PAPERS = [
    _paper("beir-t:1", GOOD, "Aspirin and stroke", "Aspirin lowers the risk of stroke in older adults."),
    _paper("beir-t:2", GOOD, "Statins and the liver", "Statins rarely harm the liver."),
]
BAD_PAPERS = [
    _paper("beir-t:3", BAD, "Vitamin D and bone density", "Vitamin D supplements raise bone density."),
    _paper("beir-t:hollow", BAD, None, None),  # no title, no abstract, no PDF: no passage
]


def _ingest(instance, batch: str, rows: list[dict]) -> None:
    """What the ingest run leaves behind: the batch partition, the catalogue with the batch's papers, and the
    `papers` materialization the automation conditions react to."""
    instance.add_dynamic_partitions(INGEST_BATCHES.name, [batch])
    tables.write(tables.PAPERS, rows_to_table(rows, PAPERS_TABLE_SCHEMA))
    instance.report_runless_asset_event(dg.AssetMaterialization("papers"))


def _automate(defs, instance, cursor=None) -> tuple[list[tuple[str, str | None, bool]], object]:
    """Evaluate the automation conditions and run what each tick requests (one run per partition, partitioned
    steps first, as the daemon groups them) until nothing more is requested; returns (asset, partition, run
    succeeded) for every request."""
    order = {key: i for i, key in enumerate(defs.resolve_asset_graph().toposorted_asset_keys)}
    requested = []
    for _ in range(10):
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
            outcome = _run(defs, instance, keys, partition)
            requested += [(k.to_user_string(), partition, outcome.success) for k in keys]
    raise AssertionError(f"automation still requesting: {requested}")


def _run(defs, instance, keys, partition=None) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=keys,
        partition_key=partition,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )


def _indexed_papers(defs) -> set[str]:
    table = indexing.open_table(defs.resources["lancedb"].connect(), indexing.PASSAGES_TABLE)
    return set(table.to_arrow().column("paper_id").to_pylist()) if table is not None else set()


def _latest_index_metadata(instance) -> dict:
    event = instance.get_latest_materialization_event(dg.AssetKey("passage_index"))
    return {name: value.value for name, value in event.asset_materialization.metadata.items()}


def _row_count_check(instance) -> dg.AssetCheckEvaluation:
    record = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("passage_index"), "passage_index_row_count")
    )
    return record.event.dagster_event.event_specific_data


def test_a_batch_whose_blocking_check_failed_stays_out_of_the_index_until_fixed(data_dir):
    defs = _definitions()
    instance = dg.DagsterInstance.ephemeral()

    requested, cursor = _automate(defs, instance)  # the sensor is ticking before anything arrives
    assert requested == []
    _ingest(instance, GOOD, GOOD_PAPERS)
    requested, cursor = _automate(defs, instance, cursor)
    assert ("passages", GOOD, True) in requested and ("passage_index", None, True) in requested
    assert _indexed_papers(defs) == {"beir-t:1", "beir-t:2"}

    # A bad batch: tick by tick its parse chain runs; `passages` writes its file, then its blocking check fails.
    _ingest(instance, BAD, GOOD_PAPERS + BAD_PAPERS)
    requested, cursor = _automate(defs, instance, cursor)
    assert ("passages", BAD, False) in requested  # the run failed on the blocking check ...
    written = tables.read(tables.PASSAGES, BAD)
    assert written is not None and "beir-t:3" in written["paper_id"].to_list()  # ... after writing the file
    # A later tick requested the index (its upstream changed); it ran and left the held batch out.
    assert ("passage_index", None, True) in requested
    assert _indexed_papers(defs) == {"beir-t:1", "beir-t:2"}
    metadata = _latest_index_metadata(instance)
    assert metadata["held_papers"] == 2
    assert f"`{BAD}` (2 papers): `passages:no_empty_passages` failed" in metadata["held_batches"]
    assert "beir-t:hollow" in metadata["held_batches"]  # the check's own reason, naming the paper
    # the check on the batch (what the UI shows on passages[batch]) says the batch is held
    [info] = [
        i
        for i in instance.event_log_storage.get_asset_check_partition_info(
            [dg.AssetCheckKey(dg.AssetKey("passages"), "no_empty_passages")]
        )
        if i.partition_key == BAD
    ]
    assert info.latest_execution_status.value == "FAILED"
    # the index's row count check agrees with what the index was given (the held batch is not "missing")
    assert _row_count_check(instance).passed

    # An index run started by hand holds the batch too.
    assert _run(defs, instance, [dg.AssetKey("passage_index")]).success
    assert _indexed_papers(defs) == {"beir-t:1", "beir-t:2"}
    requested, cursor = _automate(
        defs, instance, cursor
    )  # a tick sees that run (the sensor ticks every 30 s)
    assert ("passage_index", None, True) not in requested

    # Fixed: the hollow record gets its abstract and the batch is re-run by hand; its checks pass.
    fixed = [
        *GOOD_PAPERS,
        BAD_PAPERS[0],
        _paper("beir-t:hollow", BAD, "Zinc and colds", "Zinc shortens colds."),
    ]
    tables.write(tables.PAPERS, rows_to_table(fixed, PAPERS_TABLE_SCHEMA))
    keys = [dg.AssetKey("pdf_files"), dg.AssetKey("parsed_papers"), dg.AssetKey("passages")]
    assert _run(defs, instance, keys, BAD).success
    requested, cursor = _automate(defs, instance, cursor)
    assert ("passage_index", None, True) in requested  # the next tick takes it
    assert _indexed_papers(defs) == {"beir-t:1", "beir-t:2", "beir-t:3", "beir-t:hollow"}
    metadata = _latest_index_metadata(instance)
    assert metadata["held_papers"] == 0 and metadata["held_batches"] == "_none_"
    indexed = indexing.open_table(defs.resources["lancedb"].connect(), indexing.PASSAGES_TABLE).count_rows()
    assert indexed == tables.read_all(tables.PASSAGES)["passage_id"].n_unique()
    assert _row_count_check(instance).passed


def test_a_held_batch_is_released_when_its_papers_leave_the_catalogue(data_dir):
    """Removed rather than fixed: once the catalogue no longer has the batch's papers, nothing is held."""
    defs = _definitions()
    instance = dg.DagsterInstance.ephemeral()
    _, cursor = _automate(defs, instance)
    _ingest(instance, BAD, BAD_PAPERS)
    requested, _ = _automate(defs, instance, cursor)
    assert ("passages", BAD, False) in requested
    assert _run(defs, instance, [dg.AssetKey("passage_index")]).success
    assert _latest_index_metadata(instance)["held_papers"] == 2 and _indexed_papers(defs) == set()

    tables.write(tables.PAPERS, rows_to_table(GOOD_PAPERS, PAPERS_TABLE_SCHEMA))  # the bad batch removed
    assert _run(defs, instance, [dg.AssetKey("passage_index")]).success
    metadata = _latest_index_metadata(instance)
    assert metadata["held_papers"] == 0 and metadata["held_batches"] == "_none_"


def test_every_blocking_check_of_the_batch_assets_is_read():
    """The hold reads every blocking check the per-batch assets declare, each evaluated per batch partition."""
    from lumina_assets.defs import parsing
    from lumina_assets.defs.batch_holds import blocking_check_keys

    keys = blocking_check_keys(parsing.ASSETS)
    assert [key.to_user_string() for key in keys] == [
        "parsed_papers:parse_failure_rate",
        "passages:no_empty_passages",
    ]
    specs = [spec for asset in parsing.ASSETS for spec in asset.check_specs if spec.key in keys]
    assert all(spec.partitions_def == INGEST_BATCHES for spec in specs)


UI_QUERY = """
query {
  held: assetNodes(assetKeys: [{path: ["passages"]}]) {
    assetChecksOrError { ... on AssetChecks { checks {
      name
      executionForLatestMaterialization { status evaluation { description partition } }
      partitionStatuses { ... on AssetCheckDefaultPartitionStatuses { failedPartitions succeededPartitions } }
    } } }
  }
  index: assetNodes(assetKeys: [{path: ["passage_index"]}]) {
    assetMaterializations(limit: 1) { metadataEntries { label ... on MarkdownMetadataEntry { mdStr } } }
  }
}
"""


def _ask_the_ui(port: int, server: subprocess.Popen, log: Path) -> dict:
    """The webserver's own GraphQL (what the UI's asset and check pages render), once it answers."""
    deadline = time.monotonic() + 120
    while True:
        assert server.poll() is None, log.read_text(errors="replace")[-2000:]
        try:
            httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=2).raise_for_status()
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline, "the webserver never answered"
            time.sleep(0.5)
    response = httpx.post(f"http://127.0.0.1:{port}/graphql", json={"query": UI_QUERY}, timeout=60)
    response.raise_for_status()
    body = response.json()
    assert not body.get("errors"), body["errors"]
    return body["data"]


@pytest.mark.slow
def test_the_ui_shows_the_held_batch_and_why(data_dir, tmp_path, monkeypatch):
    """`dagster-webserver` on the shipped code location, over the instance the ticks wrote: the batch's check is
    failed for that partition (passed for the good one) with its reason, and the index's metadata names it."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()  # on disk: the webserver reads it
    defs = _definitions()
    _, cursor = _automate(defs, instance)
    _ingest(instance, GOOD, GOOD_PAPERS)
    _, cursor = _automate(defs, instance, cursor)
    _ingest(instance, BAD, GOOD_PAPERS + BAD_PAPERS)
    _automate(defs, instance, cursor)

    port, log = free_port(), tmp_path / "webserver.log"
    webserver = Path(sys.executable).parent / "dagster-webserver"
    with log.open("w") as output:
        server = subprocess.Popen(
            [str(webserver), "-m", "lumina_assets.definitions", "-h", "127.0.0.1", "-p", str(port)],
            env=dict(os.environ),
            start_new_session=True,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        data = _ask_the_ui(port, server, log)
    finally:
        stop_process_group(server)

    [check] = data["held"][0]["assetChecksOrError"]["checks"]
    assert check["name"] == "no_empty_passages"
    assert check["partitionStatuses"] == {"failedPartitions": [BAD], "succeededPartitions": [GOOD]}
    evaluation = check["executionForLatestMaterialization"]["evaluation"]
    assert evaluation["partition"] == BAD
    assert (
        "beir-t:hollow" in evaluation["description"]
        and "the index leaves this batch out" in evaluation["description"]
    )
    [materialization] = data["index"][0]["assetMaterializations"]
    held = {entry["label"]: entry.get("mdStr") for entry in materialization["metadataEntries"]}[
        "held_batches"
    ]
    assert f"`{BAD}` (2 papers): `passages:no_empty_passages` failed" in held
