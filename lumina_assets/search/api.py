"""The HTTP API and web page of `lumina serve` (Starlette; run by uvicorn, bound to 127.0.0.1 by default).

    GET  /                          the search page
    GET  /api/search?q=...&k=10     search (also POST /api/search with a JSON body: query, k, page, year_min,
                                    year_max, author, venue, overview)
    GET  /api/passages/{id}         one passage with its previous and next passage
    GET  /api/papers/{id}/citations what a paper cites / what cites it within the corpus
    GET  /pdf/{sha256}              a stored PDF, by content hash only
    GET  /api/health

Bad input is a 4xx with {"error": message}: an empty query, one over 1000 characters, a body over 16 KB, control
characters, k outside 1..50, page outside 1..20, an unknown field. Handlers are sync functions, so Starlette runs
them in its thread pool and the engine pool (results.EnginePool) bounds concurrent searches.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from lumina_assets.search.request import BadRequest, SearchRequest
from lumina_assets.search.results import SearchService

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024
PAGE = Path(__file__).with_name("web") / "index.html"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(service: SearchService) -> Starlette:
    page_html = PAGE.read_text(encoding="utf-8")

    def index(request: Request) -> Response:
        return HTMLResponse(
            page_html, headers={"Content-Security-Policy": "default-src 'self' 'unsafe-inline'"}
        )

    def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def search(request: Request) -> Response:
        if request.method == "POST":
            declared = request.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                return _error(413, f"request body too large (at most {MAX_BODY_BYTES} bytes)")
            body = await request.body()
            if len(body) > MAX_BODY_BYTES:
                return _error(413, f"request body too large (at most {MAX_BODY_BYTES} bytes)")
            try:
                data = json.loads(body or b"null")
            except (ValueError, UnicodeDecodeError):
                return _error(400, "the body is not valid JSON")
        else:
            if len(str(request.url)) > MAX_BODY_BYTES:
                return _error(414, "URL too long")
            data = dict(request.query_params)
        try:
            parsed = SearchRequest.from_mapping(data)
        except BadRequest as error:
            return _error(422 if "too long" not in str(error) else 413, str(error))
        from starlette.concurrency import run_in_threadpool

        try:
            answer = await run_in_threadpool(service.search, parsed)
        except Exception as error:  # an index problem is the server's, reported without a traceback
            log.exception("search failed")
            return _error(503, f"search unavailable: {type(error).__name__}: {error}")
        return JSONResponse(answer)

    def passage(request: Request) -> Response:
        passage_id = request.path_params["passage_id"]
        if len(passage_id) > 500:
            return _error(422, "passage id too long")
        found = service.passage(passage_id)
        return JSONResponse(found) if found else _error(404, f"no passage {passage_id!r}")

    def citations(request: Request) -> Response:
        paper_id = request.path_params["paper_id"]
        if len(paper_id) > 500:
            return _error(422, "paper id too long")
        return JSONResponse(service.citations(paper_id))

    def pdf(request: Request) -> Response:
        path = service.pdf_path(request.path_params["sha256"])
        if path is None:
            return _error(404, "no stored PDF with that hash")
        return FileResponse(path, media_type="application/pdf")

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/health", health),
            Route("/api/search", search, methods=["GET", "POST"]),
            Route("/api/passages/{passage_id:path}", passage),
            Route("/api/papers/{paper_id:path}/citations", citations),
            Route("/pdf/{sha256}", pdf),
        ]
    )
