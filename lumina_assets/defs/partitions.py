"""Ingest batches: the only partitioning axis. One partition per batch of new papers, never one per paper."""

from __future__ import annotations

import dagster as dg

INGEST_BATCHES = dg.DynamicPartitionsDefinition(name="ingest_batches")
INGEST_BATCH_TAG = "lumina/ingest_batch"  # a run tag naming the batch that `papers` assigns new papers to

PROVIDERS = dg.StaticPartitionsDefinition(
    ["lumina", "lumina_recursive", "bm25", "semantic_scholar", "google_scholar", "exa"]
)
