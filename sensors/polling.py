"""Polling sensor: new OpenAlex works citing the seeds and new arXiv papers matching the seed queries. The cursor is
a per-source watermark day plus the ids already seen on it (both APIs filter by whole days); a failing source keeps
its cursor, and a backlog over `max_works_per_tick` drains over the next ticks, one batch each."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import dagster as dg
from pydantic import BaseModel, ValidationError

from lumina_assets.core import settings
from lumina_assets.core.http import HttpError
from lumina_assets.core.ids import normalize_arxiv_id, normalize_openalex_id
from lumina_assets.corpus.arxiv import ArxivClient, ArxivError
from lumina_assets.corpus.crawl import Seeds, load_seeds
from lumina_assets.corpus.openalex import OpenAlexClient, OpenAlexError
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from resources.arxiv import ArxivResource
from resources.openalex import OpenAlexResource

log = logging.getLogger(__name__)

POLL_ASSETS = (dg.AssetKey("openalex_works"), dg.AssetKey("arxiv_works"), dg.AssetKey("papers"))
DISCOVERED_FIELD = "extra_ids"
CURSOR_VERSION = 1
SOURCE_ERRORS = (HttpError, OpenAlexError, ArxivError)


class SourceCursor(BaseModel):
    since: str  # ISO date; works from this day on are asked for
    boundary: list[str] = []  # ids already seen that the next query returns again, sorted


class PollCursor(BaseModel):
    version: int = CURSOR_VERSION
    openalex: SourceCursor
    arxiv: SourceCursor
    seed_openalex_ids: dict[str, str | None] = {}  # seed identifier -> W id

    @classmethod
    def initial(cls, today: date, lookback_days: int) -> PollCursor:
        start = (today - timedelta(days=lookback_days)).isoformat()
        return cls(openalex=SourceCursor(since=start), arxiv=SourceCursor(since=start))

    @classmethod
    def load(cls, raw: str | None, today: date, lookback_days: int) -> PollCursor:
        if raw:
            try:
                return cls.model_validate_json(raw)
            except ValidationError as exc:
                log.warning("unreadable polling cursor (%s); starting from the look-back window", exc)
        return cls.initial(today, lookback_days)

    def dump(self) -> str:
        seeds = dict(sorted(self.seed_openalex_ids.items()))
        return self.model_copy(update={"seed_openalex_ids": seeds}).model_dump_json()


@dataclass
class PollOutcome:
    openalex_ids: list[str]
    arxiv_ids: list[str]
    cursor: PollCursor
    errors: list[str]

    @property
    def discovered(self) -> list[str]:
        return [f"openalex:{w}" for w in self.openalex_ids] + [f"arxiv:{a}" for a in self.arxiv_ids]


def _take_and_advance(
    candidates: Iterable[str], cursor: SourceCursor, today: date, budget: int
) -> tuple[list[str], SourceCursor]:
    """New ids in order, at most `budget`, and the next cursor: all read, the watermark moves to today with all
    this query returned as its boundary; cut short, the watermark stays and the boundary grows by what was taken."""
    skip = set(cursor.boundary)
    taken: list[str] = []
    returned: set[str] = set()
    complete = True
    for item in candidates:
        if item in skip or item in returned:
            returned.add(item)
            continue
        if len(taken) >= budget:
            complete = False
            break
        returned.add(item)
        taken.append(item)
    if complete and today.isoformat() > cursor.since:
        return taken, SourceCursor(since=today.isoformat(), boundary=sorted(returned))
    return taken, SourceCursor(since=cursor.since, boundary=sorted(skip | set(taken)))


def resolve_seed_openalex_ids(
    client: OpenAlexClient, seeds: Seeds, known: dict[str, str | None], errors: list[str]
) -> dict[str, str | None]:
    """OpenAlex ids of the seeds; resolved once and kept in the cursor (ids never change)."""
    resolved = dict(known)
    for identifier in seeds.identifiers:
        if identifier in resolved:
            continue
        try:
            work = client.work(identifier)
        except SOURCE_ERRORS as exc:
            errors.append(f"seed {identifier}: {exc}")
            continue
        resolved[identifier] = normalize_openalex_id(work.get("id")) if work else None
    return resolved


def poll_openalex(
    client: OpenAlexClient, seed_ids: Iterable[str], cursor: SourceCursor, today: date, budget: int
) -> tuple[list[str], SourceCursor]:
    """Works citing any seed, created since the watermark; raises on a failed request (cursor untouched)."""

    def candidates():
        for seed in seed_ids:
            for work in client.citing_works(seed, since=cursor.since):
                if work_id := normalize_openalex_id(work.get("id")):
                    yield work_id

    return _take_and_advance(candidates(), cursor, today, budget)


def poll_arxiv(
    client: ArxivClient, seeds: Seeds, cursor: SourceCursor, today: date, budget: int
) -> tuple[list[str], SourceCursor]:
    """Newest submissions for each seed query, newest first, stopping at the watermark day."""

    def candidates():
        for query in seeds.arxiv_queries:
            for paper in client.iter_search(
                query.query,
                max_results=max(budget, query.max_results),
                sort_by="submittedDate",
                sort_order="descending",
            ):
                if (paper.publication_date or "") < cursor.since:
                    break
                if arxiv_id := normalize_arxiv_id(paper.arxiv_id or ""):
                    yield arxiv_id

    return _take_and_advance(candidates(), cursor, today, budget)


def poll(
    *,
    openalex: OpenAlexClient | None,
    arxiv: ArxivClient | None,
    seeds: Seeds,
    raw_cursor: str | None,
    today: date,
    lookback_days: int = 7,
    max_works_per_tick: int = 200,
) -> PollOutcome:
    """One polling pass over both sources; a failing source is reported and keeps its cursor."""
    cursor = PollCursor.load(raw_cursor, today, lookback_days)
    errors: list[str] = []
    openalex_ids: list[str] = []
    arxiv_ids: list[str] = []
    if openalex is not None:
        cursor.seed_openalex_ids = resolve_seed_openalex_ids(
            openalex, seeds, cursor.seed_openalex_ids, errors
        )
        seed_ids = sorted({w for w in cursor.seed_openalex_ids.values() if w} | set(seeds.openalex_ids))
        try:
            openalex_ids, cursor.openalex = poll_openalex(
                openalex, seed_ids, cursor.openalex, today, max_works_per_tick
            )
        except SOURCE_ERRORS as exc:
            errors.append(f"openalex: {exc}")
    if arxiv is not None and seeds.arxiv_queries and max_works_per_tick > len(openalex_ids):
        try:
            arxiv_ids, cursor.arxiv = poll_arxiv(
                arxiv, seeds, cursor.arxiv, today, max(0, max_works_per_tick - len(openalex_ids))
            )
        except SOURCE_ERRORS as exc:
            errors.append(f"arxiv: {exc}")
    return PollOutcome(openalex_ids, arxiv_ids, cursor, errors)


def evaluate_poll(outcome: PollOutcome) -> dg.SensorResult:
    """Build the run request first; only then does the result carry the advanced cursor."""
    error_note = f"; errors: {'; '.join(outcome.errors)}" if outcome.errors else ""
    if not outcome.discovered:
        return dg.SensorResult(skip_reason=f"no new works{error_note}", cursor=outcome.cursor.dump())
    digest = hashlib.sha256("\n".join(sorted(outcome.discovered)).encode("utf-8")).hexdigest()
    batch_key = f"poll-{digest[:16]}"
    ops = {}
    if outcome.openalex_ids:
        ops["openalex_works"] = {"config": {DISCOVERED_FIELD: list(outcome.openalex_ids)}}
    if outcome.arxiv_ids:
        ops["arxiv_works"] = {"config": {DISCOVERED_FIELD: list(outcome.arxiv_ids)}}
    request = dg.RunRequest(
        run_key=batch_key,
        asset_selection=list(POLL_ASSETS),
        run_config={"ops": ops},
        tags={
            INGEST_BATCH_TAG: batch_key,
            "lumina/trigger": "poll",
            "lumina/discovered_openalex": str(len(outcome.openalex_ids)),
            "lumina/discovered_arxiv": str(len(outcome.arxiv_ids)),
        },
    )
    return dg.SensorResult(
        run_requests=[request],
        dynamic_partitions_requests=[INGEST_BATCHES.build_add_request([batch_key])],
        cursor=outcome.cursor.dump(),
    )


def build_polling_sensor(
    *, today: Callable[[], date] = lambda: datetime.now(UTC).date()
) -> dg.SensorDefinition:
    """Stopped by default: it calls the live APIs (OpenAlex needs OPENALEX_API_KEY); switch it on in the UI."""

    @dg.sensor(
        name="openalex_arxiv_polling_sensor",
        asset_selection=list(POLL_ASSETS),
        minimum_interval_seconds=6 * 3600,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=(
            "New OpenAlex works citing the seeds and new arXiv papers matching the seed queries since a "
            "monotonic cursor -> one ingest batch and one crawl run per tick."
        ),
    )
    def _polling_sensor(
        context: dg.SensorEvaluationContext, openalex: OpenAlexResource, arxiv: ArxivResource
    ):
        seeds = load_seeds(settings.get().paths.seeds)
        if seeds.is_empty():
            return dg.SkipReason(f"no seeds: {'; '.join(seeds.problems)}")
        # seed lookups may come from the response cache; the polls must see fresh data
        lookup = openalex.client()
        fresh_openalex = openalex.client()
        fresh_openalex.http.cache = None
        # one memory of unreachable hosts for both: offline, the tick ends after one request's retries
        fresh_openalex.http.unreachable_hosts = lookup.http.unreachable_hosts
        fresh_arxiv = arxiv.client()
        fresh_arxiv.http.cache = None
        if not openalex.resolved_api_key():
            context.log.info("OPENALEX_API_KEY is not set: polling arXiv only")
        outcome = poll(
            openalex=_TwoClients(lookup, fresh_openalex) if openalex.resolved_api_key() else None,
            arxiv=fresh_arxiv,
            seeds=seeds,
            raw_cursor=context.cursor,
            today=today(),
        )
        for error in outcome.errors:
            context.log.warning(error)
        return evaluate_poll(outcome)

    return _polling_sensor


class _TwoClients:
    """Seed lookups through the cached client, citing-works polls through the uncached one."""

    def __init__(self, lookup: OpenAlexClient, fresh: OpenAlexClient):
        self._lookup, self._fresh = lookup, fresh

    def work(self, identifier: str):
        return self._lookup.work(identifier)

    def citing_works(self, openalex_id: str, **kwargs):
        return self._fresh.citing_works(openalex_id, **kwargs)


polling_sensor = build_polling_sensor()
