"""The partitioning axes: ingest batches (one per batch of new papers) and the benchmark's provider × question
shard."""

from __future__ import annotations

import dagster as dg

from evals import registry

INGEST_BATCHES = dg.DynamicPartitionsDefinition(name="ingest_batches")
INGEST_BATCH_TAG = "lumina/ingest_batch"  # a run tag naming the batch that `papers` assigns new papers to

PROVIDERS = dg.StaticPartitionsDefinition(registry.partition_keys())
SHARDS = dg.DynamicPartitionsDefinition(name="benchmark_shards")
PROVIDER_SHARDS = dg.MultiPartitionsDefinition({"provider": PROVIDERS, "shard": SHARDS})


def provider_shard_key(provider: str, shard: str) -> str:
    return str(dg.MultiPartitionKey({"provider": provider, "shard": shard}))


def split_key(key: str) -> tuple[str, str]:
    keys = PROVIDER_SHARDS.get_partition_key_from_str(key).keys_by_dimension
    return keys["provider"], keys["shard"]


def current_provider_shards() -> list[str]:
    """Every provider × each shard of the stored questions, shard by shard: what a whole benchmark run computes."""
    from evals import shards
    from lumina_assets.core import tables

    questions = tables.read(tables.QUESTIONS)
    keys = shards.current(questions["question_id"].to_list()) if questions is not None else []
    return [provider_shard_key(p, s) for s in keys for p in PROVIDERS.get_partition_keys()]
