"""[benchmark] group: questions → provider results (partitioned by provider) → recursive levels → judgments →
scores → report. The work is in `evals` (registry: the providers; setup: the judge; runner: query, recurse, judge,
score; manifest: what a run takes and records; report: its prose and plots; ledger: cost, skips, agreement);
these assets read the benchmark tables (core.tables), call it, write, and report counts, cost, tables and plots
in their metadata.

Why one module over 500 lines: it is the whole benchmark stage, eight assets and a check that share their run
config and partitions; each asset is short (read, call evals, write, metadata), and splitting them would scatter
one group's lineage over several files.
"""

import contextlib
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from evals import batch as batch_lib
from evals import deep_recall, defaults, ledger, manifest, pooled, registry, runner, runs, scored_run
from evals import questions as questions_lib
from evals import shards as shards_lib
from evals.comparison import Primary
from evals.providers import Provider, ProviderUnavailable, describe, http_stats
from evals.recursive import LLMRefiner, PseudoRelevanceRefiner
from evals.report import (
    OFFLINE_JUDGE_NOT_USED,
    SCORES_HEADLINE,
    failed_judgments,
    image_markdown,
    level_summary,
    results_sample,
    write_report,
)
from evals.setup import (
    SetupError,
    beir_folder_candidates,
    build_judge,
    calibration_question_ids,
    judge_agreement,
    load_papers,
    load_passages,
    remember_beir_folder,
)
from lumina_assets.core import settings, tables
from lumina_assets.core.ids import short_hash
from lumina_assets.defs.partitions import PROVIDERS
from resources.llm import LLMResource, build_llm_resources
from resources.providers import build_provider_resources

GROUP = "benchmark"
BATCH_GROUP = "benchmark_batch"  # opt-in: the whole-group jobs never submit a batch


# ---------------------------------------------------------------- config


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


class ProviderResultsConfig(dg.Config):
    """k = the largest page size; smaller page sizes are read as its top-p prefix. `shard_size` > 0 runs the
    questions in shards of that many (evals.shards): a rerun computes only new or unfinished shards."""

    k: int = max(defaults.PAGE_SIZES)
    shard_size: int = 0


class RecursionConfig(dg.Config):
    """`llm`: which LLM writes refined queries, judge (the paper's GPT-4o) or question; default LUMINA_RECURSION_LLM."""

    depths: list[int] = list(defaults.DEPTHS)
    page_sizes: list[int] = list(defaults.PAGE_SIZES)
    llm: str = ""
    shard_size: int = 0


class JudgeConfig(dg.Config):
    """Offline judge calibration: SciFact train qrels (default ../shared/data/scifact), split by query."""

    calibration_dir: str = ""
    calibration_queries: int = defaults.CALIBRATION_QUERIES
    max_attempts: int = defaults.JUDGE_MAX_ATTEMPTS
    shard_size: int = 0
    context_form: str = defaults.CONTEXT_FORM  # evals.contexts: equal | whitepaper (as ScoresConfig's)


class ScoresConfig(dg.Config):
    """One benchmark run: `providers` (empty: every provider partition whose results match this run's questions,
    grid, judge and code version), `depths` and `page_sizes` (the grid every provider must have)."""

    providers: list[str] = []
    depths: list[int] = list(defaults.DEPTHS)
    page_sizes: list[int] = list(defaults.PAGE_SIZES)
    permutation_resamples: int = 10000
    bootstrap_resamples: int = 2000
    alpha: float = defaults.ALPHA  # family-wise, for the Holm-corrected primary family
    calibration_dir: str = ""
    calibration_queries: int = defaults.CALIBRATION_QUERIES
    validation_queries_llm: int = defaults.LLM_VALIDATION_QUERIES
    max_judge_failure_rate: float = 0.05
    context_form: str = defaults.CONTEXT_FORM  # the form the judgments were made in (JudgeConfig's)


# ---------------------------------------------------------------- helpers


