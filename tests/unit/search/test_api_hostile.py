"""`lumina serve` against hostile clients: a chunked body far over the cap (cut while it streams, on a real uvicorn
server), DNS rebinding (a foreign Host), cross-origin and `text/plain` POSTs, a GET that must not reach the LLM,
JSON that decodes badly (lone surrogates, deep nesting, NaN / Infinity / 1e400: 4xx, never 5xx), and an index
without passages (served, saying how to fill it)."""

from __future__ import annotations

import logging
import socket

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from starlette.testclient import TestClient

from bench.serve_load import serve_in_thread
from lumina_assets.cli.serve import allowed_hosts
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.api import create_app
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.http_json import MAX_BODY_BYTES
from lumina_assets.search.results import SearchService

PAPERS = [
    (
        "Citation graphs for scientific retrieval",
        "Citations train document embeddings. A cited paper is a positive.",
    ),
    ("Protein folding with attention", "Attention layers predict residue contacts in proteins."),
    ("Venue prediction from abstracts", "The venue of a paper is predicted from its abstract text."),
]


def _index(uri: str, *, empty: bool = False) -> None:
    passages, papers = [], []
    for number, (title, abstract) in enumerate(PAPERS):
        paper_id = f"doi:10.1/h{number}"
        papers.append({"paper_id": paper_id, "title": title, "abstract": abstract, "source": "test"})
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    db = connect_lancedb(uri)
    indexing.index_corpus(db, frame, pl.DataFrame(papers), HashingEmbedder())
    if empty:  # what a corpus run that indexed nothing leaves: the tables, without a row
        db.open_table(indexing.PASSAGES_TABLE).delete("true")


class CountingLLM:
    """An LLM client that answers with one cited sentence and counts its calls."""

    is_offline = False
    label = "counting test LLM"
    model = "counting"

    def __init__(self):
        self.calls = 0

    def complete(self, prompt, **kwargs):
        from lumina_assets.core.llm import LLMReply

        self.calls += 1
        return LLMReply("Citations train document embeddings [1].", 10, 5, None, False, "test", "counting")


@pytest.fixture(scope="module")
def index_uri(tmp_path_factory) -> str:
    uri = str(tmp_path_factory.mktemp("api-hostile") / "lancedb")
    _index(uri)
    return uri


@pytest.fixture()
def llm() -> CountingLLM:
    return CountingLLM()


@pytest.fixture()
def service(index_uri, data_dir, llm) -> SearchService:
    embedder = HashingEmbedder()
    return SearchService(
        lambda: SearchEngine(index_uri, embedder, SearchConfig()), pool_size=1, llm_client=llm
    )


@pytest.fixture()
def http(service) -> TestClient:
    return TestClient(create_app(service), base_url="http://127.0.0.1:8765")


class Untouched:
    """A service no request may reach (the server refuses before searching)."""

    def __getattr__(self, name):
        raise AssertionError(f"the service was asked for {name}")


