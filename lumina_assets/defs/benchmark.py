"""[benchmark] group: questions → provider results (partitioned by provider) → recursive levels → judgments →
scores → report. Domain logic lives in `evals` (setup: providers and judges; ledger: cost, skips, agreement);
these assets read and write the benchmark tables (core.tables) and report counts, cost, tables and plots in
their metadata.

Why one module over 500 lines: it is the whole benchmark stage, eight assets and a check that share their run
config and partitions; each asset is short (read, call evals, write, metadata), and splitting them would scatter
one group's lineage over several files.
"""

import contextlib
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from evals import ledger, runner
from evals import questions as questions_lib
from evals.providers import ProviderUnavailable
from evals.recursive import LLMRefiner, PseudoRelevanceRefiner
from evals.report import image_markdown, results_sample, write_report
from evals.setup import (
    RECURSIVE_ALIAS,
    SetupError,
    build_judge,
    build_provider,
    http_stats,
    judge_agreement,
    load_papers,
    load_passages,
)
from lumina_assets.core import settings, tables
from lumina_assets.core.http import DiskCache
from lumina_assets.defs.partitions import PROVIDERS
from resources.llm import LLMResource, build_llm_resources
from resources.providers import (
    ExaResource,
    SemanticScholarResource,
    SerpApiScholarResource,
    build_provider_resources,
)

GROUP = "benchmark"


# ---------------------------------------------------------------- config


class SyntheticQuestionsConfig(dg.Config):
    """Defaults keep a demo run to a few minutes on 2 cores; raise them for a real benchmark."""

    count: int = 12
    seed: int = 7


class UserQueriesConfig(dg.Config):
    """User query files (JSONL / CSV / one per line), comma-separated; a BEIR folder (default: LUMINA_CORPUS when it
    is one) contributes `beir_queries` sampled queries with their qrels."""

    paths: str = ""
    beir_dir: str = ""
    beir_queries: int = 12
    beir_split: str = "train"
    seed: int = 11


class ProviderResultsConfig(dg.Config):
    """k = the largest page size; smaller page sizes are read as its top-p prefix."""

    k: int = 10


class RecursionConfig(dg.Config):
    depths: list[int] = [0, 1, 2, 3]
    page_sizes: list[int] = [5, 10]


class JudgeConfig(dg.Config):
    """Offline judge calibration: SciFact train qrels (default ../shared/data/scifact), split by query."""

    calibration_dir: str = ""
    calibration_queries: int = 60
    max_attempts: int = 3


class ScoresConfig(dg.Config):
    bootstrap_resamples: int = 2000
    calibration_dir: str = ""
    calibration_queries: int = 60  # must match JudgeConfig so agreement is measured on the judge that judged
    validation_queries_llm: int = 30  # an LLM judge validates on this many held-out queries' pairs (cost)
    max_judge_failure_rate: float = 0.05


# ---------------------------------------------------------------- helpers


def _hash(frame: pl.DataFrame) -> str:
    """The data version: a content hash of the flat columns, plus the nested ones (contexts, verdicts) when present."""
    simple = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
    if frame.height == 0:
        return "empty"
    nested = (
        frame.select([c for c in frame.columns if c not in simple]).to_dicts()
        if len(simple) < frame.width
        else []
    )
    base = tables.content_hash(frame, simple) if simple else "none"
    return DiskCache.key_for(base, nested)[:24] if nested else base


@contextlib.contextmanager
def _setup_failure():
    """A benchmark step that cannot be set up fails the run with the reason."""
    try:
        yield
    except SetupError as exc:
        raise dg.Failure(str(exc)) from exc


def _provider(name: str, *resources) -> tuple[Any, str | None]:
    """(provider, None), or (None, why it is skipped); `resources` in build_provider's keyword order."""
    keys = ("question_llm", "semantic_scholar", "google_scholar", "exa")
    try:
        return build_provider(name, **dict(zip(keys, resources, strict=True))), None
    except ProviderUnavailable as exc:
        return None, str(exc)