def _version(frame: pl.DataFrame) -> dg.DataVersion:
    """The data version: a content hash of every column, nested ones (contexts, verdicts) included."""
    return dg.DataVersion(tables.content_hash(frame))


@contextlib.contextmanager
def _setup_failure():
    """A benchmark step that cannot be set up fails the run with the reason."""
    try:
        yield
    except SetupError as exc:
        raise dg.Failure(str(exc)) from exc


def _request_counters(provider) -> dict[str, Any]:
    """A provider's HTTP counters and any price its responses stated, for this run's cost line."""
    stats = provider.stats() if hasattr(provider, "stats") else {}
    return {
        **http_stats(provider),
        **{k: v for k, v in stats.items() if k in ("reported_cost_usd", "unpriced_requests")},
    }


def _rows_of(frame: pl.DataFrame, part: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` about the questions of `part`."""
    return frame.filter(pl.col("question_id").is_in(part["question_id"].implode()))


def _sharded(
    context: dg.AssetExecutionContext,
    stage: str,
    table: tables.TableSpec,
    schema: dict,
    question_frame: pl.DataFrame,
    size: int,
    stamp,
    compute,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`compute` shard by shard (evals.shards), the shards' files combined into the partition's table; returns
    the table and the shard counts for the metadata."""
    name = context.partition_key
    shard_list = shards_lib.assign(question_frame["question_id"].to_list(), size)

    def progress(index: int, total: int, reused: bool) -> None:
        context.log.info(f"{stage}[{name}] shard {index + 1}/{total} {'reused' if reused else 'done'}")

    done = shards_lib.run(stage, name, question_frame, shard_list, stamp, compute, on_shard=progress)
    shards_lib.combine(done.paths, table.path(name), schema)
    return tables.read(table, name), done.metadata()


def _provider(context: dg.AssetExecutionContext) -> tuple[Provider | None, str | None]:
    """(the partition's provider, None), or (None, why it is skipped); built from the resources the registry
    names (the asset requires all of them: `registry.resource_keys()`)."""
    resources = {key: getattr(context.resources, key) for key in registry.resource_keys()}
    try:
        return registry.build_provider(context.partition_key, resources), None
    except ProviderUnavailable as exc:
        return None, str(exc)


# ---------------------------------------------------------------- assets


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
        data_version=_version(frame),
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
        data_version=_version(frame),
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
        data_version=_version(frame),
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
    provider, skipped = _provider(context)
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
        frame, shard_counts = _sharded(
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
    if name in registry.local_provider_names():  # Recall@100 from a separate top-100 search
        deep_recall.write(name, deep_recall.collect(provider, question_frame))
    ledger.record_requests("provider_results", name, _request_counters(provider))
    ledger.record_cost("provider_results", name, getattr(provider, "llm_client", None))
    errors = frame.filter(pl.col("error").is_not_null())
    lengths = frame["contexts"].list.len()
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "questions": frame.height,
            "k": config.k,
            "mean_contexts": float(lengths.mean()) if frame.height else 0.0,
            "questions_without_contexts": int((lengths == 0).sum()),
            "errors": errors.height,
            "error_samples": dg.MetadataValue.json(errors["error"].head(5).to_list()),
            **http_stats(provider),
            **(provider.stats() if hasattr(provider, "stats") else {}),
            **shard_counts,
            "sample": dg.MetadataValue.md(results_sample(frame, question_frame)),
        },
        data_version=_version(frame),
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
    level0 = tables.read(tables.PROVIDER_RESULTS, name)
    provider, skipped = _provider(context)
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
    level0 = level0 if level0 is not None else pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA)

    def levels(part: pl.DataFrame) -> pl.DataFrame:
        frame = runner.run_recursive(
            provider,
            part,
            level0,
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
                "level0": runs.frame_fingerprint(_rows_of(level0, part)),
                "code": runs.CODE_VERSION,
            }

        frame, shard_counts = _sharded(
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
    runs.stamp_recursive(
        name,
        questions=question_frame,
        depths=config.depths,
        page_sizes=config.page_sizes,
        refinement=refiner.method,
        levels=frame,
        provider_stats=provider.stats() if hasattr(provider, "stats") else {},
        provider_info=describe(provider),
    )
    ledger.record_cost("recursive_results", name, client)
    ledger.record_cost("recursive_results", name, getattr(provider, "llm_client", None), role="search LLM")
    ledger.record_requests("recursive_results", name, _request_counters(provider))
    summary = level_summary(frame)
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "refinement": refiner.method,
            "rows": frame.height,
            "refinement_failures": int(frame.filter(pl.col("failure").is_not_null()).height),
            "provider_errors": int(frame.filter(pl.col("error").is_not_null()).height),
            "recursion_llm": client.label,
            **client.usage.as_metadata("recursion_llm"),
            **shard_counts,
            **http_stats(provider),
            "levels": dg.MetadataValue.md(tables.markdown_sample(summary, summary.columns, rows=50)),
        },
        data_version=_version(frame),
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
    recursive = tables.read(tables.RECURSIVE_RESULTS, name)
    question_frame = tables.read(tables.QUESTIONS)
    if recursive is None or recursive.height == 0 or question_frame is None:
        tables.write(tables.JUDGMENTS, pl.DataFrame(schema=runner.JUDGMENT_SCHEMA), name)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": "no recursive results for this provider"},
            data_version=dg.DataVersion("skipped"),
        )
    with _setup_failure():
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
        levels = _rows_of(recursive, part)
        items = runner.judge_inputs(levels, part, form=config.context_form)
        context.log.info(f"judging {len(items)} unique (question, context) pairs with {judge.name}")
        return runner.judgments_frame(judge.judge_many(items), name)

    shard_counts: dict[str, Any] = {}
    if config.shard_size > 0:
        frame, shard_counts = _sharded(
            context,
            "judgments",
            tables.JUDGMENTS,
            runner.JUDGMENT_SCHEMA,
            question_frame,
            config.shard_size,
            lambda part: {
                "judge": judge.name,
                "levels": runs.frame_fingerprint(_rows_of(recursive, part)),
                "form": config.context_form,
                "code": runs.CODE_VERSION,
            },
            judge_part,
        )
    else:
        frame = judge_part(question_frame)
        tables.write(tables.JUDGMENTS, frame, name)
    runs.stamp_judgments(name, judge=judge.name, recursive=recursive)
    ledger.record_cost("judgments", name, client)
    rel_fail = int(frame["relevance_failure"].is_not_null().sum())
    cp_fail = int(frame["precision_failure"].is_not_null().sum())
    failures = failed_judgments(frame)
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "judge": judge.name,
            "offline_judge": judge.is_offline,
            "pairs": frame.height,
            "relevant": int(frame["relevant"].sum() or 0),
            "relevance_failures": rel_fail,
            "precision_failures": cp_fail,
            "failure_samples": dg.MetadataValue.json(
                failures.select("relevance_failure", "precision_failure").head(5).to_dicts()
                if failures is not None
                else []
            ),
            **(client.usage.as_metadata("judge_llm") if client is not None else {}),
            **shard_counts,
        },
        data_version=_version(frame),
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
    record = batch_lib.submit(client, requests, partition="", role="questions", run_config=run_config)
    return dg.MaterializeResult(
        metadata={
            "batch_id": record["id"],
            "backend": record["backend"],
            "model": record["model"],
            "requests": len(requests),
            "status": record["status"],
            "state": record["state"],
        }
    )


@dg.asset(
    group_name=BATCH_GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[recursive_results],
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
    return dg.MaterializeResult(
        metadata={
            "batch_id": record["id"],
            "backend": record["backend"],
            "model": record["model"],
            "pairs": len(items),
            "requests": len(requests),
            "status": record["status"],
            "state": record["state"],
        }
    )


@dg.asset(
    group_name=GROUP,
    code_version="2",
    deps=[judgments, questions],
    check_specs=[dg.AssetCheckSpec("judge_failure_rate", asset="benchmark_scores")],
    pool="llm",  # an LLM judge validates on held-out pairs here
)
def benchmark_scores(
    context: dg.AssetExecutionContext, config: ScoresConfig, judge_llm: LLMResource
) -> dg.MaterializeResult:
    """One benchmark run's scores: per provider, page size, depth and question set, n scored questions, provider
    failures, judged CR / CP and the qrels measures with CIs, and paired tests for the headline comparisons."""
    question_frame = tables.read(tables.QUESTIONS)
    if question_frame is None:
        raise dg.Failure("nothing to score: materialize questions first")
    with _setup_failure():
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
    recursive, verdicts = run.recursive, run.verdicts
    if recursive is None or not recursive.height:
        raise dg.Failure(
            "nothing to score in this run: materialize provider_results, recursive_results and judgments for "
            f"the run's providers with the same questions and grid (left out: {run.excluded})"
        )
    primary = Primary(alpha=config.alpha)
    scored = scored_run.score_run(
        recursive,
        verdicts,
        question_frame,
        load_papers(),
        judged=not judge.is_offline,
        bootstrap_resamples=config.bootstrap_resamples,
        permutation_resamples=config.permutation_resamples,
        proxy_exclude=calibration_question_ids(config),
        primary=primary,
        deep=deep_recall.read(run.included),
        form=config.context_form,
    )
    for name, reason in scored.qrels_excluded.items():
        context.log.warning(f"{name} left out of the qrels measures: {reason}")
    scores, comparisons = scored.scores, scored.comparisons
    tables.write(tables.BENCHMARK_SCORES, scores)
    with _setup_failure():
        agreement = judge_agreement(judge_llm, config, llm_queries=config.validation_queries_llm)
    ledger.write_agreement(agreement)
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
        "proxy_exclude": sorted(calibration_question_ids(config)),
        "context_form": config.context_form,
    }
    if not judge.is_offline:  # each (question, paper) of every provider's top p judged once (evals.pooled)
        with _setup_failure():
            pool_judge, pool_client = build_judge(judge_llm, config)
        record["pooled"] = pooled.pooled_run(
            recursive,
            question_frame,
            load_papers(),
            pool_judge,
            page_size=primary.page_size,
            form=config.context_form,
        )
        ledger.record_cost("pooled_judgments", None, pool_client)
    record["context_form"] = config.context_form
    runs.write_run(record, scores, scored.per_question, comparisons)
    runs.set_latest(record["run_id"])
    total = verdicts.height if verdicts is not None else 0
    failures = failed_judgments(verdicts)
    failed = failures.height if failures is not None else 0
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
        data_version=_version(scores),
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


def default_run_config(
    *,
    synthetic: int = defaults.SYNTHETIC_QUESTIONS,
    beir_queries: int = defaults.BEIR_QUERIES,
    depths: list[int] | None = None,
    page_sizes: list[int] | None = None,
    calibration_queries: int = defaults.CALIBRATION_QUERIES,
    providers: list[str] | None = None,
    beir_subset: str = defaults.BEIR_SUBSET,
    shard_size: int = 0,
) -> dict[str, Any]:
    """Run config for the whole group (the CLI and the demo shrink it); `providers` names the run's providers
    (None: every provider partition whose results match the run)."""
    depths = depths or list(defaults.DEPTHS)
    page_sizes = page_sizes or list(defaults.PAGE_SIZES)
    return {
        "ops": {
            "synthetic_questions": {"config": {"count": synthetic}},
            "user_queries": {"config": {"beir_queries": beir_queries, "beir_subset": beir_subset}},
            "provider_results": {"config": {"k": max(page_sizes), "shard_size": shard_size}},
            "recursive_results": {
                "config": {"depths": depths, "page_sizes": page_sizes, "shard_size": shard_size}
            },
            "judgments": {"config": {"calibration_queries": calibration_queries, "shard_size": shard_size}},
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
