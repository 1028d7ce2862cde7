"""[benchmark_batch] group, opt-in: the question generator's and the judge's prompts submitted as one batch each
(half price); `sensors.benchmark_batches` watches the batches and requests the synchronous assets once every answer
is in the LLM cache."""

import dagster as dg

from evals import batch as batch_lib
from evals import defaults, runner
from evals.setup import load_papers, load_passages
from lumina_assets.core import tables
from lumina_assets.defs.benchmark_config import BATCH_GROUP, SyntheticQuestionsConfig
from lumina_assets.defs.partitions import PROVIDERS
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
    record = batch_lib.submit(client, requests, partition="", role="questions", run_config=run_config)
    return dg.MaterializeResult(metadata=_submitted(record, requests=len(requests)))


@dg.asset(
    group_name=BATCH_GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[dg.AssetKey("recursive_results")],
    pool="llm",
)
def judge_batch(context: dg.AssetExecutionContext, judge_llm: LLMResource) -> dg.MaterializeResult:
    """Submits the judge prompts of one provider's levels whose answers are not cached yet as one batch (OpenAI
    Batch API / Anthropic Message Batches, half price) and records its id; `judge_batch_sensor` watches it, puts
    its answers in the LLM cache, resubmits what it did not answer, and requests `judgments` once all are in. The
    synchronous judge stays the default: this asset runs only when asked for."""
    name = context.partition_key
    recursive = tables.read(tables.RECURSIVE_RESULTS, name)
    question_frame = tables.read(tables.QUESTIONS)
    client = judge_llm.get_client()
    if recursive is None or question_frame is None or client.is_offline:
        reason = "no LLM judge configured" if client.is_offline else "no recursive results for this provider"
        return dg.MaterializeResult(metadata={"skipped": True, "reason": reason, "requests": 0})
    items = runner.judge_inputs(recursive, question_frame, form=defaults.CONTEXT_FORM)
    requests = batch_lib.judge_requests(items, client)
    if not requests:
        return dg.MaterializeResult(
            metadata={"pairs": len(items), "requests": 0, "state": "every answer is already cached"}
        )
    record = batch_lib.submit(client, requests, partition=name)
    context.log.info(f"batch {record['id']}: {len(requests)} judge requests for {name}")
    return dg.MaterializeResult(metadata=_submitted(record, pairs=len(items), requests=len(requests)))


def _submitted(record: dict, **counts: int) -> dict:
    """A submitted batch's metadata: its id, backend, model and state, with the counts of what it carries."""
    return {
        "batch_id": record["id"],
        "backend": record["backend"],
        "model": record["model"],
        **counts,
        "status": record["status"],
        "state": record["state"],
    }
