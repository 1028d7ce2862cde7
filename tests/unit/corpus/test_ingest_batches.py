"""Batch assignment (corpus.batches): a known paper keeps the batch and first_seen it was given, a new one joins the
run's batch, an edited one is counted as changed, and the inputs' fingerprint moves with any record or removal."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.batches import assign_batches, inputs_fingerprint, new_batch_key
from lumina_assets.corpus.catalogue import Record


def test_known_papers_keep_their_batch_and_new_ones_join_this_run():
    first = assign_batches(
        [Paper("p1", "One"), Paper("p2", "Two"), Paper("p3", "Three")], None, batch="b1", now="t1"
    )
    assert first.new_ids == ["p1", "p2", "p3"] and first.changed == 0 and first.left == []
    previous = pl.DataFrame(first.rows)
    second = assign_batches(
        [Paper("p1", "One"), Paper("p2", "Two, edited"), Paper("p4", "Four")], previous, batch="b2", now="t2"
    )
    by_id = {row["paper_id"]: row for row in second.rows}
    assert (by_id["p1"]["ingest_batch"], by_id["p1"]["first_seen"]) == ("b1", "t1")
    assert (by_id["p2"]["ingest_batch"], by_id["p2"]["first_seen"]) == ("b1", "t1")
    assert (by_id["p4"]["ingest_batch"], by_id["p4"]["first_seen"]) == ("b2", "t2")
    assert second.new_ids == ["p4"] and second.changed == 1 and second.left == ["p3"]
    assert by_id["p1"]["content_hash"] == {r["paper_id"]: r for r in first.rows}["p1"]["content_hash"]


def test_inputs_fingerprint_moves_with_a_record_its_origin_or_a_removal():
    records = [Record("openalex", Paper("p1", "One")), Record("inbox", Paper("p2", "Two"))]
    base = inputs_fingerprint(records, set())
    assert inputs_fingerprint(list(reversed(records)), set()) == base  # order does not matter
    assert inputs_fingerprint([Record("arxiv", Paper("p1", "One")), records[1]], set()) != base
    assert inputs_fingerprint([Record("openalex", Paper("p1", "One!")), records[1]], set()) != base
    assert inputs_fingerprint(records, {"p9"}) != base


def test_a_tagged_run_names_its_batch():
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert new_batch_key("inbox-abc", now) == "inbox-abc"
    assert new_batch_key(None, now) == "batch-20260102-030405"
