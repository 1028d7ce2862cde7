"""[benchmark] group: questions → provider results (provider × shard) → recursive levels → judgments → scores →
report; the work is in `evals`. This module holds the questions and per-provider assets and lists the whole group
(run config and shared helpers: `benchmark_common`; scores, report and the batch submissions: `benchmark_run`)."""

from pathlib import Path

import dagster as dg
import polars as pl

from evals import deep_recall, ledger, registry, runner, runs
from evals import questions as questions_lib
from evals import shards as shards_lib
from evals.providers import describe, http_stats
from evals.recursive import LLMRefiner, PseudoRelevanceRefiner
from evals.report import OFFLINE_JUDGE_NOT_USED, level_summary, results_sample
from evals.setup import beir_folder_candidates, build_judge, load_papers, load_passages, remember_beir_folder
from lumina_assets.core import settings, tables
from lumina_assets.defs.benchmark_common import (
    GROUP,
    JudgeConfig,
    ProviderResultsConfig,
    QuestionsConfig,
    RecursionConfig,
    SyntheticQuestionsConfig,
    UserQueriesConfig,
    data_version,
    provider_for,
    request_counters,
    run_shard,
    setup_failure,
    stored_questions,
    summary_row,
    upstream,
)
from lumina_assets.defs.benchmark_common import default_run_config as default_run_config
from lumina_assets.defs.benchmark_run import benchmark_report, benchmark_scores, judge_batch, question_batch
from lumina_assets.defs.partitions import PROVIDER_SHARDS, SHARDS, split_key
from resources.llm import LLMResource, build_llm_resources
from resources.providers import build_provider_resources


@dg.asset(group_name=GROUP, code_version="1", deps=[dg.AssetKey("passages")], pool="llm")
def synthetic_questions(
    context: dg.AssetExecutionContext, config: SyntheticQuestionsConfig, question_llm: LLMResource
) -> dg.MaterializeResult:
    """Questions generated from sampled passages, each keeping its source passage and paper (natural qrels)."""
    passages = load_passages()
    if passages is None or passages.height == 0:
        raise dg.Failure("no passages table yet: materialize the corpus and parse stages first")
    client = question_llm.get_client()
    if client.is_offline:
        context.log.warning(
            f"question LLM is {client.label}: using the offline template generator (labelled so)"
        )
    frame, failures = questions_lib.synthetic_questions(
        passages, load_papers(), n=config.count, seed=config.seed, llm_client=client
    )
    tables.write(tables.SYNTHETIC_QUESTIONS, frame)
    ledger.record_cost("synthetic_questions", None, client)
    return dg.MaterializeResult(
        metadata={
            "questions": frame.height,
            "generator": client.label if not client.is_offline else "offline:template",
            "failures": len(failures),
            "failure_reasons": dg.MetadataValue.json(failures[:20]),
            **client.usage.as_metadata(),
            "sample": dg.MetadataValue.md(
                tables.markdown_sample(frame, ["question_id", "text", "source_paper_id"])
            ),
            "path": str(tables.SYNTHETIC_QUESTIONS.path()),
        },
        data_version=data_version(frame),
    )


@dg.asset(group_name=GROUP, code_version="1")
def user_queries(context: dg.AssetExecutionContext, config: UserQueriesConfig) -> dg.MaterializeResult:
    """User query sets (JSONL / CSV / text) and BEIR query sets with their qrels."""
    papers = load_papers()
    configured = Path(config.beir_dir) if config.beir_dir else settings.get().paths.corpus
    beir = questions_lib.find_beir_folder(configured, papers, beir_folder_candidates())
    paths = config.paths or settings.get().benchmark.user_queries
    frame = questions_lib.gather_user_queries(
        [Path(p.strip()) for p in paths.split(",") if p.strip()],
        beir,
        beir_queries=config.beir_queries or settings.get().benchmark.beir_queries,
        seed=config.seed,
        split=config.beir_split or settings.get().benchmark.beir_splits,
        papers=papers,
        subset=config.beir_subset,
    )
    if beir is not None:
        remember_beir_folder(beir)
    tables.write(tables.USER_QUERIES, frame)
    return dg.MaterializeResult(
        metadata={
            "queries": frame.height,
            "sets": dg.MetadataValue.json(
                dict(frame.group_by("set_name").len().iter_rows()) if frame.height else {}
            ),
            "sample": dg.MetadataValue.md(tables.markdown_sample(frame, ["question_id", "text", "set_name"])),
        },
        data_version=data_version(frame),
    )


