"""[benchmark] group: questions → provider results (partitioned by provider) → recursive levels → judgments →
scores → report. Domain logic lives in `evals`; these assets read and write Parquet under data/benchmark/ and
report counts, cost, tables and plots in their metadata.
"""

import json
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from evals import judge as judge_lib
from evals import questions as questions_lib
from evals import runner
from evals.providers import (
    BM25Provider,
    ExaProvider,
    GoogleScholarProvider,
    LuminaProvider,
    ProviderUnavailable,
    SemanticScholarProvider,
    lumina_search_fn,
)
from evals.recursive import LLMRefiner, PseudoRelevanceRefiner
from evals.report import image_markdown, write_report
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
RECURSIVE_ALIAS = (
    "lumina_recursive"  # a mode, not a provider: every provider's recursive levels are in recursive_results
)


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


# ---------------------------------------------------------------- paths and helpers


def bench_path(name: str) -> Path:
    return settings.benchmark_dir() / f"{name}.parquet"


def bench_partition_path(name: str, partition: str) -> Path:
    return settings.benchmark_dir() / name / f"{partition}.parquet"


def _write(frame: pl.DataFrame, path: Path) -> Path:
    return tables.atomic_write(frame, path)


def _read(path: Path) -> pl.DataFrame | None:
    return pl.read_parquet(path) if path.exists() else None


def _read_partitions(name: str) -> pl.DataFrame | None:
    folder = settings.benchmark_dir() / name
    files = sorted(folder.glob("*.parquet")) if folder.exists() else []
    frames = [pl.read_parquet(f) for f in files]
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _hash(frame: pl.DataFrame) -> str:
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


def load_passages() -> pl.DataFrame | None:
    """The passages table (partitioned by ingest batch, or whole) and nothing when it was never built."""
    frame = tables.read_all_partitions("passages")
    return frame if frame is not None else tables.read_table("passages")


def load_papers() -> pl.DataFrame | None:
    return tables.read_table("papers")


def calibration_dir(config_value: str) -> Path:
    if config_value:
        return Path(config_value)
    corpus = settings.corpus_path()
    if corpus is not None and corpus.name == "scifact" and questions_lib.is_beir_folder(corpus):
        return corpus
    return settings.shared_data_dir() / "scifact"


def offline_judge(folder: Path, queries_per_split: int) -> judge_lib.OfflineJudge:
    """The calibrated offline judge; thresholds and their held-out agreement are cached as JSON."""
    if not (folder / "qrels").is_dir():
        raise dg.Failure(
            f"offline judge needs SciFact train qrels for calibration at {folder}; set JudgeConfig.calibration_dir"
        )
    embedder = judge_lib.default_embedder()
    cache = settings.benchmark_dir() / "judge_calibration"
    thresholds = judge_lib.load_or_calibrate(embedder, folder, queries_per_split, cache)
    return judge_lib.OfflineJudge(embedder, thresholds)


def build_judge(judge_llm: LLMResource, config: JudgeConfig):
    """(judge, llm client or None). No key → the calibrated offline judge, labelled offline."""
    client = judge_llm.get_client()
    if client.is_offline:
        return offline_judge(calibration_dir(config.calibration_dir), config.calibration_queries), None
    return judge_lib.LLMJudge(client, max_attempts=config.max_attempts), client


def build_provider(
    name: str,
    *,
    question_llm: LLMResource,
    semantic_scholar: SemanticScholarResource,
    google_scholar: SerpApiScholarResource,
    exa: ExaResource,
):
    """The provider for a partition, or ProviderUnavailable with the reason it is skipped."""
    if name == "lumina":
        from lumina_assets.search.model_stages import configured_search_config

        client = question_llm.get_client() if settings.search_llm_stages() else None
        llm_client = client if client is not None and not client.is_offline else None
        return LuminaProvider(lumina_search_fn(config=configured_search_config(llm_client=llm_client)))
    if name == "bm25":
        return BM25Provider(load_passages(), load_papers())
    if name == "semantic_scholar":
        if not semantic_scholar.available():
            raise ProviderUnavailable(semantic_scholar.unavailable_reason())
        return SemanticScholarProvider(semantic_scholar.get_client())
    if name == "google_scholar":
        if not google_scholar.available():
            raise ProviderUnavailable(google_scholar.unavailable_reason())
        return GoogleScholarProvider(google_scholar.get_client())
    if name == "exa":
        if not exa.available():
            raise ProviderUnavailable(exa.unavailable_reason())
        return ExaProvider(exa.get_client())
    if name == RECURSIVE_ALIAS:
        raise ProviderUnavailable(
            "lumina_recursive is a mode, not a provider: lumina's recursive levels are in recursive_results[lumina]"
        )
    raise ProviderUnavailable(f"unknown provider {name!r}")


