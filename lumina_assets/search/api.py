"""The HTTP API and web page of `lumina serve` (Starlette; the routes are listed in docs/search.md). Bad input is a
4xx with {"error": message}; every request must name an allowed host and come from this server's own origin
(docs/security.md). A GET never calls an LLM: any page can send one, and a call costs money."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from lumina_assets.search.alerts_api import alert_routes
from lumina_assets.search.citation_export import FORMATS, export, export_filename
from lumina_assets.search.http_json import MAX_BODY_BYTES, json_error, read_json_post
from lumina_assets.search.memory_store import empty_index_message
from lumina_assets.search.relevance import exported
from lumina_assets.search.request import BadRequest, SearchRequest, flag, index_key
from lumina_assets.search.results import SearchService

log = logging.getLogger(__name__)

PAGE = Path(__file__).with_name("web") / "index.html"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
PDF_NAME = re.compile(r"[A-Za-z0-9-]{1,100}\.pdf")


def host_names(hosts: Iterable[str]) -> frozenset[str]:
    """Host names as compared with a Host header's (lower case, IPv6 without brackets); `*` allows any."""
    return frozenset(h.strip().lower().strip("[]") for h in hosts if h.strip())


def _host_name(host_header: str) -> str | None:
    """The name in a Host header (`[::1]:8765` -> `::1`), None when it is not a host[:port]."""
    try:
        parts = urlsplit(f"//{host_header.strip()}")
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return (parts.hostname or "").lower() or None