@dg.asset(group_name=GROUP, code_version="1", deps=[synthetic_questions, user_queries])
def questions(context: dg.AssetExecutionContext, config: QuestionsConfig) -> dg.MaterializeResult:
    """Every benchmark question (synthetic + user + BEIR) with its provenance and relevant paper ids, cut into
    shards (evals.shards: new questions fill new shards), each shard a partition of the per-question assets."""
    frame = questions_lib.merge_questions(
        [tables.read(tables.SYNTHETIC_QUESTIONS), tables.read(tables.USER_QUERIES)]
    )
    tables.write(tables.QUESTIONS, frame)
    shards = shards_lib.assign(frame["question_id"].to_list(), config.shard_size)
    new = [s for s in shards if not context.instance.has_dynamic_partition(SHARDS.name, s)]
    context.instance.add_dynamic_partitions(SHARDS.name, new)
    counts = dict(frame.group_by("kind").len().iter_rows()) if frame.height else {}
    return dg.MaterializeResult(
        metadata={
            "questions": frame.height,
            "shards": dg.MetadataValue.json(shards),
            "new_shards": len(new),
            "by_kind": dg.MetadataValue.json(counts),
            "with_qrels": int(frame.filter(pl.col("relevant_paper_ids").list.len() > 0).height),
            "sample": dg.MetadataValue.md(
                tables.markdown_sample(frame, ["question_id", "kind", "generator", "text"])
            ),
        },
        data_version=data_version(frame),
    )


def _skipped(context, stage: str, schema: dict, reason: str) -> dg.MaterializeResult:
    """A provider that cannot run (no key, no index): its table empty, the reason in the metadata."""
    name = split_key(context.partition_key)[0]
    context.log.warning(f"{name} skipped: {reason}")
    tables.write(getattr(tables, stage.upper()), pl.DataFrame(schema=schema), name)
    return dg.MaterializeResult(
        metadata={"skipped": True, "reason": reason, "questions": 0}, data_version=dg.DataVersion("skipped")
    )


@dg.asset(
    group_name=GROUP,
    code_version="2",
    partitions_def=PROVIDER_SHARDS,
    deps=[questions, dg.AssetKey("passage_index")],
    pool="benchmark_search",
    required_resource_keys=registry.resource_keys(),
)
def provider_results(
    context: dg.AssetExecutionContext, config: ProviderResultsConfig
) -> dg.MaterializeResult:
    """Zero-shot (level 0) contexts for one shard of questions from one provider; a provider without a key is
    skipped."""
    name, shard = split_key(context.partition_key)
    question_frame = stored_questions()
    provider, skipped = provider_for(context)
    if provider is None:
        ledger.mark_skipped("provider_results", name, skipped)
        return _skipped(context, "provider_results", runner.PROVIDER_RESULT_SCHEMA, skipped)
    ledger.clear_skipped("provider_results", name)
    settings_stamp = {"provider": describe(provider), "code": runs.CODE_VERSION}
    levels, shard_metadata, version = run_shard(
        context,
        "provider_results",
        tables.PROVIDER_RESULTS,
        runner.PROVIDER_RESULT_SCHEMA,
        question_frame,
        lambda part: {"k": config.k, **settings_stamp},
        lambda part: runner.query_provider(provider, part, config.k),
    )
    if name in registry.local_provider_names():  # Recall@100 from a separate top-100 search
        run_shard(
            context,
            "deep_recall",
            tables.TableSpec("deep_recall", "benchmark", partitioned=True),
            deep_recall.SCHEMA,
            question_frame,
            lambda part: settings_stamp,
            lambda part: deep_recall.collect(provider, part),
        )
    ledger.record_requests("provider_results", context.partition_key, request_counters(provider))
    lengths = pl.col("contexts").list.len()
    counts = summary_row(
        levels,
        mean_contexts=lengths.mean(),
        questions_without_contexts=(lengths == 0).sum(),
        errors=pl.col("error").is_not_null().sum(),
    )
    errors = levels.filter(pl.col("error").is_not_null()).select("error").head(5).collect()
    return dg.MaterializeResult(
        metadata={
            **shard_metadata,
            "k": config.k,
            "mean_contexts": float(counts["mean_contexts"] or 0.0),
            "questions_without_contexts": int(counts["questions_without_contexts"]),
            "errors": int(counts["errors"]),
            "error_samples": dg.MetadataValue.json(errors["error"].to_list()),
            **http_stats(provider),
            **(provider.stats() if hasattr(provider, "stats") else {}),
            "sample": dg.MetadataValue.md(results_sample(levels.head(5).collect(), question_frame)),
        },
        data_version=version,
    )


