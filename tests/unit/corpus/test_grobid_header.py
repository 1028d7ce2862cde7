"""Where GROBID_URL is set, GROBID's header wins over what the PDF's own text says; without a reachable GROBID the
PDF's fields stand. The server is a local stand-in answering `processHeaderDocument` with GROBID's real TEI."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lumina_assets.corpus.library import load_local_corpus
from lumina_assets.corpus.local import pdf_metadata


class _HeaderGrobid(BaseHTTPRequestHandler):
    tei: bytes = b""
    paths: list[str] = []

    def do_GET(self):  # noqa: N802
        self._send(200 if self.path == "/api/isalive" else 404, b"true")

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).paths.append(self.path)
        self._send(200 if self.path == "/api/processHeaderDocument" else 404, self.tei)

    def _send(self, status: int, body: bytes):
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def grobid(shared_data):
    tei = (shared_data / "grobid_tei" / "N18-3011.tei.xml").read_bytes()
    handler = type("Handler", (_HeaderGrobid,), {"tei": tei, "paths": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_grobid_header_wins(grobid, shared_data):
    handler, url = grobid
    paper = pdf_metadata(shared_data / "pdfs" / "N18-3011.pdf", grobid_url=url)
    assert handler.paths == ["/api/processHeaderDocument"]
    assert "Madeleine Van Zuylen" in paper.authors  # GROBID's spelling; the page prints "van Zuylen"
    assert len(paper.authors) == 23
    sources = dict(entry.split(":", 1) for entry in paper.metadata_sources)
    assert sources["authors"] == "grobid" and sources["title"] == "grobid"
    assert sources["venue"] == "pdf_text"  # GROBID's header for this paper names no venue: the page's stands


def test_grobid_url_setting_reaches_the_folder_loader(grobid, shared_data, monkeypatch):
    _, url = grobid
    monkeypatch.setenv("GROBID_URL", url)
    (paper,) = load_local_corpus(shared_data / "pdfs" / "N18-3011.pdf").papers
    assert "authors:grobid" in paper.metadata_sources


def test_unreachable_grobid_leaves_the_pdf_fields(shared_data):
    paper = pdf_metadata(shared_data / "pdfs" / "N18-3011.pdf", grobid_url="http://127.0.0.1:9")
    assert "Madeleine van Zuylen" in paper.authors and "authors:pdf_text" in paper.metadata_sources
