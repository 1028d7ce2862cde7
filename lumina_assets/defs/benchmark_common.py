"""What the benchmark assets share: the data version of a table, setup failures as run failures, a provider's
request counters, sharded computation (evals.shards), a table read a slice of questions at a time, and the
partition's provider."""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from evals import registry
from evals import shards as shards_lib
from evals.providers import Provider, ProviderUnavailable, http_stats
from evals.setup import SetupError
from lumina_assets.core import tables


def data_version(frame: pl.DataFrame) -> dg.DataVersion:
    """The data version: a content hash of every column, nested ones (contexts, verdicts) included."""
    return dg.DataVersion(tables.content_hash(frame))


@contextlib.contextmanager
def setup_failure():
    """A benchmark step that cannot be set up fails the run with the reason."""
    try:
        yield
    except SetupError as exc:
        raise dg.Failure(str(exc)) from exc


def request_counters(provider) -> dict[str, Any]:
    """A provider's HTTP counters and any price its responses stated, for this run's cost line."""
    stats = provider.stats() if hasattr(provider, "stats") else {}
    return {
        **http_stats(provider),
        **{k: v for k, v in stats.items() if k in ("reported_cost_usd", "unpriced_requests")},
    }


def rows_of(frame: pl.DataFrame | pl.LazyFrame, part: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` about the questions of `part` (a lazy scan is read for those rows only)."""
    rows = frame.filter(pl.col("question_id").is_in(part["question_id"].implode()))
    return rows.collect() if isinstance(rows, pl.LazyFrame) else rows


def scan(table: tables.TableSpec, name: str | None = None) -> pl.LazyFrame | None:
    """A lazy scan of a stored table (None when it is not written yet): read a part at a time, never whole."""
    path = table.path(name)
    return pl.scan_parquet(path) if Path(path).exists() else None


def question_parts(question_frame: pl.DataFrame, size: int) -> Iterator[pl.DataFrame]:
    """The questions `size` at a time, in order."""
    for start in range(0, question_frame.height, max(size, 1)):
        yield question_frame.slice(start, size)


def sharded(
    context: dg.AssetExecutionContext,
    stage: str,
    table: tables.TableSpec,
    schema: dict,
    question_frame: pl.DataFrame,
    size: int,
    stamp,
    compute,
) -> tuple[pl.LazyFrame, dict[str, Any], dg.DataVersion]:
    """`compute` shard by shard (evals.shards), the shards' files combined into the partition's table by streaming;
    returns a lazy scan of that table (never read whole here), the shard counts for the metadata and the data
    version (of the shards' files)."""
    name = context.partition_key
    shard_list = shards_lib.assign(question_frame["question_id"].to_list(), size)

    def progress(index: int, total: int, reused: bool) -> None:
        context.log.info(f"{stage}[{name}] shard {index + 1}/{total} {'reused' if reused else 'done'}")
        # the shard's progress on the asset's partition, in the UI beside its materializations
        context.log_event(
            dg.AssetObservation(
                asset_key=context.asset_key,
                partition=name,
                metadata={
                    "shard": index + 1,
                    "shards": total,
                    "questions": len(shard_list[index]),
                    "state": "reused" if reused else "computed",
                },
            )
        )

    done = shards_lib.run(stage, name, question_frame, shard_list, stamp, compute, on_shard=progress)
    shards_lib.combine(done.paths, table.path(name), schema)
    return pl.scan_parquet(table.path(name)), done.metadata(), dg.DataVersion(f"shards-{done.version()}")


def provider_for(context: dg.AssetExecutionContext) -> tuple[Provider | None, str | None]:
    """(the partition's provider, None), or (None, why it is skipped); built from the resources the registry
    names (the asset requires all of them: `registry.resource_keys()`)."""
    resources = {key: getattr(context.resources, key) for key in registry.resource_keys()}
    try:
        return registry.build_provider(context.partition_key, resources), None
    except ProviderUnavailable as exc:
        return None, str(exc)