@dg.asset(
    group_name=GROUP,
    code_version="2",
    partitions_def=PROVIDER_SHARDS,
    deps=[provider_results],
    pool="benchmark_search",
    required_resource_keys={"question_llm", "judge_llm", *registry.resource_keys()},
)
def recursive_results(context: dg.AssetExecutionContext, config: RecursionConfig) -> dg.MaterializeResult:
    """Levels 0..max(depths) for every page size, for one shard of questions from one provider: the Recursion
    Prompt (the judge's LLM by default, or offline pseudo-relevance feedback) refines the query from the previous
    level's results; each level stores the top p of all levels fused by reciprocal rank, and the merged pool's
    size and papers."""
    name, shard = split_key(context.partition_key)
    provider, skipped = provider_for(context)
    if provider is None:
        runs.write_stamp("recursive_results", name, {"skipped": skipped})
        return _skipped(context, "recursive_results", runner.RECURSIVE_SCHEMA, skipped)
    question_frame = stored_questions()
    llm_choice = (config.llm or settings.get().benchmark.recursion_llm).lower()
    client = getattr(
        context.resources, "question_llm" if llm_choice == "question" else "judge_llm"
    ).get_client()
    refiner = PseudoRelevanceRefiner() if client.is_offline else LLMRefiner(client)
    if client.is_offline:
        context.log.warning(
            f"recursion LLM is {client.label}: offline pseudo-relevance feedback, labelled so"
        )
    level0 = upstream("provider_results", context, runner.PROVIDER_RESULT_SCHEMA)
    depths, page_sizes = sorted(set(config.depths)), sorted(set(config.page_sizes))

    def levels(part: pl.DataFrame) -> pl.DataFrame:
        frame = runner.run_recursive(
            provider, part, level0.collect(), page_sizes=page_sizes, max_depth=max(depths), refiner=refiner
        )
        return frame.filter(pl.col("depth").is_in(depths))

    def stamp_provider(current: list[str]) -> None:  # what the provider's levels are, for evals.runs
        complete = shards_lib.complete("recursive_results", name, question_frame)
        runs.stamp_recursive(
            name,
            questions=runs.questions_fingerprint(question_frame) if complete else "incomplete",
            depths=depths,
            page_sizes=page_sizes,
            refinement=refiner.method,
            data=shards_lib.fingerprint("recursive_results", name, current),
            provider_stats=provider.stats() if hasattr(provider, "stats") else {},
            provider_info=describe(provider),
        )

    table, shard_metadata, version = run_shard(
        context,
        "recursive_results",
        tables.RECURSIVE_RESULTS,
        runner.RECURSIVE_SCHEMA,
        question_frame,
        lambda part: {
            "depths": depths,
            "page_sizes": page_sizes,
            "refinement": refiner.method,
            "provider": describe(provider),
            "level0": shards_lib.stamp_of("provider_results", name, shard).get("data"),
            "code": runs.CODE_VERSION,
        },
        levels,
        after=stamp_provider,
    )
    ledger.record_cost("recursive_results", context.partition_key, client)
    ledger.record_requests("recursive_results", context.partition_key, request_counters(provider))
    summary = level_summary(table).collect()
    counts = summary_row(
        table,
        rows=pl.len(),
        refinement_failures=pl.col("failure").is_not_null().sum(),
        provider_errors=pl.col("error").is_not_null().sum(),
    )
    return dg.MaterializeResult(
        metadata={
            **shard_metadata,
            "refinement": refiner.method,
            "rows": counts["rows"],
            "refinement_failures": int(counts["refinement_failures"]),
            "provider_errors": int(counts["provider_errors"]),
            "recursion_llm": client.label,
            **client.usage.as_metadata("recursion_llm"),
            **http_stats(provider),
            "levels": dg.MetadataValue.md(tables.markdown_sample(summary, summary.columns, rows=50)),
        },
        data_version=version,
    )


