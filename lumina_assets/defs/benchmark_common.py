"""What the benchmark assets share: data versions, setup failures as run failures, a provider's request counters,
one provider × shard partition's computation and the partition's provider."""

import contextlib
from collections.abc import Callable
from typing import Any

import dagster as dg
import polars as pl

from evals import registry
from evals import shards as shards_lib
from evals.providers import Provider, ProviderUnavailable, http_stats
from evals.setup import SetupError
from lumina_assets.core import tables
from lumina_assets.defs.partitions import split_key


def data_version(frame: pl.DataFrame) -> dg.DataVersion:
    return dg.DataVersion(tables.content_hash(frame))


@contextlib.contextmanager
def setup_failure():
    try:
        yield
    except SetupError as exc:
        raise dg.Failure(str(exc)) from exc


def stored_questions() -> pl.DataFrame:
    question_frame = tables.read(tables.QUESTIONS)
    if question_frame is None:
        raise dg.Failure("no questions yet: materialize `questions` first")
    return question_frame


def summary_row(frame: pl.LazyFrame, **columns: pl.Expr) -> dict[str, Any]:
    """One row of named aggregates over a lazy table."""
    return frame.select(**columns).collect().row(0, named=True)


def request_counters(provider) -> dict[str, Any]:
    """A provider's HTTP counters and any price its responses stated, for this run's cost line."""
    stats = provider.stats() if hasattr(provider, "stats") else {}
    return {
        **http_stats(provider),
        **{k: v for k, v in stats.items() if k in ("reported_cost_usd", "unpriced_requests")},
    }


def run_shard(
    context: dg.AssetExecutionContext,
    stage: str,
    table: tables.TableSpec,
    schema: dict,
    question_frame: pl.DataFrame,
    stamp: Callable[[pl.DataFrame], dict[str, Any]],
    compute: Callable[[pl.DataFrame], pl.DataFrame],
    after: Callable[[list[str]], None] | None = None,
) -> tuple[pl.LazyFrame, dict[str, Any], dg.DataVersion]:
    """`compute` for the partition's shard (reused when its file and stamp match), then, under the stage's lock, the
    provider's table rewritten from its current shards and `after(current shards)`. Returns a lazy scan of the
    shard's rows, the metadata and the data version."""
    provider, shard = split_key(context.partition_key)
    part = shards_lib.part(question_frame, shard)
    reused = shards_lib.run(stage, provider, shard, part, stamp(part), compute)
    current = shards_lib.current(question_frame["question_id"].to_list())
    with shards_lib.lock(stage, provider):
        shards_lib.combine(stage, provider, current, table.path(provider), schema)
        if after:
            after(current)
    state = "reused" if reused else "computed"
    context.log.info(f"{stage}[{provider}] shard {shard} ({part.height} questions) {state}")
    file = shards_lib.path(stage, provider, shard)
    metadata = {"provider": provider, "shard": shard, "questions": part.height, "state": state}
    return pl.scan_parquet(file), metadata, dg.DataVersion(f"shard-{shards_lib.version(file)}")


def upstream(stage: str, context: dg.AssetExecutionContext, schema: dict) -> pl.LazyFrame:
    """The partition's shard of an upstream stage (empty when it is not computed)."""
    file = shards_lib.path(stage, *split_key(context.partition_key))
    return pl.scan_parquet(file) if file.exists() else pl.DataFrame(schema=schema).lazy()


def provider_for(context: dg.AssetExecutionContext) -> tuple[Provider | None, str | None]:
    """(the partition's provider, None), or (None, why it is skipped)."""
    resources = {key: getattr(context.resources, key) for key in registry.resource_keys()}
    try:
        return registry.build_provider(split_key(context.partition_key)[0], resources), None
    except ProviderUnavailable as exc:
        return None, str(exc)