class LocalRequestsOnly:
    """Every request must name an allowed host (400: DNS rebinding), and one carrying `Origin` must come from this
    server's own scheme://Host (403; `Origin: null` included). A request without `Origin` passes the second check."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str]) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host = headers.get("host", "")
            refusal = None
            if "*" not in self.allowed_hosts and _host_name(host) not in self.allowed_hosts:
                refusal = json_error(
                    400,
                    f"host {host[:100]!r} is not served here (allowed: {', '.join(sorted(self.allowed_hosts))}; "
                    "`lumina serve --allow-host NAME` adds one)",
                )
            elif (origin := headers.get("origin")) is not None and not _same_origin(origin, host):
                refusal = json_error(403, "cross-origin request refused: this API answers its own page only")
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _same_origin(origin: str, host: str) -> bool:
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.strip().lower()


def query_string_fields(request: Request) -> dict[str, str]:
    """A GET's query string as {name: value} (the last of a repeated name); BadRequest when a percent-escape is
    not UTF-8 (a lone surrogate included), where Starlette would silently substitute U+FFFD."""
    raw = request.scope.get("query_string", b"").decode("latin-1")
    try:
        return dict(parse_qsl(raw, keep_blank_values=True, encoding="utf-8", errors="strict"))
    except UnicodeDecodeError:
        raise BadRequest(
            "the query string is not UTF-8 (percent-escapes of invalid or surrogate bytes)"
        ) from None


def create_app(service: SearchService, *, allowed_hosts: Iterable[str] = LOOPBACK_HOSTS) -> Starlette:
    """The app; `allowed_hosts` are the names a Host header may carry: the loopback names by default, `*` for any
    (only behind a proxy that checks the Host itself)."""
    page_html = PAGE.read_text(encoding="utf-8")

    def index(request: Request) -> Response:
        return HTMLResponse(
            page_html, headers={"Content-Security-Policy": "default-src 'self' 'unsafe-inline'"}
        )

    def health(request: Request) -> Response:
        try:
            empty = service.store().empty()
        except Exception as error:  # the server is up even when the index cannot be opened
            log.warning("health: cannot open the index: %s", error)
            return JSONResponse({"status": "ok", "index": "unavailable"})
        served = index_key(service.db_uri) if getattr(service, "db_uri", None) else None
        if empty:
            return JSONResponse(
                {"status": "ok", "index": "empty", "message": empty_index_message(), "index_key": served}
            )
        return JSONResponse({"status": "ok", "index": "ready", "index_key": served})

    async def read_request(request: Request, extra: frozenset[str] = frozenset()):
        """(SearchRequest, the `extra` fields' values) from a JSON POST or a GET's query string, or an error
        Response."""
        if request.method == "POST":
            data = await read_json_post(request)
            if isinstance(data, Response):
                return data
        else:
            if len(str(request.url)) > MAX_BODY_BYTES:
                return json_error(414, "URL too long")
            try:
                data = query_string_fields(request)
            except BadRequest as error:
                return json_error(400, str(error))
        if not isinstance(data, dict):
            return json_error(422, "the request must be a JSON object")
        data = dict(data)
        extras = {name: data.pop(name, None) for name in extra}
        try:
            parsed = SearchRequest.from_mapping(data, from_query=request.method != "POST")
        except BadRequest as error:
            return json_error(422 if "too long" not in str(error) else 413, str(error))
        return parsed, extras

    async def run_search(parsed: SearchRequest, *, use_llm: bool):
        """The service's answer, or a 503 naming only the error's kind (the server logs the rest)."""
        from starlette.concurrency import run_in_threadpool

        try:
            return await run_in_threadpool(service.search, parsed, use_llm=use_llm)
        except Exception as error:
            log.exception("search failed")
            return json_error(503, f"search unavailable ({type(error).__name__}; see the server log)")

    async def search(request: Request) -> Response:
        read = await read_request(request)
        if isinstance(read, Response):
            return read
        answer = await run_search(read[0], use_llm=request.method == "POST")
        return answer if isinstance(answer, Response) else JSONResponse(answer)

    async def export_results(request: Request) -> Response:
        read = await read_request(request, frozenset({"format", "all"}))
        if isinstance(read, Response):
            return read
        parsed, extras = read
        fmt = extras["format"] or "bibtex"
        if fmt not in FORMATS:
            return json_error(422, f"format must be one of {', '.join(FORMATS)}")
        try:  # `all`: also the results under the relevance line
            include_all = extras["all"] not in (None, "") and flag(
                extras["all"], "all", from_query=request.method != "POST"
            )
        except BadRequest as error:
            return json_error(422, str(error))
        answer = await run_search(replace(parsed, overview=False), use_llm=False)
        if isinstance(answer, Response):
            return answer
        results = exported(answer["results"], include_all)
        return Response(
            export(results, fmt),
            media_type=FORMATS[fmt].media_type,
            headers={
                "Content-Disposition": f'attachment; filename="{export_filename(parsed.query, fmt)}"',
                "X-Result-Count": str(len(results)),
            },
        )

    def by_id(kind: str, answer):
        """A handler for `/…/{<kind>_id}`: 422 for an id over 500 characters, else `answer(request, id)`."""

        def handle(request: Request) -> Response:
            value = request.path_params[f"{kind}_id"]
            return json_error(422, f"{kind} id too long") if len(value) > 500 else answer(request, value)

        return handle

    def passage(request: Request, passage_id: str) -> Response:
        found = service.passage(passage_id)
        return JSONResponse(found) if found else json_error(404, f"no passage {passage_id!r}")

    def citations(request: Request, paper_id: str) -> Response:
        found = service.citations(paper_id)
        if found is None:
            return json_error(404, f"no paper {paper_id!r} in the index")
        return JSONResponse(found)

    def paper_export(request: Request, paper_id: str) -> Response:
        """One paper's citation (the page's "copy BibTeX"): `?format=bibtex|ris|csv`, shown inline."""
        fmt = request.query_params.get("format", "bibtex")
        if fmt not in FORMATS:
            return json_error(422, f"format must be one of {', '.join(FORMATS)}")
        found = service.paper(paper_id)
        if found is None:
            return json_error(404, f"no paper {paper_id!r} in the index")
        return Response(export([found], fmt), media_type=FORMATS[fmt].media_type)

    def pdf(request: Request) -> Response:
        path = service.pdf_path(request.path_params["sha256"])
        if path is None:
            return json_error(404, "no stored PDF with that hash")
        name = request.path_params.get("name")
        if name is not None and not PDF_NAME.fullmatch(name):
            return json_error(404, "a PDF name is letters, digits and hyphens, ending in .pdf")
        return FileResponse(
            path, media_type="application/pdf", filename=name, content_disposition_type="inline"
        )

    return Starlette(
        routes=[
            *alert_routes(),
            Route("/", index),
            Route("/api/health", health),
            Route("/api/search", search, methods=["GET", "POST"]),
            Route("/api/export", export_results, methods=["GET"]),
            Route("/api/passages/{passage_id:path}", by_id("passage", passage)),
            Route("/api/papers/{paper_id:path}/citations", by_id("paper", citations)),
            Route("/api/papers/{paper_id:path}/export", by_id("paper", paper_export)),
            Route("/pdf/{sha256}", pdf),
            Route("/pdf/{sha256}/{name}", pdf),
        ],
        middleware=[Middleware(LocalRequestsOnly, allowed_hosts=host_names(allowed_hosts))],
    )
