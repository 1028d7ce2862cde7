"""Inbox sensor: new PDFs -> one ingest batch + one run, idempotent across ticks, restarts and lost cursors."""

from __future__ import annotations

import json
import os
import shutil
import time

import dagster as dg
import polars as pl

from lumina_assets.core import settings
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from sensors.inbox import INBOX_ASSETS, build_inbox_sensor, evaluate_inbox, scan_inbox

SMALL_PDFS = ("N18-3011.pdf", "2304.02623v1.pdf")


def _drop(shared_data, inbox, name, *, as_name=None, age_s=60.0):
    """Copy a real PDF into the inbox and age it past the settle window."""
    target = inbox / (as_name or name)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared_data / "pdfs" / name, target)
    old = time.time() - age_s
    os.utime(target, (old, old))
    return target


def _tick(sensor, cursor=None, instance=None):
    context = dg.build_sensor_context(cursor=cursor, instance=instance)
    return sensor(context)


def test_new_pdfs_make_one_batch_and_one_run(shared_data, data_dir):
    inbox = settings.inbox_dir()
    for name in SMALL_PDFS:
        _drop(shared_data, inbox, name)
    sensor = build_inbox_sensor()
    result = _tick(sensor)
    assert isinstance(result, dg.SensorResult)
    assert len(result.run_requests) == 1
    request = result.run_requests[0]
    batch_key = request.tags[INGEST_BATCH_TAG]
    assert request.run_key == batch_key
    assert set(request.asset_selection) == set(INBOX_ASSETS)
    assert request.tags["lumina/inbox_files"] == "2"
    [partitions_request] = result.dynamic_partitions_requests
    assert partitions_request.partitions_def_name == INGEST_BATCHES.name
    assert list(partitions_request.partition_keys) == [batch_key]
    assert set(json.loads(result.cursor)["seen"]) == set(SMALL_PDFS)


def test_second_tick_and_restart_pick_nothing_up(shared_data, data_dir):
    inbox = settings.inbox_dir()
    _drop(shared_data, inbox, SMALL_PDFS[0])
    first = _tick(build_inbox_sensor())
    again = _tick(build_inbox_sensor(), cursor=first.cursor)  # a fresh definition = a restarted daemon
    assert not again.run_requests
    assert "no new PDFs" in again.skip_reason.skip_message


def test_lost_cursor_reproduces_the_same_run_key(shared_data, data_dir):
    """Dagster drops a run request whose run_key it has already launched, so a reset cursor is harmless."""
    inbox = settings.inbox_dir()
    for name in SMALL_PDFS:
        _drop(shared_data, inbox, name)
    first = _tick(build_inbox_sensor())
    replay = _tick(build_inbox_sensor(), cursor=None)
    assert replay.run_requests[0].run_key == first.run_requests[0].run_key


def test_only_the_new_file_goes_into_the_next_batch(shared_data, data_dir):
    inbox = settings.inbox_dir()
    _drop(shared_data, inbox, SMALL_PDFS[0])
    first = _tick(build_inbox_sensor())
    _drop(shared_data, inbox, SMALL_PDFS[1])
    second = _tick(build_inbox_sensor(), cursor=first.cursor)
    assert len(second.run_requests) == 1
    assert second.run_requests[0].tags["lumina/inbox_files"] == "1"
    assert second.run_requests[0].run_key != first.run_requests[0].run_key
    assert set(json.loads(second.cursor)["seen"]) == set(SMALL_PDFS)


def test_a_replaced_file_is_ingested_again_and_a_removed_one_forgotten(shared_data, data_dir):
    inbox = settings.inbox_dir()
    target = _drop(shared_data, inbox, SMALL_PDFS[0], as_name="paper.pdf")
    first = _tick(build_inbox_sensor())
    _drop(shared_data, inbox, SMALL_PDFS[1], as_name="paper.pdf", age_s=30)  # same name, new content
    second = _tick(build_inbox_sensor(), cursor=first.cursor)
    assert len(second.run_requests) == 1
    target.unlink()
    third = _tick(build_inbox_sensor(), cursor=second.cursor)
    assert not third.run_requests
    assert json.loads(third.cursor)["seen"] == {}


def test_files_still_being_copied_wait_for_the_next_tick(shared_data, data_dir):
    inbox = settings.inbox_dir()
    _drop(shared_data, inbox, SMALL_PDFS[0], age_s=0)
    assert scan_inbox(inbox, settle_seconds=10) == []
    assert not evaluate_inbox(inbox, None, settle_seconds=10).run_requests
    later = evaluate_inbox(inbox, None, settle_seconds=10, now=time.time() + 11)
    assert len(later.run_requests) == 1


def test_first_tick_on_a_backlog_launches_one_batch(shared_data, data_dir):
    inbox = settings.inbox_dir()
    for i in range(40):
        _drop(shared_data, inbox, SMALL_PDFS[0], as_name=f"backlog/{i:03d}.pdf")
    result = _tick(build_inbox_sensor())
    assert len(result.run_requests) == 1
    assert result.run_requests[0].tags["lumina/inbox_files"] == "40"
    capped = evaluate_inbox(inbox, None, max_files=25)
    assert capped.run_requests[0].tags["lumina/inbox_files"] == "25"
    rest = evaluate_inbox(inbox, capped.cursor, max_files=25)
    assert rest.run_requests[0].tags["lumina/inbox_files"] == "15"
    assert not evaluate_inbox(inbox, rest.cursor, max_files=25).run_requests


def test_sensor_run_assigns_the_new_papers_to_the_batch(shared_data, data_dir):
    """The run the sensor asks for, executed: `papers` files the inbox papers under the sensor's batch key."""
    from lumina_assets.defs import corpus
    from resources.arxiv import ArxivResource
    from resources.corpus import CorpusResource
    from resources.openalex import OpenAlexResource
    from resources.parsing import ParsingConfig

    inbox = settings.inbox_dir()
    _drop(shared_data, inbox, SMALL_PDFS[0])
    instance = dg.DagsterInstance.ephemeral()
    result = _tick(build_inbox_sensor(), instance=instance)
    request = result.run_requests[0]
    batch_key = request.tags[INGEST_BATCH_TAG]
    instance.add_dynamic_partitions(INGEST_BATCHES.name, [batch_key])
    assets = [a for a in corpus.ASSETS if set(a.keys) & set(INBOX_ASSETS)]
    outcome = dg.materialize(
        assets,
        instance=instance,
        tags=request.tags,
        resources={
            "corpus": CorpusResource(),
            "parsing": ParsingConfig(),
            "openalex": OpenAlexResource(),
            "arxiv": ArxivResource(),
        },
    )
    assert outcome.success
    table = pl.read_parquet(settings.tables_dir() / "papers.parquet")
    inbox_rows = table.filter(pl.col("source") == "local_pdf")
    assert inbox_rows.height == 1
    assert inbox_rows["ingest_batch"].to_list() == [batch_key]
    assert batch_key in instance.get_dynamic_partitions(INGEST_BATCHES.name)
