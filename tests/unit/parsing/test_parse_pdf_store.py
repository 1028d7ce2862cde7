"""PDF intake: downloads through the shared HttpClient (served by an httpx mock transport), the content-addressed
store, and the recorded reasons for everything that is not a PDF."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from lumina_assets.core.http import HttpClient
from lumina_assets.parsing.pdf_store import PdfStore, fetch_paper_pdf, remove_stale_temp_files


@pytest.fixture
def pdf_bytes(shared_data) -> bytes:
    return (shared_data / "pdfs" / "N18-3011.pdf").read_bytes()


def _client(routes: dict[str, httpx.Response | list[httpx.Response]], calls: list[str]) -> HttpClient:
    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        answer = routes[str(request.url)]
        return answer.pop(0) if isinstance(answer, list) else answer

    return HttpClient(transport=httpx.MockTransport(handler), sleep=lambda s: None, max_retries=2)


def test_download_skips_landing_pages_and_stores_by_hash(data_dir, pdf_bytes):
    calls: list[str] = []
    client = _client(
        {
            "https://publisher.example/landing": httpx.Response(
                200, content=b"<html>Buy this article</html>", headers={"Content-Type": "text/html"}
            ),
            "https://arxiv.example/pdf/1": [
                httpx.Response(503, headers={"Retry-After": "0"}),
                httpx.Response(200, content=pdf_bytes, headers={"Content-Type": "application/pdf"}),
            ],
        },
        calls,
    )
    store = PdfStore()
    paper = {
        "paper_id": "doi:10.1/x",
        "pdf_urls": ["https://publisher.example/landing", "https://arxiv.example/pdf/1"],
    }
    row = fetch_paper_pdf(paper, store, client)
    sha = hashlib.sha256(pdf_bytes).hexdigest()
    assert (row["status"], row["sha256"], row["bytes"]) == ("ok", sha, len(pdf_bytes))
    assert row["source_url"] == "https://arxiv.example/pdf/1"
    assert row["path"] == str(data_dir / "pdfs" / sha[:2] / f"{sha}.pdf")
    assert (data_dir / "pdfs" / sha[:2] / f"{sha}.pdf").read_bytes() == pdf_bytes
    assert client.stats.retries == 1  # the 503 was retried by the shared layer
    assert not list((data_dir / "pdfs").glob(".incoming-*"))  # no temp file left behind

    # A re-run reuses the stored file: no request at all.
    calls.clear()
    again = fetch_paper_pdf(paper, store, client, previous=row)
    assert again["reason"] == "reused" and again["path"] == row["path"] and calls == []


def test_every_failure_has_a_reason(data_dir, pdf_bytes, tmp_path):
    calls: list[str] = []
    client = _client(
        {
            "https://a.example/missing": httpx.Response(404),
            "https://a.example/big": httpx.Response(
                200, content=pdf_bytes, headers={"Content-Type": "application/pdf"}
            ),
            "https://a.example/text": httpx.Response(
                200, content=b"hello", headers={"Content-Type": "text/plain"}
            ),
        },
        calls,
    )
    store = PdfStore()
    missing = fetch_paper_pdf({"paper_id": "a", "pdf_urls": ["https://a.example/missing"]}, store, client)
    assert (missing["status"], missing["reason"]) == ("failed", "http_error")
    big = fetch_paper_pdf(
        {"paper_id": "b", "pdf_urls": ["https://a.example/big"]}, store, client, max_bytes=1000
    )
    assert (big["status"], big["reason"]) == ("failed", "too_large")
    text = fetch_paper_pdf({"paper_id": "c", "pdf_urls": ["https://a.example/text"]}, store, client)
    assert (text["status"], text["reason"]) == ("failed", "not_pdf")
    both = fetch_paper_pdf(
        {"paper_id": "d", "pdf_urls": ["https://a.example/missing", "https://a.example/text"]}, store, client
    )
    assert both["reason"] == "not_pdf" and both["detail"] == "http_error,not_pdf"
    beir = fetch_paper_pdf({"paper_id": "beir-scifact:1", "pdf_urls": []}, store, client)
    assert (beir["status"], beir["reason"]) == ("no_pdf", "no local file and no pdf_urls")
    gone = fetch_paper_pdf({"paper_id": "e", "local_path": str(tmp_path / "nope.pdf")}, store, client)
    assert (gone["status"], gone["reason"]) == ("failed", "missing_local_file")
    fake = tmp_path / "fake.pdf"
    fake.write_text("not a pdf at all")
    assert fetch_paper_pdf({"paper_id": "f", "local_path": str(fake)}, store, client)["reason"] == "not_pdf"
    assert not (data_dir / "pdfs").exists() or not list((data_dir / "pdfs").rglob("*.pdf"))


def test_store_is_content_addressed_and_cleans_killed_downloads(data_dir, pdf_bytes, shared_data):
    store = PdfStore()
    first = store.put_bytes(pdf_bytes)
    second = store.put_file(shared_data / "pdfs" / "N18-3011.pdf")
    assert first == second and len(list(store.root.rglob("*.pdf"))) == 1
    (store.root / ".incoming-killed.part").write_bytes(pdf_bytes[:100])
    assert remove_stale_temp_files(store) == 1
    assert not list(store.root.glob(".incoming-*"))
