"""Schedules: the nightly crawl of the corpus group and the weekly benchmark (their jobs are in sensors/jobs.py).

The weekly benchmark asks for one run per provider partition. A scheduled crawl names its ingest batch after the day
(`crawl-YYYYMMDD`); the `papers` asset registers that partition key when it first sees it. Without a reachable source
the nightly tick is skipped with the reason (never a failed run)."""

from __future__ import annotations

import dagster as dg

from lumina_assets.core.http import redact_url, unreachable_reason
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, PROVIDERS
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from sensors.jobs import benchmark_job, crawl_job


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


@dg.schedule(
    job=benchmark_job,
    cron_schedule="0 4 * * 0",
    execution_timezone="UTC",
    # Stopped by default: a benchmark with real judges spends LLM and search-API credit; switch it on in the UI.
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Weekly benchmark (Sunday 04:00 UTC): one run per provider partition. A provider without its key "
    "is skipped with a message, which is a successful run.",
)
def weekly_benchmark_schedule(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
    """One run of the benchmark group per provider: provider_results, recursive_results and judgments are
    partitioned by provider, so a run must name its partition. Each run also refreshes the questions (a seeded
    sample and cached LLM answers, so every provider's run gets the same set) and re-scores over every provider's
    judgments on disk, so the report written by the week's last run covers all of them."""
    week = f"{context.scheduled_execution_time:%G-W%V}"
    return [
        dg.RunRequest(
            run_key=f"benchmark-{week}-{provider}",
            partition_key=provider,
            tags={"lumina/trigger": "weekly_benchmark", "lumina/week": week},
        )
        for provider in PROVIDERS.get_partition_keys()
    ]


SCHEDULES = [nightly_crawl_schedule, weekly_benchmark_schedule]
