"""Jobs and schedules: the nightly crawl of the corpus group and the weekly benchmark.

Both jobs select by group, so they follow the graph as stages add assets. A scheduled crawl names its ingest batch
after the day (`crawl-YYYYMMDD`); the `papers` asset registers that partition key when it first sees it."""

from __future__ import annotations

import dagster as dg

from lumina_assets.defs.partitions import INGEST_BATCH_TAG

CORPUS_GROUP = "corpus"
BENCHMARK_GROUP = "benchmark"

crawl_job = dg.define_asset_job(
    name="crawl_corpus",
    selection=dg.AssetSelection.groups(CORPUS_GROUP),
    description="Crawl the seeds (OpenAlex, arXiv, local folder / inbox) into the papers table.",
    tags={"lumina/job": "crawl"},
)

benchmark_job = dg.define_asset_job(
    name="run_benchmark",
    selection=dg.AssetSelection.groups(BENCHMARK_GROUP),
    description="Questions, provider results, judgments, scores and the report.",
    tags={"lumina/job": "benchmark"},
)

ingest_inbox_job = dg.define_asset_job(
    name="ingest_inbox",
    selection=dg.AssetSelection.assets("local_papers", "papers"),
    description="Pick up PDFs from the inbox by hand (the inbox sensor does the same on its own).",
    tags={"lumina/job": "ingest"},
)


def crawl_batch_key(scheduled_date) -> str:
    return f"crawl-{scheduled_date:%Y%m%d}"


@dg.schedule(
    job=crawl_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly crawl (02:00 UTC). Responses are cached and rate-limited per provider pool.",
)
def nightly_crawl_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    batch_key = crawl_batch_key(context.scheduled_execution_time)
    return dg.RunRequest(
        run_key=batch_key, tags={INGEST_BATCH_TAG: batch_key, "lumina/trigger": "nightly_crawl"}
    )


@dg.schedule(
    job=benchmark_job,
    cron_schedule="0 4 * * 0",
    execution_timezone="UTC",
    # Stopped by default: a benchmark with real judges spends LLM and search-API credit; switch it on in the UI.
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly benchmark (Sunday 04:00 UTC) of every configured provider.",
)
def weekly_benchmark_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    week = context.scheduled_execution_time
    return dg.RunRequest(run_key=f"benchmark-{week:%G-W%V}", tags={"lumina/trigger": "weekly_benchmark"})


JOBS = [crawl_job, benchmark_job, ingest_inbox_job]
SCHEDULES = [nightly_crawl_schedule, weekly_benchmark_schedule]
