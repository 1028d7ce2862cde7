"""What the benchmark group's assets share: their run config (one `dg.Config` per asset that takes one, and the
whole group's default), data versions, setup failures as run failures, and one provider × shard partition's
computation and provider."""

import contextlib
from collections.abc import Callable
from typing import Any

import dagster as dg
import polars as pl

from evals import defaults, registry
from evals import shards as shards_lib
from evals.providers import Provider, ProviderUnavailable, http_stats
from evals.setup import SetupError
from lumina_assets.core import tables
from lumina_assets.defs.partitions import split_key

GROUP = "benchmark"
BATCH_GROUP = "benchmark_batch"  # opt-in: the whole-group jobs never submit a batch


class SyntheticQuestionsConfig(dg.Config):
    """Defaults (evals.defaults) keep a demo run to a few minutes on 2 cores; raise them for a real benchmark."""

    count: int = defaults.SYNTHETIC_QUESTIONS
    seed: int = 7


class UserQueriesConfig(dg.Config):
    """User query files (JSONL / CSV / one per line), comma-separated (default: LUMINA_USER_QUERIES); a BEIR folder
    (default: LUMINA_CORPUS when it is one, else the folder of a BEIR collection in the catalogue) contributes its
    queries with their qrels from the first split of `beir_split` that has qrels (default: LUMINA_BEIR_SPLITS,
    test,dev,train): `beir_queries` 0 = all of them (or LUMINA_BEIR_QUERIES, a cap), N > 0 = a seeded sample of
    N, < 0 = none. A train-only split
    is cut by `beir_subset` (heldout, the default: never the queries Lumina may be tuned on; tuning; all)."""

    paths: str = ""
    beir_dir: str = ""
    beir_queries: int = defaults.BEIR_QUERIES
    beir_split: str = ""
    beir_subset: str = defaults.BEIR_SUBSET
    seed: int = 11


class QuestionsConfig(dg.Config):
    """`shard_size`: questions per new shard (evals.shards); recorded shards never change."""

    shard_size: int = defaults.SHARD_SIZE


class ProviderResultsConfig(dg.Config):
    """k = the largest page size; smaller page sizes are read as its top-p prefix."""

    k: int = max(defaults.PAGE_SIZES)


class RecursionConfig(dg.Config):
    """`llm`: which LLM writes refined queries, judge (the paper's GPT-4o) or question; default LUMINA_RECURSION_LLM."""

    depths: list[int] = list(defaults.DEPTHS)
    page_sizes: list[int] = list(defaults.PAGE_SIZES)
    llm: str = ""


class JudgeConfig(dg.Config):
    """The LLM judge's tries per verdict and the context form it judges (without an LLM judge nothing is judged)."""

    max_attempts: int = defaults.JUDGE_MAX_ATTEMPTS
    context_form: str = defaults.CONTEXT_FORM  # evals.contexts: equal | whitepaper (as ScoresConfig's)


class JudgeBatchConfig(dg.Config):
    """`judge_batch`: the judge's prompts (and the pooled judging's graded prompts) of one provider × shard, cut
    into batches of at most `max_requests` requests and `max_bytes` bytes of input (0: the API's documented
    limits, evals.batch.LIMITS)."""

    max_requests: int = 0
    max_bytes: int = 0
    context_form: str = defaults.CONTEXT_FORM


class ScoresConfig(dg.Config):
    """One benchmark run: `providers` (empty: every provider partition whose results match this run's questions,
    grid, judge and code version), `depths` and `page_sizes` (the grid every provider must have)."""

    providers: list[str] = []
    depths: list[int] = list(defaults.DEPTHS)
    page_sizes: list[int] = list(defaults.PAGE_SIZES)
    permutation_resamples: int = 10000
    bootstrap_resamples: int = 2000
    alpha: float = defaults.ALPHA  # family-wise, for the Holm-corrected primary family
    # the LLM judge's validation on BEIR train qrels (default SciFact): the folder, and the queries per half of its
    # seeded split (the judge validates on the second half; names kept so existing run configs still load)
    calibration_dir: str = ""
    calibration_queries: int = defaults.CALIBRATION_QUERIES
    validation_queries_llm: int = defaults.LLM_VALIDATION_QUERIES
    max_judge_failure_rate: float = 0.05
    context_form: str = defaults.CONTEXT_FORM  # the form the judgments were made in (JudgeConfig's)


def default_run_config(
    *,
    synthetic: int = defaults.SYNTHETIC_QUESTIONS,
    beir_queries: int = defaults.BEIR_QUERIES,
    depths: list[int] | None = None,
    page_sizes: list[int] | None = None,
    calibration_queries: int = defaults.CALIBRATION_QUERIES,
    providers: list[str] | None = None,
    beir_subset: str = defaults.BEIR_SUBSET,
    shard_size: int = defaults.SHARD_SIZE,
) -> dict[str, Any]:
    """Run config for the whole group; `providers` None: every provider partition whose results match the run."""
    depths = depths or list(defaults.DEPTHS)
    page_sizes = page_sizes or list(defaults.PAGE_SIZES)
    return {
        "ops": {
            "synthetic_questions": {"config": {"count": synthetic}},
            "user_queries": {"config": {"beir_queries": beir_queries, "beir_subset": beir_subset}},
            "questions": {"config": {"shard_size": shard_size}},
            "provider_results": {"config": {"k": max(page_sizes)}},
            "recursive_results": {"config": {"depths": depths, "page_sizes": page_sizes}},
            "benchmark_scores": {
                "config": {
                    "calibration_queries": calibration_queries,
                    "providers": list(providers or []),
                    "depths": depths,
                    "page_sizes": page_sizes,
                }
            },
        }
    }


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
