"""Schedules: the nightly crawl (its ingest batch named `crawl-YYYYMMDD`) and the weekly benchmark, whose shard and
scoring runs `benchmark_shards_sensor` requests."""

from __future__ import annotations

import dagster as dg

from lumina_assets.core.http import redact_url, unreachable_reason
from lumina_assets.defs.partitions import INGEST_BATCH_TAG
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from sensors.jobs import benchmark_providers_job, benchmark_questions_job, benchmark_scoring_job, crawl_job


def live_crawl_sources(
    corpus: CorpusResource, openalex: OpenAlexResource, arxiv: ArxivResource
) -> dict[str, str]:
    """The sources a crawl run would call, with their base URLs: none offline, arXiv, and OpenAlex with its key."""
    if not corpus.live_crawl_enabled():
        return {}
    sources = {"arXiv": arxiv.base_url}
    if openalex.resolved_api_key():
        sources["OpenAlex"] = openalex.base_url
    return sources


def unreachable_sources(sources: dict[str, str], timeout: float = 5.0) -> dict[str, str]:
    """Name -> 'URL (reason)' for each source that does not answer over HTTP (proxy settings honoured)."""
    found = {name: (url, unreachable_reason(url, timeout)) for name, url in sources.items()}
    return {name: f"{redact_url(url)} ({reason})" for name, (url, reason) in found.items() if reason}


@dg.schedule(
    job=crawl_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly crawl (02:00 UTC). Responses are cached and rate-limited per provider pool. When no "
    "configured source answers (offline, a mirror down) the tick is skipped and says which; the catalogue is "
    "untouched and the next night tries again.",
)
def nightly_crawl_schedule(
    context: dg.ScheduleEvaluationContext,
    corpus: CorpusResource,
    openalex: OpenAlexResource,
    arxiv: ArxivResource,
) -> dg.RunRequest | dg.SkipReason:
    """One crawl run a night, skipped with the reason when no source answers (instead of a run spending minutes on
    retries); with one source down the run goes ahead and that source's asset skips itself."""
    batch_key = f"crawl-{context.scheduled_execution_time:%Y%m%d}"
    sources = live_crawl_sources(corpus, openalex, arxiv)
    down = unreachable_sources(sources)
    if sources and len(down) == len(sources):
        listed = "; ".join(f"{name} at {where}" for name, where in down.items())
        return dg.SkipReason(
            f"no crawl source is reachable: {listed}. Nothing was crawled and the catalogue is unchanged; "
            "set LUMINA_OPENALEX_URL / LUMINA_ARXIV_URL (or HTTPS_PROXY) to reach them."
        )
    return dg.RunRequest(
        run_key=batch_key, tags={INGEST_BATCH_TAG: batch_key, "lumina/trigger": "nightly_crawl"}
    )


WEEKLY = "weekly_benchmark"
QUESTIONS_TAG = "lumina/questions"  # the storage id of the `questions` materialization a shard run follows


@dg.schedule(
    job=benchmark_questions_job,
    cron_schedule="0 4 * * 0",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly benchmark (Sunday 04:00 UTC): the questions, then (benchmark_shards_sensor) one run per "
    "provider × shard and the scoring. A provider without its key is skipped with a message, which is a "
    "successful run.",
)
def weekly_benchmark_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """The week's questions; `benchmark_shards_sensor` asks for the per-shard runs once their partitions exist."""
    week = f"{context.scheduled_execution_time:%G-W%V}"
    return dg.RunRequest(run_key=f"benchmark-{week}", tags={"lumina/trigger": WEEKLY, "lumina/week": week})


@dg.sensor(
    jobs=[benchmark_providers_job, benchmark_scoring_job],
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def benchmark_shards_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """After the weekly questions run: one run per provider × shard, then, once all have ended, the scoring run."""
    from lumina_assets.defs.partitions import current_provider_shards

    records = context.instance.fetch_materializations(dg.AssetKey("questions"), limit=1).records
    run = context.instance.get_run_by_id(records[0].run_id) if records else None
    if run is None or run.tags.get("lumina/trigger") != WEEKLY:
        return dg.SkipReason("no weekly benchmark questions to follow")
    questions = str(records[0].storage_id)
    tags = {"lumina/trigger": WEEKLY, QUESTIONS_TAG: questions}
    if context.cursor not in (questions, f"{questions}-scored"):
        requests = [
            dg.RunRequest(run_key=f"{questions}-{key}", job_name=benchmark_providers_job.name, partition_key=key, tags=tags)
            for key in current_provider_shards()
        ]  # fmt: skip
        return dg.SensorResult(run_requests=requests, cursor=questions)
    shard_runs = context.instance.get_runs(filters=dg.RunsFilter(tags={QUESTIONS_TAG: questions}))
    launched = len(shard_runs) >= len(current_provider_shards())
    if context.cursor != questions or not launched or not all(r.is_finished for r in shard_runs):
        return dg.SkipReason("waiting for the shard runs")
    scoring = dg.RunRequest(run_key=f"{questions}-scores", job_name=benchmark_scoring_job.name, tags=tags)
    return dg.SensorResult(run_requests=[scoring], cursor=f"{questions}-scored")


SCHEDULES = [nightly_crawl_schedule, weekly_benchmark_schedule]
SENSORS = [benchmark_shards_sensor]
