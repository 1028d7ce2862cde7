"""The JSON body of a POST and the JSON error response, shared by the search API (`api.py`) and the alerts routes
(`alerts_api.py`)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from lumina_assets.search.request import BadRequest, decode_json_body

MAX_BODY_BYTES = 16 * 1024


def json_error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def read_json_post(request: Request) -> Any:
    """A POST's JSON body, or the error Response in its place: 415 unless JSON (a cross-site form cannot post),
    413 past the cap, 400 when it does not decode."""
    if (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower() != "application/json":
        return json_error(415, "a POST body must be application/json")
    body = await _capped_body(request)
    if body is None:
        return json_error(413, f"request body too large (at most {MAX_BODY_BYTES} bytes)")
    try:
        return decode_json_body(body)
    except BadRequest as error:
        return json_error(400, str(error))


async def _capped_body(request: Request) -> bytes | None:
    """The body; None as soon as more than MAX_BODY_BYTES have arrived (a declared Content-Length before reading, a
    chunked or lying body as it streams), so the server never holds more than the cap plus one chunk."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