def _skip_marker(name: str, partition: str, reason: str) -> None:
    path = settings.benchmark_dir() / "skipped" / f"{name}.{partition}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reason, encoding="utf-8")


def _clear_skip(name: str, partition: str) -> None:
    (settings.benchmark_dir() / "skipped" / f"{name}.{partition}.txt").unlink(missing_ok=True)


def skipped_providers() -> dict[str, str]:
    folder = settings.benchmark_dir() / "skipped"
    reasons: dict[str, str] = {}
    for path in sorted(folder.glob("provider_results.*.txt")) if folder.exists() else []:
        reasons[path.stem.split(".", 1)[1]] = path.read_text(encoding="utf-8")
    return reasons


def _record_cost(asset: str, partition: str | None, client) -> None:
    """Per-asset LLM usage as JSON, so the report can state what the whole benchmark cost."""
    if client is None or client.is_offline:
        return
    path = settings.benchmark_dir() / "costs" / f"{asset}.{partition or 'all'}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": client.label, **client.usage.as_metadata("llm")}), encoding="utf-8")


def total_cost() -> dict[str, Any]:
    folder = settings.benchmark_dir() / "costs"
    entries = (
        [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
        if folder.exists()
        else []
    )
    if not entries:
        return {}
    return {
        "LLM calls sent": sum(e["llm_calls"] for e in entries),
        "LLM cache hits": sum(e["llm_cache_hits"] for e in entries),
        "tokens in/out": f"{sum(e['llm_input_tokens'] for e in entries)}/{sum(e['llm_output_tokens'] for e in entries)}",
        "estimated USD (last materialization of each asset)": round(
            sum(e["llm_estimated_cost_usd"] for e in entries), 4
        ),
    }


def _http_stats(provider) -> dict[str, int]:
    client = getattr(provider, "client", None)
    http = getattr(client, "http", None)
    return http.stats.as_metadata() if http is not None else {}


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
    _write(frame, bench_path("synthetic_questions"))
    _record_cost("synthetic_questions", None, client)
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
            "path": str(bench_path("synthetic_questions")),
        },
        data_version=dg.DataVersion(_hash(frame)),
    )


