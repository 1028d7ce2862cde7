"""Serve recorded API responses (vcrpy cassettes and plain bodies from ../shared/data/api_fixtures) through an
httpx transport, so the real clients run unchanged against real responses."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import yaml


@dataclass
class Interaction:
    method: str
    uri: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return unquote(urlsplit(self.uri).path)


def _decode_body(raw, headers: dict[str, str]) -> bytes:
    body = raw.get("string", b"") if isinstance(raw, dict) else raw
    if isinstance(body, str):
        body = body.encode("utf-8")
    encoding = headers.get("content-encoding", "").lower()
    if encoding == "gzip" or body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    elif encoding == "deflate":
        body = zlib.decompress(body)
    return body


def load_cassette(path: Path) -> list[Interaction]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    interactions = []
    for item in data["interactions"]:
        request, response = item["request"], item["response"]
        headers = {
            k.lower(): (v[0] if isinstance(v, list) else v)
            for k, v in (response.get("headers") or {}).items()
        }
        body = _decode_body(response.get("body") or {}, headers)
        headers.pop("content-encoding", None)
        headers.pop("transfer-encoding", None)
        headers.pop("content-length", None)
        interactions.append(
            Interaction(request["method"], request["uri"], response["status"]["code"], headers, body)
        )
    return interactions


@dataclass
class RecordingTransport(httpx.MockTransport):
    """Answers each request with the first route whose predicate matches; counts calls; 404 otherwise."""

    routes: list[tuple[Callable[[httpx.Request], bool], Callable[[httpx.Request], httpx.Response]]] = field(
        default_factory=list
    )
    calls: list[httpx.Request] = field(default_factory=list)

    def __post_init__(self):
        super().__init__(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        for predicate, responder in self.routes:
            if predicate(request):
                return responder(request)
        return httpx.Response(404, json={"error": f"no recording for {request.url.path}"})

    def add(self, predicate, responder) -> RecordingTransport:
        self.routes.append((predicate, responder))
        return self

    def add_json(self, predicate, body) -> RecordingTransport:
        payload = json.dumps(body).encode()
        return self.add(
            predicate,
            lambda r: httpx.Response(200, content=payload, headers={"content-type": "application/json"}),
        )

    def add_interaction(self, interaction: Interaction, predicate=None) -> RecordingTransport:
        predicate = predicate or (lambda r, i=interaction: unquote(r.url.path) == i.path)
        return self.add(
            predicate,
            lambda r, i=interaction: httpx.Response(i.status, content=i.body, headers=i.headers),
        )
