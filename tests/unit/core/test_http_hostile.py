"""The HTTP layer against hostile servers: a body over its cap, a server that trickles, redirect loops, bad
gzip, transport errors, a cached body the caller cannot parse, PDF URLs that point inside (SSRF), and API keys
that must not follow a redirect to another origin (two real servers on two ports)."""

from __future__ import annotations

import gzip
import socket
import time

import hostile
import httpx
import pytest

from lumina_assets.core.http import HttpClient, HttpError, UrlPolicy
from lumina_assets.corpus.arxiv import ArxivClient, ArxivError
from lumina_assets.parsing.pdf_store import PdfStore, download_pdf, fetch_paper_pdf
from resources.parsing import ParsingConfig
from resources.providers import ExaResource, SemanticScholarResource


@pytest.fixture
def server(tmp_path):
    with hostile.hostile_server(tmp_path) as running:
        yield running


@pytest.fixture
def other_server(tmp_path):
    with hostile.hostile_server(tmp_path) as running:
        yield running


def _mock(handler, **kwargs) -> HttpClient:
    return HttpClient(transport=httpx.MockTransport(handler), sleep=lambda s: None, **kwargs)


# ---------------------------------------------------------------- size, time, errors


def test_streamed_body_is_cut_at_the_cap(server):
    client = HttpClient(max_retries=0)
    started = time.monotonic()
    with pytest.raises(HttpError) as info:
        client.get(f"{server.url}/flood?mb=600", max_bytes=2 * 1024 * 1024)
    assert info.value.reason == "too_large" and "byte cap" in str(info.value)
    assert time.monotonic() - started < 20  # stopped after ~2 MB, not after reading 600 MB


def test_declared_length_over_the_cap_is_refused_before_reading():
    client = _mock(lambda r: httpx.Response(200, content=b"x" * 5000), max_bytes=1000)
    with pytest.raises(HttpError) as info:
        client.get("https://api.example.org/big")
    assert info.value.reason == "too_large" and "announces 5000 bytes" in str(info.value)


def test_a_trickling_server_hits_the_total_deadline(server):
    client = HttpClient(timeout=30, deadline=2.0, max_retries=3)
    started = time.monotonic()
    with pytest.raises(HttpError) as info:
        client.get(f"{server.url}/trickle?every=0.3")
    assert info.value.reason == "deadline"
    assert time.monotonic() - started < 8  # the per-read timeout (30 s) alone would never end it


def test_redirect_loop_is_an_http_error_naming_the_redacted_url():
    def loop(request):
        return httpx.Response(302, headers={"Location": "/loop?api_key=secret-value"})

    client = _mock(loop)
    with pytest.raises(HttpError) as info:
        client.get("https://api.example.org/loop", params={"api_key": "secret-value"})
    assert info.value.reason == "redirects" and "secret-value" not in str(info.value)
    assert "api_key=%2A%2A%2A" in info.value.url or "api_key=***" in info.value.url


def test_bad_gzip_body_is_an_http_error():
    def broken(request):
        return httpx.Response(200, content=b"definitely not gzip", headers={"Content-Encoding": "gzip"})

    with pytest.raises(HttpError) as info:
        _mock(broken).get("https://api.example.org/x")
    assert info.value.reason == "bad_body"
    ok = _mock(
        lambda r: httpx.Response(
            200, content=gzip.compress(b'{"a": 1}'), headers={"Content-Encoding": "gzip"}
        )
    )
    assert ok.get_json("https://api.example.org/x") == {"a": 1}


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("refused"),
        httpx.RemoteProtocolError("peer closed"),
        httpx.ReadTimeout("slow"),
        httpx.LocalProtocolError("bad request line"),
        httpx.UnsupportedProtocol("gopher"),
        httpx.DecodingError("bad charset"),
        httpx.TooManyRedirects("loop"),
        httpx.StreamClosed(),
        httpx.InvalidURL("bad url"),
    ],
)
def test_every_httpx_error_becomes_an_http_error(error):
    def fail(request):
        raise error

    with pytest.raises(HttpError) as info:
        _mock(fail, max_retries=1).get("https://api.example.org/x?token=abc")
    assert "api.example.org/x" in str(info.value) and "abc" not in str(info.value)


def test_feed_that_does_not_parse_is_evicted_from_the_cache(tmp_path, shared_data):
    good = (
        next((shared_data / "recorded").rglob("*.xml"), None) if (shared_data / "recorded").exists() else None
    )
    feed = (
        good.read_text() if good else ('<feed xmlns="http://www.w3.org/2005/Atom"><title>ok</title></feed>')
    )
    answers = iter([httpx.Response(200, text="<html>rate limited</html>"), httpx.Response(200, text=feed)])
    calls = []

    def handler(request):
        calls.append(str(request.url))
        return next(answers)

    client = ArxivClient(_mock(handler, base_url="https://export.arxiv.org/api", cache_dir=tmp_path))
    with pytest.raises(ArxivError):
        client.query(search_query="all:bombs")
    page = client.query(search_query="all:bombs")  # asked again: the bad body was not kept
    assert len(calls) == 2 and page.errors == []
    client.query(search_query="all:bombs")  # the good one is cached
    assert len(calls) == 2


def test_json_with_lone_surrogates_is_repaired():
    body = b'{"title": "bad \\ud800 title", "authors": ["ok", "\\udfff"], "raw": "caf\xe9"}'
    value = _mock(lambda r: httpx.Response(200, content=body)).get_json("https://api.example.org/w")
    assert value["title"] == "bad \ufffd title" and value["authors"] == ["ok", "\ufffd"]
    assert value["raw"] == "caf\ufffd"
    for text in (value["title"], *value["authors"], value["raw"]):
        text.encode("utf-8")