# ---------------------------------------------------------------- assets


@dg.asset(group_name=GROUP, code_version="1", deps=[dg.AssetKey("passages")])
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
        data_version=dg.DataVersion(_hash(frame)),
    )


@dg.asset(group_name=GROUP, code_version="1")
def user_queries(context: dg.AssetExecutionContext, config: UserQueriesConfig) -> dg.MaterializeResult:
    """User query sets (JSONL / CSV / text) and BEIR query sets with their qrels."""
    beir = Path(config.beir_dir) if config.beir_dir else settings.corpus_path()
    frame = questions_lib.gather_user_queries(
        [Path(p.strip()) for p in config.paths.split(",") if p.strip()],
        beir,
        beir_queries=config.beir_queries,
        seed=config.seed,
        split=config.beir_split,
        papers=load_papers(),
    )
    tables.write(tables.USER_QUERIES, frame)
    return dg.MaterializeResult(
        metadata={
            "queries": frame.height,
            "sets": dg.MetadataValue.json(
                dict(frame.group_by("set_name").len().iter_rows()) if frame.height else {}
            ),
            "sample": dg.MetadataValue.md(tables.markdown_sample(frame, ["question_id", "text", "set_name"])),
        },
        data_version=dg.DataVersion(_hash(frame)),
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
        data_version=dg.DataVersion(_hash(frame)),
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[questions, dg.AssetKey("passage_index")],
    pool="benchmark_search",
)
def provider_results(
    context: dg.AssetExecutionContext,
    config: ProviderResultsConfig,
    question_llm: LLMResource,
    semantic_scholar: SemanticScholarResource,
    google_scholar: SerpApiScholarResource,
    exa: ExaResource,
) -> dg.MaterializeResult:
    """Zero-shot (level 0) contexts for every question from one provider; a provider without a key is skipped."""
    name = context.partition_key
    question_frame = tables.read(tables.QUESTIONS)
    if question_frame is None:
        raise dg.Failure("no questions yet: materialize `questions` first")
    provider, skipped = _provider(name, question_llm, semantic_scholar, google_scholar, exa)
    if provider is None:
        context.log.warning(f"{name} skipped: {skipped}")
        tables.write(tables.PROVIDER_RESULTS, pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA), name)
        ledger.mark_skipped("provider_results", name, skipped)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": skipped, "questions": 0},
            data_version=dg.DataVersion("skipped"),
        )
    ledger.clear_skipped("provider_results", name)
    frame = runner.query_provider(provider, question_frame, config.k)
    tables.write(tables.PROVIDER_RESULTS, frame, name)
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
            "sample": dg.MetadataValue.md(results_sample(frame, question_frame)),
        },
        data_version=dg.DataVersion(_hash(frame)),
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[provider_results],
    pool="benchmark_search",
)
def recursive_results(
    context: dg.AssetExecutionContext,
    config: RecursionConfig,
    question_llm: LLMResource,
    semantic_scholar: SemanticScholarResource,
    google_scholar: SerpApiScholarResource,
    exa: ExaResource,
) -> dg.MaterializeResult:
    """Levels 0..max(depths) for every page size: the Recursion Prompt (or offline pseudo-relevance feedback)
    refines the query from the previous level's results; merged contexts are stored per level."""
    name = context.partition_key
    question_frame = tables.read(tables.QUESTIONS)
    level0 = tables.read(tables.PROVIDER_RESULTS, name)
    provider, skipped = _provider(name, question_llm, semantic_scholar, google_scholar, exa)
    if provider is None:
        tables.write(tables.RECURSIVE_RESULTS, pl.DataFrame(schema=runner.RECURSIVE_SCHEMA), name)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": skipped}, data_version=dg.DataVersion("skipped")
        )
    if question_frame is None:
        raise dg.Failure("no questions yet: materialize `questions` first")
    client = question_llm.get_client()
    refiner = PseudoRelevanceRefiner() if client.is_offline else LLMRefiner(client)
    if client.is_offline:
        context.log.warning(
            f"recursion LLM is {client.label}: offline pseudo-relevance feedback, labelled so"
        )
    frame = runner.run_recursive(
        provider,
        question_frame,
        level0 if level0 is not None else pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=sorted(set(config.page_sizes)),
        max_depth=max(config.depths),
        refiner=refiner,
    )
    frame = frame.filter(pl.col("depth").is_in(sorted(set(config.depths))))
    tables.write(tables.RECURSIVE_RESULTS, frame, name)
    ledger.record_cost("recursive_results", name, client)
    summary = (
        frame.group_by("page_size", "depth")
        .agg(
            pl.col("contexts").list.len().mean().alias("mean_contexts"),
            pl.col("new_chunks").mean().alias("mean_new_chunks"),
            pl.col("failure").is_not_null().sum().alias("failures"),
        )
        .sort("page_size", "depth")
    )
    return dg.MaterializeResult(
        metadata={
            "provider": name,
            "refinement": refiner.method,
            "rows": frame.height,
            "refinement_failures": int(frame.filter(pl.col("failure").is_not_null()).height),
            **client.usage.as_metadata("recursion_llm"),
            **http_stats(provider),
            "levels": dg.MetadataValue.md(tables.markdown_sample(summary, summary.columns, rows=50)),
        },
        data_version=dg.DataVersion(_hash(frame)),
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    partitions_def=PROVIDERS,
    deps=[recursive_results],
    pool="benchmark_judge",
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
    items = runner.judge_inputs(recursive, question_frame)
    context.log.info(f"judging {len(items)} unique (question, context) pairs with {judge.name}")
    frame = runner.judgments_frame(judge.judge_many(items), name)
    tables.write(tables.JUDGMENTS, frame, name)
    ledger.record_cost("judgments", name, client)
    rel_fail = int(frame["relevance_failure"].is_not_null().sum())
    cp_fail = int(frame["precision_failure"].is_not_null().sum())
    failures = frame.filter(
        pl.col("relevance_failure").is_not_null() | pl.col("precision_failure").is_not_null()
    )
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
            ),
            **(client.usage.as_metadata("judge_llm") if client is not None else {}),
        },
        data_version=dg.DataVersion(_hash(frame)),
    )