@dg.asset(group_name=GROUP, code_version="1")
def user_queries(context: dg.AssetExecutionContext, config: UserQueriesConfig) -> dg.MaterializeResult:
    """User query sets (JSONL / CSV / text) and BEIR query sets with their qrels."""
    frames = []
    for raw in [p.strip() for p in config.paths.split(",") if p.strip()]:
        frames.append(questions_lib.load_user_queries(Path(raw)))
    beir = Path(config.beir_dir) if config.beir_dir else settings.corpus_path()
    if beir is not None and questions_lib.is_beir_folder(beir) and config.beir_queries > 0:
        papers = load_papers()
        mapping = None
        if papers is not None and {"source", "source_id"} <= set(papers.columns):
            beir_rows = papers.filter(pl.col("source") == "beir").select("source_id", "paper_id")
            mapping = dict(
                zip(beir_rows["source_id"].to_list(), beir_rows["paper_id"].to_list(), strict=True)
            )
        frames.append(
            questions_lib.load_beir_queries(
                beir,
                n=config.beir_queries,
                seed=config.seed,
                split=config.beir_split,
                paper_ids=mapping or None,
            )
        )
    frame = pl.concat(frames) if frames else questions_lib.empty_questions()
    frame = frame.unique("question_id", keep="first", maintain_order=True)
    _write(frame, bench_path("user_queries"))
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
    frames = [
        f
        for f in (_read(bench_path("synthetic_questions")), _read(bench_path("user_queries")))
        if f is not None
    ]
    frame = pl.concat(frames) if frames else questions_lib.empty_questions()
    frame = frame.unique("question_id", keep="first", maintain_order=True)
    _write(frame, bench_path("questions"))
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
    question_frame = _read(bench_path("questions"))
    if question_frame is None:
        raise dg.Failure("no questions yet: materialize `questions` first")
    path = bench_partition_path("provider_results", name)
    try:
        provider = build_provider(
            name,
            question_llm=question_llm,
            semantic_scholar=semantic_scholar,
            google_scholar=google_scholar,
            exa=exa,
        )
    except ProviderUnavailable as exc:
        context.log.warning(f"{name} skipped: {exc}")
        _write(pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA), path)
        _skip_marker("provider_results", name, str(exc))
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": str(exc), "questions": 0},
            data_version=dg.DataVersion("skipped"),
        )
    _clear_skip("provider_results", name)
    frame = runner.query_provider(provider, question_frame, config.k)
    _write(frame, path)
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
            **_http_stats(provider),
            "sample": dg.MetadataValue.md(_results_sample(frame, question_frame)),
        },
        data_version=dg.DataVersion(_hash(frame)),
    )


