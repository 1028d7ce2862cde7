"""The partitioning axes: ingest batches (one partition per batch of new papers, never one per paper) and the
benchmark's providers (`evals.registry`, modes included)."""

from __future__ import annotations

import dagster as dg

from evals import registry

INGEST_BATCHES = dg.DynamicPartitionsDefinition(name="ingest_batches")
INGEST_BATCH_TAG = "lumina/ingest_batch"  # a run tag naming the batch that `papers` assigns new papers to

PROVIDERS = dg.StaticPartitionsDefinition(registry.partition_keys())
