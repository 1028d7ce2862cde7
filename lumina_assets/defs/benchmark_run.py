"""The end of the benchmark group: one run's scores, recorded with its manifest, and the latest run's report; and
the opt-in [benchmark_batch] group: the question generator's and the judge's prompts submitted as batches (half
price), whose answers `sensors.benchmark_batches` caches before it requests the synchronous assets."""

import dagster as dg
import polars as pl

from evals import batch as batch_lib
from evals import deep_recall, defaults, ledger, manifest, pooled, runner, runs, scored_run, shards
from evals.comparison import Primary
from evals.matching import PaperMatcher
from evals.report import SCORES_HEADLINE, write_report
from evals.report_plots import image_markdown
from evals.setup import build_judge, judge_agreement, left_out_question_ids, load_papers, load_passages
from lumina_assets.core import settings, tables
from lumina_assets.core.ids import short_hash
from lumina_assets.defs.benchmark_common import (
    BATCH_GROUP,
    GROUP,
    JudgeBatchConfig,
    ScoresConfig,
    SyntheticQuestionsConfig,
    data_version,
    setup_failure,
    stored_questions,
)
from lumina_assets.defs.partitions import PROVIDER_SHARDS, split_key
from resources.llm import LLMResource


@dg.asset(
    group_name=GROUP,
    code_version="2",
    deps=[dg.AssetKey("judgments"), dg.AssetKey("questions")],
    check_specs=[dg.AssetCheckSpec("judge_failure_rate", asset="benchmark_scores")],
    pool="llm",  # an LLM judge validates on held-out pairs here
)
def benchmark_scores(
    context: dg.AssetExecutionContext, config: ScoresConfig, judge_llm: LLMResource
) -> dg.MaterializeResult:
    """One benchmark run's scores: per provider, page size, depth and question set, n scored questions, provider
    failures, judged CR / CP and the qrels measures with CIs, and paired tests for the headline comparisons."""
    question_frame = stored_questions()
    with setup_failure():
        judge, _ = build_judge(judge_llm, config)
    run = manifest.select_run(
        config.providers,
        depths=config.depths,
        page_sizes=config.page_sizes,
        judge_name=judge.name,
        question_frame=question_frame,
    )
    for name, reason in run.excluded.items():
        context.log.info(f"{name} not in this run: {reason}")
    skipped = manifest.skipped_providers(config.providers)
    run.excluded = {k: v for k, v in run.excluded.items() if k not in skipped}
    recursive, verdicts = run.recursive, run.verdicts  # lazy scans: read a slice of questions at a time
    if recursive is None or not recursive.select(pl.len()).collect().item():
        raise dg.Failure(
            "nothing to score in this run: materialize provider_results, recursive_results and judgments for "
            f"the run's providers with the same questions and grid (left out: {run.excluded})"
        )
    primary = Primary(alpha=config.alpha)
    # the judge's calls first, so its API stays busy right after the judgments and the local scoring comes last
    with setup_failure():
        agreement = judge_agreement(judge_llm, config, llm_queries=config.validation_queries_llm)
    ledger.write_agreement(agreement)
    pooled_run = None
    if not judge.is_offline:  # each (question, paper) of every provider's top p judged once (evals.pooled)
        with setup_failure():
            pool_judge, pool_client = build_judge(judge_llm, config)
        pooled_run = pooled.pooled_run(
            recursive,
            question_frame,
            load_papers(),
            pool_judge,
            page_size=primary.page_size,
            form=config.context_form,
        )
        ledger.record_cost("pooled_judgments", None, pool_client)
    scored = scored_run.score_run(
        recursive,
        verdicts,
        question_frame,
        load_papers(),
        judged=not judge.is_offline,
        bootstrap_resamples=config.bootstrap_resamples,
        permutation_resamples=config.permutation_resamples,
        proxy_exclude=left_out_question_ids(config),
        primary=primary,
        deep=deep_recall.read(run.included),
        form=config.context_form,
    )
    for name, reason in scored.qrels_excluded.items():
        context.log.warning(f"{name} left out of the qrels measures: {reason}")
    scores, comparisons = scored.scores, scored.comparisons
    tables.write(tables.BENCHMARK_SCORES, scores)
    record = manifest.build_manifest(
        run,
        question_frame,
        depths=config.depths,
        page_sizes=config.page_sizes,
        judge_name=judge.name,
        judge_offline=judge.is_offline,
        skipped=skipped,
        matching=scored.matching,
        qrels_excluded=scored.qrels_excluded,
        token_budget=scored.token_budget,
        primary=primary.describe(),
    )
    # what `lumina benchmark replay` needs to score the run again from its snapshot alone
    record["scoring"] = {
        "judged": not judge.is_offline,
        "bootstrap_resamples": config.bootstrap_resamples,
        "permutation_resamples": config.permutation_resamples,
        "alpha": config.alpha,
        "proxy_exclude": sorted(left_out_question_ids(config)),
        "context_form": config.context_form,
    }
    if pooled_run is not None:
        record["pooled"] = pooled_run
    record["context_form"] = config.context_form
    runs.write_run(record, scores, scored.per_question, comparisons)
    runs.set_latest(record["run_id"])
    total, failed = (
        verdicts.select(
            pl.len(),
            (pl.col("relevance_failure").is_not_null() | pl.col("precision_failure").is_not_null()).sum(),
        )
        .collect()
        .row(0)
        if verdicts is not None
        else (0, 0)
    )
    rate = failed / total if total else 0.0
    check = dg.AssetCheckResult(
        check_name="judge_failure_rate",
        passed=rate <= config.max_judge_failure_rate,
        metadata={
            "failure_rate": rate,
            "failed_pairs": failed,
            "pairs": total,
            "limit": config.max_judge_failure_rate,
        },
    )
    headline = scores.filter(pl.col("question_set") != "all").select(SCORES_HEADLINE)
    return dg.MaterializeResult(
        metadata={
            "run_id": record["run_id"],
            "providers": dg.MetadataValue.json(run.included),
            "left_out": dg.MetadataValue.json(run.excluded),
            "rows": scores.height,
            "judge": judge.name,
            "judge_kappa": float(agreement["kappa"]) if agreement else float("nan"),
            "judge_agreement": agreement.get("summary", "") if agreement else "not measured",
            "primary": primary.describe(),
            "warnings": dg.MetadataValue.json(record["warnings"]),
            "matching": dg.MetadataValue.json(scored.matching),
            "scores": dg.MetadataValue.md(
                tables.markdown_sample(headline, headline.columns, rows=100, width=30)
            ),
        },
        data_version=data_version(scores),
        check_results=[check],
    )