def _read_response(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        pass
    return data


# ---------------------------------------------------------------- body size, whatever the framing


def test_a_chunked_body_over_the_cap_is_refused_while_it_streams():
    """Before: the 16 KB cap was checked on Content-Length only, so a chunked body was read whole (1 GB took the
    server from 0.8 to 2.9 GB). Here 1 MB of chunks is sent and the body never finished: the 413 must already
    be there, so the server stopped reading near the cap instead of waiting for the end of the body."""
    server, thread, port = serve_in_thread(create_app(Untouched()))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b'{"query": "' + b"x" * 32_000
            sent = 0
            try:
                while sent < 1024 * 1024:
                    sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server closed the connection after refusing: what is wanted
            answer = _read_response(sock, timeout=10)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b"too large" in answer
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_chunked_body_under_the_cap_is_read(http):
    body = b'{"query": "citation embeddings", "k": 2, "overview": false}'

    def chunks():
        yield body[:10]
        yield body[10:]

    response = http.post("/api/search", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["k"] == 2
    over = http.post(
        "/api/search",
        content=iter([b"x" * MAX_BODY_BYTES, b"y"]),
        headers={"content-type": "application/json"},
    )
    assert over.status_code == 413


# ---------------------------------------------------------------- Host, Origin, content type, LLM on GET


def test_a_foreign_host_is_refused_dns_rebinding():
    """Before: any Host was answered, so a page whose name was rebound to 127.0.0.1 could read the index."""
    client = TestClient(create_app(Untouched()), base_url="http://attacker.example:8765")
    response = client.get("/api/search", params={"q": "anything"})
    assert response.status_code == 400 and "--allow-host" in response.json()["error"]
    assert client.get("/pdf/" + "0" * 64).status_code == 400
    assert client.get("/", headers={"host": "127.0.0.1.attacker.example"}).status_code == 400


def test_loopback_names_and_allowed_hosts_are_served(service):
    for base in ("http://127.0.0.1:8765", "http://localhost:8765", "http://[::1]:8765"):
        assert TestClient(create_app(service), base_url=base).get("/api/health").status_code == 200, base
    named = create_app(service, allowed_hosts=allowed_hosts("0.0.0.0", ["search.lab.example"]))
    assert TestClient(named, base_url="http://search.lab.example").get("/api/health").status_code == 200
    assert TestClient(named, base_url="http://0.0.0.0:8765").get("/api/health").status_code == 400
    assert TestClient(named, base_url="http://other.example").get("/api/health").status_code == 400
    anything = create_app(service, allowed_hosts=["*"])
    assert TestClient(anything, base_url="http://whatever.example").get("/api/health").status_code == 200


def test_a_cross_origin_request_is_refused(http):
    body = {"query": "citation embeddings", "overview": False}
    for origin in ("http://attacker.example", "null", "http://127.0.0.1:9999", "file://"):
        response = http.post("/api/search", json=body, headers={"origin": origin})
        assert response.status_code == 403, origin
    assert (
        http.get("/api/search", params={"q": "x"}, headers={"origin": "http://evil.example"}).status_code
        == 403
    )
    same = http.post("/api/search", json=body, headers={"origin": "http://127.0.0.1:8765"})
    assert same.status_code == 200, same.text


def test_a_post_must_be_application_json(http):
    """Before: `text/plain` POSTs were answered, and a cross-site page can send those without a preflight."""
    body = b'{"query": "citation embeddings", "overview": false}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        headers = {"content-type": content_type} if content_type else {}
        response = http.post("/api/search", content=body, headers=headers)
        assert response.status_code == 415, content_type
    ok = http.post("/api/search", content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200


def test_a_get_never_calls_the_llm(http, llm):
    """Before: with an LLM configured, a plain GET (a link, an <img> on any page) wrote an LLM overview."""
    got = http.get("/api/search", params={"q": "citation embeddings"})
    assert got.status_code == 200 and got.json()["overview"]["method"] == "extractive"
    assert llm.calls == 0
    posted = http.post("/api/search", json={"query": "citation embeddings"})
    assert posted.json()["overview"]["method"] == "llm" and llm.calls == 1


# ---------------------------------------------------------------- decoding errors are 4xx


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b'{"query": "cells \\ud800 here"}', "lone surrogate"),
        (b'{"query": "ok", "author": "\\udfff"}', "lone surrogate"),
        (b'{"\\ud83d": "key"}', "lone surrogate"),
        (b"[" * 5000 + b"]" * 5000, "JSON"),
        (b'{"query": ' + b'{"a":' * 2500 + b"1" + b"}" * 2501, "JSON"),
        (b'{"query": "x", "k": Infinity}', "Infinity"),
        (b'{"query": "x", "k": NaN}', "NaN"),
        (b'{"query": "x", "k": -Infinity}', "Infinity"),
        (b"\xff\xfe{}", "UTF-8"),
        (b"{not json", "JSON"),
    ],
)
def test_every_decoding_error_is_a_400_without_a_traceback(http, caplog, body, fragment):
    """Before: a lone surrogate gave 503 with the exception text and a logged traceback; deep nesting and
    Infinity gave 500."""
    with caplog.at_level(logging.DEBUG):
        response = http.post("/api/search", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert fragment in response.json()["error"]
    assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)


def test_a_number_that_reads_as_infinity_is_a_422(http):
    response = http.post(
        "/api/search", content=b'{"query": "x", "k": 1e400}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and "k must be an integer" in response.json()["error"]


# ---------------------------------------------------------------- an index without passages


def test_an_empty_index_is_served_and_says_how_to_fill_it(tmp_path, data_dir):
    """Before: `MemoryStore.__init__` died with ArrowNotImplementedError ('array_take' ... (string, null)) on an
    index without passages, so `lumina serve` did not start."""
    uri = str(tmp_path / "lancedb")
    _index(uri, empty=True)
    embedder = HashingEmbedder()
    service = SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1)
    service.warm_up()
    http = TestClient(create_app(service), base_url="http://127.0.0.1:8765")
    health = http.get("/api/health").json()
    assert health["index"] == "empty" and "make demo" in health["message"] and "inbox" in health["message"]
    answer = http.post("/api/search", json={"query": "citation"})
    assert answer.status_code == 200 and answer.json()["results"] == []
    assert "empty" in answer.json()["message"] and "make demo" in answer.json()["message"]
    assert str(data_dir / "inbox") in answer.json()["message"]


def test_serve_started_on_an_empty_index_prints_how_to_fill_it(tmp_path, data_dir, monkeypatch, capsys):
    """The command itself: it serves (uvicorn.run is reached) and says the index is empty."""
    import uvicorn

    from lumina_assets.cli import serve

    uri = str(tmp_path / "lancedb")
    _index(uri, empty=True)
    embedder = HashingEmbedder()
    monkeypatch.setattr(
        serve,
        "build_service",
        lambda uri, **kw: SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1),
    )
    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.append(kw))

    class Args:
        db, engines, no_llm, no_sentence_backfill = uri, 1, True, True
        host, port, allow_host = "127.0.0.1", 0, []

    assert serve._serve(Args()) == 0 and served
    assert "index is empty" in capsys.readouterr().err