# ---------------------------------------------------------------- SSRF


def test_url_policy_refuses_non_http_schemes_and_inner_addresses():
    public = UrlPolicy(
        allow_private=False, resolver=lambda host, port, **kw: [(0, 0, 0, "", ("93.184.216.34", port))]
    )
    public.check("https://papers.example.org/a.pdf")
    for url in (
        "file:///etc/passwd",
        "ftp://papers.example.org/a.pdf",
        "http://127.0.0.1:8080/a.pdf",
        "http://[::1]/a.pdf",
        "http://10.1.2.3/a.pdf",
        "http://192.168.0.10/a.pdf",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/a.pdf",
        "http://100.100.100.200/latest/meta-data",
    ):
        with pytest.raises(HttpError) as info:
            public.check(url)
        assert info.value.reason == "blocked_url", url
    inner = UrlPolicy(
        allow_private=False, resolver=lambda host, port, **kw: [(0, 0, 0, "", ("10.0.0.7", port))]
    )
    with pytest.raises(HttpError):
        inner.check("https://intranet.example.org/a.pdf")  # a public-looking name resolving inside
    UrlPolicy(allow_private=True).check("http://127.0.0.1/a.pdf")
    with pytest.raises(HttpError):
        UrlPolicy(allow_private=True).check("file:///etc/passwd")  # the switch never allows other schemes


def test_redirect_to_the_metadata_address_is_refused_at_the_hop():
    seen = []

    def handler(request):
        seen.append(request.url.host)
        return httpx.Response(302, headers={"Location": "http://169.254.169.254/latest/meta-data/iam"})

    policy = UrlPolicy(
        allow_private=False, resolver=lambda host, port, **kw: [(0, 0, 0, "", ("93.184.216.34", port))]
    )
    client = _mock(handler, url_policy=policy)
    row = fetch_paper_pdf(
        {"paper_id": "p", "pdf_urls": ["https://oa.example.org/paper.pdf"]}, PdfStore(), client
    )
    assert (row["status"], row["reason"]) == ("failed", "blocked_url")
    assert seen == ["oa.example.org"]  # the metadata address was never asked


def test_pdf_download_from_loopback_needs_the_switch(server, data_dir, shared_data):
    pdf = shared_data / "pdfs" / "N18-3011.pdf"
    url = f"{server.url}/pdf?file={pdf}"
    paper = {"paper_id": "p", "pdf_urls": [url]}
    refused = fetch_paper_pdf(paper, PdfStore(), ParsingConfig().http_client())
    assert (refused["status"], refused["reason"]) == ("failed", "blocked_url")
    assert server.requests() == []  # nothing reached the server
    allowed = fetch_paper_pdf(paper, PdfStore(), ParsingConfig(allow_private_pdf_urls=True).http_client())
    assert allowed["status"] == "ok" and allowed["bytes"] == pdf.stat().st_size


def test_pdf_flood_is_cut_at_the_pdf_cap(server):
    client = ParsingConfig(allow_private_pdf_urls=True, max_pdf_mb=2).http_client()
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        download_pdf(client, f"{server.url}/flood?mb=600", max_bytes=2 * 1024 * 1024)
    assert getattr(info.value, "reason", None) == "too_large"
    assert time.monotonic() - started < 20


# ---------------------------------------------------------------- keys and redirects


def _hops(server, other_server, path: str, *, status: int = 302) -> str:
    return f"/redirect?status={status}&to={other_server.url}/echo/{path}"


def test_api_keys_never_follow_a_redirect_to_another_origin(server, other_server):
    assert server.port != other_server.port
    s2 = SemanticScholarResource(api_key="s2-secret-key", base_url=server.url, cache_responses=False)
    client = s2.get_client()
    client.http.get_json(_hops(server, other_server, "s2"))
    exa = ExaResource(api_key="exa-secret-key", base_url=server.url, cache_responses=False).get_client()
    exa.http.post_json(_hops(server, other_server, "exa", status=307), {"query": "q"})
    bearer = HttpClient(
        base_url=server.url, headers={"Authorization": "Bearer tok-123", "X-Custom-Token": "t"}
    )
    bearer.get_json(_hops(server, other_server, "bearer"))

    first_hops = server.requests()
    assert {r["headers"].get("x-api-key") for r in first_hops} >= {"s2-secret-key", "exa-secret-key"}
    landed = other_server.requests()
    assert len(landed) == 3
    for request in landed:
        headers = request["headers"]
        assert (
            "x-api-key" not in headers and "authorization" not in headers and "x-custom-token" not in headers
        )
        assert "secret" not in str(request) and "tok-123" not in str(request)


def test_same_origin_redirect_keeps_the_key(server):
    s2 = SemanticScholarResource(api_key="s2-secret-key", base_url=server.url, cache_responses=False)
    echoed = s2.get_client().http.get_json(f"/redirect?to={server.url}/echo/same")
    assert echoed["headers"].get("x-api-key") == "s2-secret-key"


def test_resolver_failure_is_an_http_error():
    def fail(*args, **kwargs):
        raise socket.gaierror("no such host")

    with pytest.raises(HttpError) as info:
        UrlPolicy(allow_private=False, resolver=fail).check("https://nowhere.invalid/a.pdf")
    assert "cannot resolve" in str(info.value)