def _results_sample(frame: pl.DataFrame, question_frame: pl.DataFrame, rows: int = 5) -> str:
    texts = dict(zip(question_frame["question_id"].to_list(), question_frame["text"].to_list(), strict=True))
    sample = []
    for row in frame.head(rows).iter_rows(named=True):
        top = row["contexts"][0] if row["contexts"] else None
        sample.append(
            {
                "question": texts.get(row["question_id"], ""),
                "top title": top["title"] if top else "",
                "top chunk": (top["chunks"][0] if top and top["chunks"] else ""),
                "contexts": len(row["contexts"]),
            }
        )
    return (
        tables.markdown_sample(pl.DataFrame(sample), ["question", "top title", "top chunk", "contexts"])
        if sample
        else "_empty_"
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
    path = bench_partition_path("recursive_results", name)
    question_frame = _read(bench_path("questions"))
    level0 = _read(bench_partition_path("provider_results", name))
    try:
        provider = build_provider(
            name,
            question_llm=question_llm,
            semantic_scholar=semantic_scholar,
            google_scholar=google_scholar,
            exa=exa,
        )
    except ProviderUnavailable as exc:
        _write(pl.DataFrame(schema=runner.RECURSIVE_SCHEMA), path)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": str(exc)}, data_version=dg.DataVersion("skipped")
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
    _write(frame, path)
    _record_cost("recursive_results", name, client)
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
            **_http_stats(provider),
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
    path = bench_partition_path("judgments", name)
    recursive = _read(bench_partition_path("recursive_results", name))
    question_frame = _read(bench_path("questions"))
    if recursive is None or recursive.height == 0 or question_frame is None:
        _write(pl.DataFrame(schema=runner.JUDGMENT_SCHEMA), path)
        return dg.MaterializeResult(
            metadata={"skipped": True, "reason": "no recursive results for this provider"},
            data_version=dg.DataVersion("skipped"),
        )
    judge, client = build_judge(judge_llm, config)
    items = runner.judge_inputs(recursive, question_frame)
    context.log.info(f"judging {len(items)} unique (question, context) pairs with {judge.name}")
    frame = runner.judgments_frame(judge.judge_many(items), name)
    _write(frame, path)
    _record_cost("judgments", name, client)
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
    recursive = _read_partitions("recursive_results")
    verdicts = _read_partitions("judgments")
    question_frame = _read(bench_path("questions"))
    if recursive is None or verdicts is None or question_frame is None:
        raise dg.Failure(
            "nothing to score: materialize questions, provider_results, recursive_results and judgments"
        )
    scores = runner.score(recursive, verdicts, question_frame, resamples=config.bootstrap_resamples)
    _write(scores, bench_path("benchmark_scores"))
    judge_config = JudgeConfig(
        calibration_dir=config.calibration_dir, calibration_queries=config.calibration_queries
    )
    agreement = judge_agreement(judge_llm, judge_config, config.validation_queries_llm)
    (settings.benchmark_dir() / "judge_agreement.json").write_text(
        json.dumps(agreement, indent=2), encoding="utf-8"
    )
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


def judge_agreement(judge_llm: LLMResource, judge_config: JudgeConfig, llm_queries: int) -> dict[str, Any]:
    """Agreement of the configured judge with SciFact human qrels on held-out pairs (cached by judge and set)."""
    folder = calibration_dir(judge_config.calibration_dir)
    if not (folder / "qrels").is_dir():
        return {}
    judge, client = build_judge(judge_llm, judge_config)
    if judge.is_offline and judge.thresholds.validation:
        result = dict(judge.thresholds.validation)
    else:
        _, validation = judge_lib.labelled_pairs(folder, queries_per_split=judge_config.calibration_queries)
        if client is not None:  # an LLM judge validates on a bounded number of queries (cost)
            keep = sorted({p.query_id for p in validation})[:llm_queries]
            validation = [p for p in validation if p.query_id in keep]
        result = judge_lib.validate_judge(judge, validation)
        _record_cost("judge_validation", None, client)
    result["set"] = f"{folder.name} train qrels"
    result["offline"] = judge.is_offline
    if judge.is_offline:
        result["thresholds"] = {
            "relevance": judge.thresholds.relevance,
            "precision": judge.thresholds.precision,
            "calibrated_on": judge.thresholds.calibrated_on,
            "calibration_kappa": judge.thresholds.calibration_kappa,
        }
    return result


@dg.asset(group_name=GROUP, code_version="1", deps=[benchmark_scores])
def benchmark_report(
    context: dg.AssetExecutionContext, judge_llm: LLMResource, question_llm: LLMResource
) -> dg.MaterializeResult:
    """Markdown report and PNG plots under data/reports/, shown in the asset's metadata."""
    scores = _read(bench_path("benchmark_scores"))
    if scores is None:
        raise dg.Failure("no benchmark_scores yet")
    agreement_path = settings.benchmark_dir() / "judge_agreement.json"
    agreement = json.loads(agreement_path.read_text(encoding="utf-8")) if agreement_path.exists() else {}
    verdicts = _read_partitions("judgments")
    judge_names = sorted(set(verdicts["judge"].to_list())) if verdicts is not None else []
    judge_name = ", ".join(judge_names) or judge_llm.describe()
    offline = any(n.startswith("offline") for n in judge_names) or judge_llm.effective_backend() == "offline"
    recursive = _read_partitions("recursive_results")
    refinements = (
        sorted({r for r in recursive["refinement"].to_list() if r not in ("none", "error")})
        if recursive is not None
        else []
    )
    question_frame = _read(bench_path("questions"))
    counts = dict(question_frame.group_by("kind").len().iter_rows()) if question_frame is not None else {}
    result = write_report(
        scores,
        out_dir=settings.reports_dir(),
        judge_name=judge_name,
        judge_offline=offline,
        agreement=agreement,
        skipped={k: v for k, v in skipped_providers().items() if k != RECURSIVE_ALIAS},
        question_counts=counts,
        refinement=", ".join(refinements) or "none",
        cost=total_cost(),
    )
    plots = {f"plot_{p.stem}": dg.MetadataValue.md(image_markdown(p, p.stem)) for p in result["plots"]}
    return dg.MaterializeResult(
        metadata={
            "report": dg.MetadataValue.path(str(result["report"])),
            "offline_judge": offline,
            "cost": dg.MetadataValue.json(total_cost()),
            "judge_kappa": float(agreement.get("kappa", float("nan"))) if agreement else float("nan"),
            "markdown": dg.MetadataValue.md(result["markdown"]),
            **plots,
        },
        data_version=dg.DataVersion(DiskCache.key_for(result["markdown"].split("\n", 3)[-1])[:24]),
    )


@dg.asset_check(asset=questions, description="question ids are unique and every question has text")
def questions_are_wellformed() -> dg.AssetCheckResult:
    frame = _read(bench_path("questions"))
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
