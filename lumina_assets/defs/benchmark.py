"""[benchmark] group: questions → provider results (partitioned by provider) → recursive levels → judgments →
scores → report. The work is in `evals` (registry: the providers; setup: the judge; runner: query, recurse, judge,
score; manifest: what a run takes and records; report: its prose and plots; ledger: cost, skips, agreement);
these assets read the benchmark tables (core.tables), call it, write, and report counts, cost, tables and plots
in their metadata. This module holds the questions and the per-provider assets and lists the whole group; its
run config is `benchmark_config`, what the assets share `benchmark_common`, scores and report `benchmark_run`,
the opt-in batch submissions `benchmark_batch`.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from evals import deep_recall, ledger, registry, runner, runs
from evals import questions as questions_lib
from evals.providers import describe, http_stats
from evals.recursive import LLMRefiner, PseudoRelevanceRefiner
from evals.report import OFFLINE_JUDGE_NOT_USED, level_summary, results_sample
from evals.setup import (
    beir_folder_candidates,
    build_judge,
    load_papers,
    load_passages,
    remember_beir_folder,
)
from lumina_assets.core import settings, tables
from lumina_assets.defs.benchmark_batch import judge_batch, question_batch
from lumina_assets.defs.benchmark_common import (
    data_version,
    provider_for,
    request_counters,
    rows_of,
    scan,
    setup_failure,
    sharded,
)
from lumina_assets.defs.benchmark_config import (
    GROUP,
    JudgeConfig,
    ProviderResultsConfig,
    RecursionConfig,
    SyntheticQuestionsConfig,
    UserQueriesConfig,
)
from lumina_assets.defs.benchmark_config import default_run_config as default_run_config
from lumina_assets.defs.benchmark_run import benchmark_report, benchmark_scores
from lumina_assets.defs.partitions import PROVIDERS
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
def questions(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Every benchmark question (synthetic + user + BEIR) with its provenance and relevant paper ids."""
    frame = questions_lib.merge_questions(
        [tables.read(tables.SYNTHETIC_QUESTIONS), tables.read(tables.USER_QUERIES)]
    )
    tables.write(tables.QUESTIONS, frame)
    counts = dict(frame.group_by("kind").len().iter_rows()) if frame.height else {}
    return dg.MaterializeResult(
        metadata={
            "questions": frame.height,
            "by_kind": dg.MetadataValue.json(counts),
            "with_qrels": int(frame.filter(pl.col("relevant_paper_ids").list.len() > 0).height),
            "sample": dg.MetadataValue.md(
                tables.markdown_sample(frame, ["question_id", "kind", "generator", "text"])
            ),
        },
        data_version=data_version(frame),
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[questions, dg.AssetKey("passage_index")],
    pool="benchmark_search",
    required_resource_keys=registry.resource_keys(),
)
def provider_results(
    context: dg.AssetExecutionContext, config: ProviderResultsConfig
) -> dg.MaterializeResult:
    """Zero-shot (level 0) contexts for every question from one provider; a provider without a key is skipped."""
    name = context.partition_key
    question_frame = tables.read(tables.QUESTIONS)
    if question_frame is None:
        raise dg.Failure("no questions yet: materialize `questions` first")
    provider, skipped = provider_for(context)
    if provider is None:
        context.log.warning(f"{name} skipped: {skipped}")
        tables.write(tables.PROVIDER_RESULTS, pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA), name)
        ledger.mark_skipped("provider_results", name, skipped)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": skipped, "questions": 0},
            data_version=dg.DataVersion("skipped"),
        )
    ledger.clear_skipped("provider_results", name)
    shard_counts: dict[str, Any] = {}
    if config.shard_size > 0:
        levels, shard_counts, version = sharded(
            context,
            "provider_results",
            tables.PROVIDER_RESULTS,
            runner.PROVIDER_RESULT_SCHEMA,
            question_frame,
            config.shard_size,
            lambda part: {"k": config.k, "provider": describe(provider), "code": runs.CODE_VERSION},
            lambda part: runner.query_provider(provider, part, config.k),
        )
    else:
        frame = runner.query_provider(provider, question_frame, config.k)
        tables.write(tables.PROVIDER_RESULTS, frame, name)
        levels, version = frame.lazy(), data_version(frame)
    if name in registry.local_provider_names():  # Recall@100 from a separate top-100 search
        deep_recall.write(name, deep_recall.collect(provider, question_frame))
    ledger.record_requests("provider_results", name, request_counters(provider))
    ledger.record_cost("provider_results", name, getattr(provider, "llm_client", None))
    lengths = pl.col("contexts").list.len()
    counts = (
        levels.select(
            pl.len().alias("questions"),
            lengths.mean().alias("mean_contexts"),
            (lengths == 0).sum().alias("questions_without_contexts"),
            pl.col("error").is_not_null().sum().alias("errors"),
        )
        .collect(engine="streaming")
        .row(0, named=True)
    )
    errors = levels.filter(pl.col("error").is_not_null()).select("error").head(5).collect()
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "questions": counts["questions"],
            "k": config.k,
            "mean_contexts": float(counts["mean_contexts"] or 0.0),
            "questions_without_contexts": int(counts["questions_without_contexts"]),
            "errors": int(counts["errors"]),
            "error_samples": dg.MetadataValue.json(errors["error"].to_list()),
            **http_stats(provider),
            **(provider.stats() if hasattr(provider, "stats") else {}),
            **shard_counts,
            "sample": dg.MetadataValue.md(results_sample(levels.head(5).collect(), question_frame)),
        },
        data_version=version,
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[provider_results],
    pool="benchmark_search",
    required_resource_keys={"question_llm", "judge_llm", *registry.resource_keys()},
)
def recursive_results(context: dg.AssetExecutionContext, config: RecursionConfig) -> dg.MaterializeResult:
    """Levels 0..max(depths) for every page size: the Recursion Prompt (the judge's LLM by default, or offline
    pseudo-relevance feedback) refines the query from the previous level's results; each level stores the top p of
    all levels fused by reciprocal rank, and the merged pool's size and papers."""
    name = context.partition_key
    question_frame = tables.read(tables.QUESTIONS)
    level0 = scan(tables.PROVIDER_RESULTS, name)  # read a shard's rows at a time
    provider, skipped = provider_for(context)
    if provider is None:
        tables.write(tables.RECURSIVE_RESULTS, pl.DataFrame(schema=runner.RECURSIVE_SCHEMA), name)
        runs.write_stamp("recursive_results", name, {"skipped": skipped})
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": skipped}, data_version=dg.DataVersion("skipped")
        )
    if question_frame is None:
        raise dg.Failure("no questions yet: materialize `questions` first")
    llm_choice = (config.llm or settings.get().benchmark.recursion_llm).lower()
    client = getattr(
        context.resources, "question_llm" if llm_choice == "question" else "judge_llm"
    ).get_client()
    refiner = PseudoRelevanceRefiner() if client.is_offline else LLMRefiner(client)
    if client.is_offline:
        context.log.warning(
            f"recursion LLM is {client.label}: offline pseudo-relevance feedback, labelled so"
        )
    level0 = level0 if level0 is not None else pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA).lazy()

    def levels(part: pl.DataFrame) -> pl.DataFrame:
        frame = runner.run_recursive(
            provider,
            part,
            rows_of(level0, part),
            page_sizes=sorted(set(config.page_sizes)),
            max_depth=max(config.depths),
            refiner=refiner,
        )
        return frame.filter(pl.col("depth").is_in(sorted(set(config.depths))))

    shard_counts: dict[str, Any] = {}
    if config.shard_size > 0:

        def stamp(part: pl.DataFrame) -> dict[str, Any]:
            return {
                "depths": sorted(set(config.depths)),
                "page_sizes": sorted(set(config.page_sizes)),
                "refinement": refiner.method,
                "provider": describe(provider),
                "level0": runs.frame_fingerprint(rows_of(level0, part)),
                "code": runs.CODE_VERSION,
            }

        table, shard_counts, version = sharded(
            context,
            "recursive_results",
            tables.RECURSIVE_RESULTS,
            runner.RECURSIVE_SCHEMA,
            question_frame,
            config.shard_size,
            stamp,
            levels,
        )
    else:
        frame = levels(question_frame)
        tables.write(tables.RECURSIVE_RESULTS, frame, name)
        table, version = frame.lazy(), data_version(frame)
    runs.stamp_recursive(
        name,
        questions=question_frame,
        depths=config.depths,
        page_sizes=config.page_sizes,
        refinement=refiner.method,
        levels=table,
        provider_stats=provider.stats() if hasattr(provider, "stats") else {},
        provider_info=describe(provider),
    )
    ledger.record_cost("recursive_results", name, client)
    ledger.record_cost("recursive_results", name, getattr(provider, "llm_client", None), role="search LLM")
    ledger.record_requests("recursive_results", name, request_counters(provider))
    summary = level_summary(table).collect(engine="streaming")
    counts = (
        table.select(
            pl.len().alias("rows"),
            pl.col("failure").is_not_null().sum().alias("refinement_failures"),
            pl.col("error").is_not_null().sum().alias("provider_errors"),
        )
        .collect(engine="streaming")
        .row(0, named=True)
    )
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "refinement": refiner.method,
            "rows": counts["rows"],
            "refinement_failures": int(counts["refinement_failures"]),
            "provider_errors": int(counts["provider_errors"]),
            "recursion_llm": client.label,
            **client.usage.as_metadata("recursion_llm"),
            **shard_counts,
            **http_stats(provider),
            "levels": dg.MetadataValue.md(tables.markdown_sample(summary, summary.columns, rows=50)),
        },
        data_version=version,
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[recursive_results],
    pool="llm",
)
def judgments(
    context: dg.AssetExecutionContext, config: JudgeConfig, judge_llm: LLMResource
) -> dg.MaterializeResult:
    """CR and CP verdicts for every unique (question, context) pair of one provider's levels."""
    name = context.partition_key
    recursive = scan(tables.RECURSIVE_RESULTS, name)  # read a shard's rows at a time
    question_frame = tables.read(tables.QUESTIONS)
    if recursive is None or recursive.select(pl.len()).collect().item() == 0 or question_frame is None:
        tables.write(tables.JUDGMENTS, pl.DataFrame(schema=runner.JUDGMENT_SCHEMA), name)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": "no recursive results for this provider"},
            data_version=dg.DataVersion("skipped"),
        )
    with setup_failure():
        judge, client = build_judge(judge_llm, config)
    if judge.is_offline:
        # The only offline judge embeds with the model Lumina retrieves with: its verdicts would favour one of the
        # providers under test, so offline runs compare providers on qrels alone and judge nothing.
        tables.write(tables.JUDGMENTS, pl.DataFrame(schema=runner.JUDGMENT_SCHEMA), name)
        runs.stamp_judgments(name, judge=judge.name, recursive=recursive)
        reason = f"no LLM judge configured; {OFFLINE_JUDGE_NOT_USED}"
        context.log.info(f"judgments for {name}: {reason}")
        return dg.MaterializeResult(
            metadata={"provider": name, "skipped": True, "reason": reason, "pairs": 0},
            data_version=dg.DataVersion(f"offline-not-judged-{runs.frame_fingerprint(recursive)}"),
        )

    def judge_part(part: pl.DataFrame) -> pl.DataFrame:
        levels = rows_of(recursive, part)
        items = runner.judge_inputs(levels, part, form=config.context_form)
        context.log.info(f"judging {len(items)} unique (question, context) pairs with {judge.name}")
        return runner.judgments_frame(judge.judge_many(items), name)

    shard_counts: dict[str, Any] = {}
    if config.shard_size > 0:
        verdicts, shard_counts, version = sharded(
            context,
            "judgments",
            tables.JUDGMENTS,
            runner.JUDGMENT_SCHEMA,
            question_frame,
            config.shard_size,
            lambda part: {
                "judge": judge.name,
                "levels": runs.frame_fingerprint(rows_of(recursive, part)),
                "form": config.context_form,
                "code": runs.CODE_VERSION,
            },
            judge_part,
        )
    else:
        frame = judge_part(question_frame)
        tables.write(tables.JUDGMENTS, frame, name)
        verdicts, version = frame.lazy(), data_version(frame)
    runs.stamp_judgments(name, judge=judge.name, recursive=recursive)
    ledger.record_cost("judgments", name, client)
    counts = (
        verdicts.select(
            pl.len().alias("pairs"),
            pl.col("relevant").sum().alias("relevant"),
            pl.col("relevance_failure").is_not_null().sum().alias("relevance_failures"),
            pl.col("precision_failure").is_not_null().sum().alias("precision_failures"),
        )
        .collect(engine="streaming")
        .row(0, named=True)
    )
    failures = (
        verdicts.filter(pl.col("relevance_failure").is_not_null() | pl.col("precision_failure").is_not_null())
        .select("relevance_failure", "precision_failure")
        .head(5)
        .collect()
    )
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "judge": judge.name,
            "offline_judge": judge.is_offline,
            "pairs": counts["pairs"],
            "relevant": int(counts["relevant"] or 0),
            "relevance_failures": int(counts["relevance_failures"]),
            "precision_failures": int(counts["precision_failures"]),
            "failure_samples": dg.MetadataValue.json(failures.to_dicts()),
            **(client.usage.as_metadata("judge_llm") if client is not None else {}),
            **shard_counts,
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


def build_resources(
    *,
    budget_usd: float = 0.0,
    budget_file: str = "",
    judge_rpm: float | None = None,
    question_rpm: float | None = None,
) -> dict:
    """The benchmark's resources; a budget (USD, with the ledger file the run's processes share) stops every LLM
    client of the run once the counted spend reaches it; `*_rpm` override the LLMs' requests per minute."""
    return {
        **build_llm_resources(
            budget_usd=budget_usd, budget_file=budget_file, judge_rpm=judge_rpm, question_rpm=question_rpm
        ),
        **build_provider_resources(),
    }
