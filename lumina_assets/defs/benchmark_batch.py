"""[benchmark_batch] group, opt-in: the question generator's and the judge's prompts submitted as batches (half
price); `sensors.benchmark_batches` requests the synchronous assets once every answer is cached."""

import dagster as dg
import polars as pl

from evals import batch as batch_lib
from evals import defaults, pooled, runner, shards
from evals.matching import PaperMatcher
from evals.setup import load_papers, load_passages
from lumina_assets.core import tables
from lumina_assets.defs.benchmark_config import BATCH_GROUP, JudgeBatchConfig, SyntheticQuestionsConfig
from lumina_assets.defs.partitions import PROVIDER_SHARDS, split_key
from resources.llm import LLMResource


@dg.asset(group_name=BATCH_GROUP, code_version="1", deps=[dg.AssetKey("passages")], pool="llm")
def question_batch(
    context: dg.AssetExecutionContext, config: SyntheticQuestionsConfig, question_llm: LLMResource
) -> dg.MaterializeResult:
    """Submits the question generator's prompts for the passages `synthetic_questions` will sample (same count and
    seed) as one batch; `judge_batch_sensor` watches it and requests `synthetic_questions` with this config once
    every answer is in the LLM cache."""
    passages = load_passages()
    client = question_llm.get_client()
    if passages is None or passages.height == 0 or client.is_offline:
        reason = "no question LLM configured" if client.is_offline else "no passages table yet"
        return dg.MaterializeResult(metadata={"skipped": True, "reason": reason, "requests": 0})
    requests = batch_lib.question_requests(passages, load_papers(), client, n=config.count, seed=config.seed)
    if not requests:
        return dg.MaterializeResult(metadata={"requests": 0, "state": "every answer is already cached"})
    run_config = {"ops": {"synthetic_questions": {"config": {"count": config.count, "seed": config.seed}}}}
    records = batch_lib.submit_all(client, requests, partition="", role="questions", run_config=run_config)
    return dg.MaterializeResult(
        metadata={**_submitted(records[0], requests=len(requests)), "batches": len(records)}
    )


@dg.asset(
    group_name=BATCH_GROUP,
    code_version="3",
    partitions_def=PROVIDER_SHARDS,
    deps=[dg.AssetKey("recursive_results")],
    pool="llm",
)
def judge_batch(
    context: dg.AssetExecutionContext, config: JudgeBatchConfig, judge_llm: LLMResource
) -> dg.MaterializeResult:
    """Submits the judge prompts of one provider's levels for one shard of questions whose answers are not cached
    yet (OpenAI Batch API / Anthropic Message Batches, half price), with the pooled judging's graded prompts of its
    top p at depth 0, and records the batches' ids; `judge_batch_sensor` watches them, puts their answers in the
    LLM cache, resubmits what they did not answer, and requests `judgments` for the partition once all are in. The
    synchronous judge stays the default: this asset runs only when asked for."""
    name, shard = split_key(context.partition_key)
    level_file = shards.path("recursive_results", name, shard)
    question_frame = tables.read(tables.QUESTIONS)
    client = judge_llm.get_client()
    if not level_file.exists() or question_frame is None or client.is_offline:
        reason = "no LLM judge configured" if client.is_offline else "no recursive results for this partition"
        return dg.MaterializeResult(metadata={"skipped": True, "reason": reason, "requests": 0})
    part = shards.part(question_frame, shard)
    rows = pl.read_parquet(level_file)
    items = runner.judge_inputs(rows, part, form=config.context_form)
    pool = pooled.build_pool(
        rows,
        part,
        page_size=defaults.PRIMARY_PAGE_SIZE,
        depth=defaults.PRIMARY_DEPTH,
        matcher=PaperMatcher.from_papers(load_papers()),
        form=config.context_form,
    )
    requests = batch_lib.judge_requests(items, client, graded=pool, seen=set())
    counts = {"pairs": len(items), "pool_items": len(pool), "requests": len(requests)}
    records = batch_lib.submit_all(
        client,
        requests,
        partition=context.partition_key,
        max_requests=config.max_requests,
        max_bytes=config.max_bytes,
    )
    if not records:
        return dg.MaterializeResult(metadata={**counts, "state": "every answer is already cached"})
    for record in records:
        context.log.info(f"batch {record['id']}: {len(record['requests'])} judge requests for {name}")
    return dg.MaterializeResult(
        metadata={
            **_submitted(records[0], **counts),
            "batches": len(records),
            "batch_ids": dg.MetadataValue.json([r["id"] for r in records]),
        }
    )


def _submitted(record: dict, **counts: int) -> dict:
    return {
        "batch_id": record["id"],
        "backend": record["backend"],
        "model": record["model"],
        **counts,
        "status": record["status"],
        "state": record["state"],
    }