@dg.asset(
    group_name=GROUP,
    code_version="1",
    deps=[judgments, questions],
    check_specs=[dg.AssetCheckSpec("judge_failure_rate", asset="benchmark_scores")],
)
def benchmark_scores(
    context: dg.AssetExecutionContext, config: ScoresConfig, judge_llm: LLMResource
) -> dg.MaterializeResult:
    """CR / CP with bootstrap CIs and n, ranking metrics where qrels exist, and the judge's agreement with humans."""
    recursive = tables.read_all(tables.RECURSIVE_RESULTS)
    verdicts = tables.read_all(tables.JUDGMENTS)
    question_frame = tables.read(tables.QUESTIONS)
    if (
        recursive is None
        or not recursive.height
        or verdicts is None
        or not verdicts.height
        or question_frame is None
    ):
        raise dg.Failure(
            "nothing to score: materialize questions, provider_results, recursive_results and judgments"
        )
    scores = runner.score(recursive, verdicts, question_frame, resamples=config.bootstrap_resamples)
    tables.write(tables.BENCHMARK_SCORES, scores)
    with _setup_failure():
        agreement = judge_agreement(judge_llm, config, llm_queries=config.validation_queries_llm)
    ledger.write_agreement(agreement)
    total = verdicts.height
    failed = int(
        (verdicts["relevance_failure"].is_not_null() | verdicts["precision_failure"].is_not_null()).sum()
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
    headline = scores.filter(pl.col("question_set") == "all").select(
        "provider", "page_size", "depth", "cr", "cp", "n", "nDCG@10"
    )
    return dg.MaterializeResult(
        metadata={
            "rows": scores.height,
            "judge": agreement.get("judge") if agreement else "",
            "judge_kappa": float(agreement["kappa"]) if agreement else float("nan"),
            "judge_agreement": agreement.get("summary", "") if agreement else "not measured",
            "scores": dg.MetadataValue.md(
                tables.markdown_sample(headline, headline.columns, rows=100, width=30)
            ),
        },
        data_version=dg.DataVersion(_hash(scores)),
        check_results=[check],
    )


@dg.asset(group_name=GROUP, code_version="1", deps=[benchmark_scores])
def benchmark_report(
    context: dg.AssetExecutionContext, judge_llm: LLMResource, question_llm: LLMResource
) -> dg.MaterializeResult:
    """Markdown report and PNG plots under data/reports/, shown in the asset's metadata."""
    scores = tables.read(tables.BENCHMARK_SCORES)
    if scores is None:
        raise dg.Failure("no benchmark_scores yet")
    agreement = ledger.read_agreement()
    verdicts = tables.read_all(tables.JUDGMENTS)
    judge_names = sorted(set(verdicts["judge"].to_list())) if verdicts is not None else []
    judge_name = ", ".join(judge_names) or judge_llm.describe()
    offline = any(n.startswith("offline") for n in judge_names) or judge_llm.effective_backend() == "offline"
    recursive = tables.read_all(tables.RECURSIVE_RESULTS)
    refinements = (
        sorted({r for r in recursive["refinement"].to_list() if r not in ("none", "error")})
        if recursive is not None
        else []
    )
    question_frame = tables.read(tables.QUESTIONS)
    counts = dict(question_frame.group_by("kind").len().iter_rows()) if question_frame is not None else {}
    result = write_report(
        scores,
        out_dir=settings.reports_dir(),
        judge_name=judge_name,
        judge_offline=offline,
        agreement=agreement,
        skipped={k: v for k, v in ledger.skipped_providers().items() if k != RECURSIVE_ALIAS},
        question_counts=counts,
        refinement=", ".join(refinements) or "none",
        cost=ledger.total_cost(),
    )
    plots = {f"plot_{p.stem}": dg.MetadataValue.md(image_markdown(p, p.stem)) for p in result["plots"]}
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.path(str(result["report"])),
            "offline_judge": offline,
            "cost": dg.MetadataValue.json(ledger.total_cost()),
            "judge_kappa": float(agreement.get("kappa", float("nan"))) if agreement else float("nan"),
            "markdown": dg.MetadataValue.md(result["markdown"]),
            **plots,
        },
        data_version=dg.DataVersion(DiskCache.key_for(result["markdown"].split("\n", 3)[-1])[:24]),
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
]
CHECKS = [questions_are_wellformed]

BENCHMARK_PROVIDERS = ("lumina", "bm25", "semantic_scholar", "google_scholar", "exa")


def build_resources() -> dict:
    return {**build_llm_resources(), **build_provider_resources()}


def default_run_config(
    *,
    synthetic: int = 12,
    beir_queries: int = 12,
    depths: list[int] | None = None,
    page_sizes: list[int] | None = None,
    calibration_queries: int = 60,
) -> dict[str, Any]:
    """Run config for the whole group (the CLI and the demo shrink it)."""
    page_sizes = page_sizes or [5, 10]
    return {
        "ops": {
            "synthetic_questions": {"config": {"count": synthetic}},
            "user_queries": {"config": {"beir_queries": beir_queries, "paths": settings.user_queries()}},
            "provider_results": {"config": {"k": max(page_sizes)}},
            "recursive_results": {"config": {"depths": depths or [0, 1, 2, 3], "page_sizes": page_sizes}},
            "judgments": {"config": {"calibration_queries": calibration_queries}},
            "benchmark_scores": {"config": {"calibration_queries": calibration_queries}},
        }
    }
