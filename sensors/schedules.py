"""Schedules: the nightly crawl of the corpus group and the weekly benchmark (their jobs are in sensors/jobs.py).

The weekly benchmark asks for its questions, then `benchmark_shards_sensor` for one run per provider × shard and
the scoring. A scheduled crawl names its ingest batch after the day
(`crawl-YYYYMMDD`); the `papers` asset registers that partition key when it first sees it. Without a reachable source
the nightly tick is skipped with the reason (never a failed run)."""

from __future__ import annotations

import dagster as dg

from lumina_assets.core.http import redact_url, unreachable_reason
from lumina_assets.defs.partitions import INGEST_BATCH_TAG
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from sensors.jobs import benchmark_providers_job, benchmark_questions_job, benchmark_scoring_job, crawl_job


def crawl_batch_key(scheduled_date) -> str:
    return f"crawl-{scheduled_date:%Y%m%d}"


def live_crawl_sources(
    corpus: CorpusResource, openalex: OpenAlexResource, arxiv: ArxivResource
) -> dict[str, str]:
    """The sources a crawl run would call, by name, with their base URLs: none in offline mode (a local corpus is
    configured), arXiv, and OpenAlex when its key is set (without it the crawl skips OpenAlex)."""
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
    """One crawl run a night. The sources are asked first, through the HTTP layer: with none reachable there is
    nothing to crawl, so the tick is a SkipReason naming each unreachable source instead of a run that spends
    minutes on retries. A run with one source down still goes ahead; that source's asset skips itself and says so
    (see `openalex_works` / `arxiv_works`). In offline mode (a local corpus) the run re-reads the folder."""
    batch_key = crawl_batch_key(context.scheduled_execution_time)
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
    # Stopped by default: a benchmark with real judges spends LLM and search-API credit; switch it on in the UI.
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly benchmark (Sunday 04:00 UTC): the questions, then (benchmark_shards_sensor) one run per "
    "provider × shard and the scoring. A provider without its key is skipped with a message, which is a "
    "successful run.",
)
def weekly_benchmark_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """The week's questions (a seeded sample and cached LLM answers): `questions` registers their shard partitions,
    which exist only once it has run, so `benchmark_shards_sensor` asks for the per-shard runs after it."""
    week = f"{context.scheduled_execution_time:%G-W%V}"
    return dg.RunRequest(run_key=f"benchmark-{week}", tags={"lumina/trigger": WEEKLY, "lumina/week": week})


@dg.sensor(
    jobs=[benchmark_providers_job, benchmark_scoring_job],
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def benchmark_shards_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """After the weekly questions run: one run per provider × shard of those questions, then, once every one of
    them has ended, the scoring run (which scores the providers whose shards all succeeded)."""
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