@dg.asset(
    group_name=GROUP, code_version="2", partitions_def=PROVIDER_SHARDS, deps=[recursive_results], pool="llm"
)
def judgments(
    context: dg.AssetExecutionContext, config: JudgeConfig, judge_llm: LLMResource
) -> dg.MaterializeResult:
    """CR and CP verdicts for every unique (question, context) pair of one provider's levels for one shard of
    questions."""
    name, shard = split_key(context.partition_key)
    question_frame = stored_questions()
    if not shards_lib.path("recursive_results", name, shard).exists():
        skipped = runs.read_stamp("recursive_results", name).get("skipped")
        if not skipped:
            raise dg.Failure(f"no recursive results for {context.partition_key} yet: materialize them first")
        return _skipped(context, "judgments", runner.JUDGMENT_SCHEMA, skipped)
    recursive = upstream("recursive_results", context, runner.RECURSIVE_SCHEMA)
    with setup_failure():
        judge, client = build_judge(judge_llm, config)
    if judge.is_offline:  # no LLM judge: offline runs compare on qrels alone
        context.log.info(f"judgments for {name}: no LLM judge configured; {OFFLINE_JUDGE_NOT_USED}")

    def judge_part(part: pl.DataFrame) -> pl.DataFrame:
        if judge.is_offline:
            return pl.DataFrame(schema=runner.JUDGMENT_SCHEMA)
        items = runner.judge_inputs(recursive.collect(), part, form=config.context_form)
        context.log.info(f"judging {len(items)} unique (question, context) pairs with {judge.name}")
        return runner.judgments_frame(judge.judge_many(items), name)

    def stamp_provider(current: list[str]) -> None:
        levels = shards_lib.fingerprint("judgments", name, current, field="levels")
        runs.stamp_judgments(name, judge=judge.name, recursive=levels)

    verdicts, shard_metadata, version = run_shard(
        context,
        "judgments",
        tables.JUDGMENTS,
        runner.JUDGMENT_SCHEMA,
        question_frame,
        lambda part: {
            "judge": judge.name,
            "levels": shards_lib.stamp_of("recursive_results", name, shard).get("data"),
            "form": config.context_form,
            "code": runs.CODE_VERSION,
        },
        judge_part,
        after=stamp_provider,
    )
    ledger.record_cost("judgments", context.partition_key, client)
    counts = summary_row(
        verdicts,
        pairs=pl.len(),
        relevant=pl.col("relevant").sum(),
        relevance_failures=pl.col("relevance_failure").is_not_null().sum(),
        precision_failures=pl.col("precision_failure").is_not_null().sum(),
    )
    failures = (
        verdicts.filter(pl.col("relevance_failure").is_not_null() | pl.col("precision_failure").is_not_null())
        .select("relevance_failure", "precision_failure")
        .head(5)
        .collect()
    )
    return dg.MaterializeResult(
        metadata={
            **shard_metadata,
            "judge": judge.name,
            "offline_judge": judge.is_offline,
            **({"reason": f"no LLM judge configured; {OFFLINE_JUDGE_NOT_USED}"} if judge.is_offline else {}),
            "pairs": counts["pairs"],
            "relevant": int(counts["relevant"] or 0),
            "relevance_failures": int(counts["relevance_failures"]),
            "precision_failures": int(counts["precision_failures"]),
            "failure_samples": dg.MetadataValue.json(failures.to_dicts()),
            **(client.usage.as_metadata("judge_llm") if client is not None else {}),
        },
        data_version=version,
    )


@dg.asset_check(asset=questions, description="question ids are unique and every question has text")
def questions_are_wellformed() -> dg.AssetCheckResult:
    frame = tables.read(tables.QUESTIONS)
    if frame is None:
        return dg.AssetCheckResult(passed=False, metadata={"reason": "no questions table"})
    duplicates = frame.height - frame["question_id"].n_unique()
    empty = int(frame.filter(pl.col("text").str.strip_chars().str.len_chars() == 0).height)
    return dg.AssetCheckResult(
        passed=frame.height > 0 and duplicates == 0 and empty == 0,
        metadata={"questions": frame.height, "duplicate_ids": duplicates, "empty_texts": empty},
    )


ASSETS = [
    synthetic_questions,
    user_queries,
    questions,
    provider_results,
    recursive_results,
    judgments,
    benchmark_scores,
    benchmark_report,
    judge_batch,
    question_batch,
]
CHECKS = [questions_are_wellformed]


def build_resources() -> dict:
    return {**build_llm_resources(), **build_provider_resources()}
