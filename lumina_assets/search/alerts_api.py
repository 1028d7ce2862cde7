"""The alerts routes of `lumina serve` (saved searches and their Atom feeds; listed in docs/library-and-alerts.md),
behind the same host and origin checks as every other route. Hits come from the `alert_hits` asset; nothing here
searches or sends anything: a feed reader polls the feed."""

from __future__ import annotations

import contextlib
import inspect
import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lumina_assets.search import saved_searches
from lumina_assets.search.alerts import atom_feed
from lumina_assets.search.http_json import json_error, read_json_post
from lumina_assets.search.request import BadRequest

log = logging.getLogger(__name__)

ALERT_FIELDS = {"name", "query", "filters", "k"}


def _known(name: str):
    """The saved search of that name, or None (names that could never be saved are simply unknown)."""
    if not saved_searches.NAME.match(name):
        return None
    try:
        return saved_searches.get(name)
    except saved_searches.UnknownSearch:
        return None


def alert_routes() -> list[Route]:
    """The routes; a body is read as the search API reads one (`http_json.read_json_post`)."""

    async def create(request: Request) -> Response:
        data = await read_json_post(request)
        if isinstance(data, Response):
            return data
        try:
            if not isinstance(data, dict):
                raise BadRequest("the body must be a JSON object")
            unknown = set(data) - ALERT_FIELDS
            if unknown:
                raise BadRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
            query = data.get("query")
            name = data.get("name") or (
                saved_searches.name_from_query(query) if isinstance(query, str) else None
            )
            search = saved_searches.validate(name, query, data.get("filters"), data.get("k", 10))
            await run_in_threadpool(saved_searches.add, search)  # a file lock: off the event loop
        except BadRequest as error:
            return json_error(400, str(error))
        except saved_searches.DuplicateName:
            return json_error(409, f"a saved search named {search.name!r} exists already")
        return JSONResponse({"name": search.name, "feed_url": search.feed_path()}, status_code=201)

    def by_name(change):
        """A handler applying `change(name)` to a saved search: 204, or 404 when it is unknown (or just removed)."""

        def handle(request: Request) -> Response:
            search = _known(request.path_params["name"])
            if search is not None:
                with contextlib.suppress(saved_searches.UnknownSearch):  # unless removed in between
                    change(search.name)
                    return Response(status_code=204)
            return json_error(404, "no saved search of that name")

        return handle

    def feed(request: Request) -> Response:
        search = _known(request.path_params["name"])
        if search is None:
            return json_error(404, "no saved search of that name")
        body = atom_feed(search, saved_searches.hits_for(search), str(request.base_url))
        return Response(body, media_type="application/atom+xml; charset=utf-8")

    async def alerts_endpoint(request: Request) -> Response:
        if request.method == "POST":
            return await create(request)
        return JSONResponse(await run_in_threadpool(saved_searches.summaries))

    return [
        Route("/api/alerts", _store_errors(alerts_endpoint), methods=["GET", "POST"]),
        Route("/api/alerts/{name}/seen", _store_errors(by_name(saved_searches.mark_seen)), methods=["POST"]),
        Route("/api/alerts/{name}", _store_errors(by_name(saved_searches.remove)), methods=["DELETE"]),
        Route("/feeds/{name}.xml", _store_errors(feed)),
    ]


def _store_errors(handler):
    """A store that cannot be read is a 503 with a JSON message saying what to do (never a plain-text 500)."""

    async def guarded(request: Request) -> Response:
        try:
            if inspect.iscoroutinefunction(handler):
                return await handler(request)
            return await run_in_threadpool(handler, request)
        except saved_searches.StoreUnreadable as error:
            log.warning("alerts store unreadable: %s", error)
            return json_error(503, str(error))

    return guarded