@dg.asset(group_name=GROUP, code_version="2", deps=[benchmark_scores])
def benchmark_report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """The latest run's markdown report and PNG plots under data/reports/runs/<run id>/ (and data/reports/ as the
    latest), shown in the asset's metadata; earlier runs keep theirs."""
    latest = runs.latest()
    if latest is None:
        raise dg.Failure("no benchmark run scored yet: materialize benchmark_scores")
    record, scores, _ = runs.read_run(latest)
    options = manifest.report_options(record, runs.read_comparisons(latest))
    result = write_report(scores, out_dir=settings.reports_dir() / "runs" / latest, **options)
    write_report(scores, out_dir=settings.reports_dir(), **options)  # the latest run, where README points
    plots = {f"plot_{p.stem}": dg.MetadataValue.md(image_markdown(p, p.stem)) for p in result["plots"]}
    return dg.MaterializeResult(
        metadata={
            "run_id": latest,
            "report": dg.MetadataValue.path(str(result["report"])),
            "offline_judge": record["judge_offline"],
            "cost": dg.MetadataValue.json(options["cost"]),
            "markdown": dg.MetadataValue.md(result["markdown"]),
            **plots,
        },
        # the report without its first lines (title and generation time): the same run reads the same version
        data_version=dg.DataVersion(short_hash(result["markdown"].split("\n", 3)[-1], length=24)),
    )


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
