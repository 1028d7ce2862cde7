"""Content-addressed PDF store (data/pdfs/<sha[:2]>/<sha>.pdf) and the download or intake of one paper's PDF: every
file lands through a temp file and an atomic rename, and the same bytes always map to the same path."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumina_assets.core import settings
from lumina_assets.core.http import HttpClient, HttpError
from lumina_assets.parsing.base import ParseFailure

DEFAULT_MAX_PDF_BYTES = 100 * 1024 * 1024
PDF_MAGIC = b"%PDF-"


class PdfFetchError(ParseFailure):
    """A PDF that could not be obtained; `reason` is a short code recorded in the pdf_files table."""


@dataclass(frozen=True)
class StoredPdf:
    sha256: str
    path: Path
    bytes: int


class PdfStore:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root else settings.pdf_dir()

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}.pdf"

    def put_bytes(self, data: bytes) -> StoredPdf:
        return self._put(io.BytesIO(data))

    def put_file(self, source: Path | str) -> StoredPdf:
        """Copy a local PDF in (hashing while copying): the store stays valid if the inbox file moves later."""
        with open(source, "rb") as src:
            return self._put(src)

    def _put(self, src) -> StoredPdf:
        self.root.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=self.root, prefix=".incoming-", suffix=".part")
        tmp = Path(name)
        digest = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(handle, "wb") as out:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            stored = StoredPdf(digest.hexdigest(), self.path_for(digest.hexdigest()), size)
            stored.path.parent.mkdir(parents=True, exist_ok=True)
            if not (stored.path.exists() and stored.path.stat().st_size == size):
                os.replace(tmp, stored.path)  # else already stored: same bytes, same address
            return stored
        finally:
            tmp.unlink(missing_ok=True)


def check_pdf_bytes(head: bytes, size: int, *, max_bytes: int, content_type: str = "") -> None:
    """Size cap, content type and `%PDF` magic; raises PdfFetchError with the reason."""
    if size == 0:
        raise PdfFetchError("empty", "zero bytes")
    if size > max_bytes:
        raise PdfFetchError("too_large", f"{size} bytes exceeds the {max_bytes} byte cap")
    if PDF_MAGIC not in head[:1024]:
        kind = content_type.split(";")[0].strip().lower()
        if kind.startswith("text/html"):
            raise PdfFetchError(
                "html_instead_of_pdf", "the server sent a web page (a paywall or landing page)"
            )
        raise PdfFetchError("not_pdf", f"no %PDF header ({kind or 'no content type'})")


def download_pdf(client: HttpClient, url: str, *, max_bytes: int = DEFAULT_MAX_PDF_BYTES) -> bytes:
    """GET one PDF through the shared HTTP layer (retries, rate limit, the client's URL policy at every
    redirect; never the text cache), streamed under `max_bytes`, and validate it."""
    try:
        response = client.request(
            "GET",
            url,
            use_cache=False,
            headers={"Accept": "application/pdf,*/*;q=0.5"},
            max_bytes=max_bytes,
        )
    except HttpError as exc:
        reason = exc.reason if exc.reason in ("too_large", "blocked_url", "deadline") else "http_error"
        raise PdfFetchError(reason, str(exc)) from None
    content_type = {k.lower(): v for k, v in response.headers.items()}.get("content-type", "")
    declared = content_type.split(";")[0].strip().lower()
    data = response.content
    check_pdf_bytes(data[:1024], len(data), max_bytes=max_bytes, content_type=content_type)
    if declared.startswith(("image/", "audio/", "video/")):
        raise PdfFetchError("not_pdf", f"content type {declared}")
    # Other labels (text/plain, application/x-download ...) are common mislabels: the magic decided.
    return data


def _stored_row(row: dict, stored: StoredPdf, source_url: str) -> dict:
    """The `pdf_files` row of a paper whose PDF is now in the store."""
    return {
        **row,
        "sha256": stored.sha256,
        "path": str(stored.path),
        "bytes": stored.bytes,
        "status": "ok",
        "reason": None,
        "source_url": source_url,
    }


def fetch_paper_pdf(
    paper: dict[str, Any],
    store: PdfStore,
    client: HttpClient | None,
    *,
    max_bytes: int = DEFAULT_MAX_PDF_BYTES,
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One pdf_files row for one papers row: local file first, else the first working URL; neither (an abstract-only
    BEIR document) is `no_pdf`, not a failure. A previous `ok` row whose file is still stored is reused."""
    row = {"paper_id": paper["paper_id"], "sha256": None, "path": None, "bytes": None, "source_url": None}
    local = paper.get("local_path")
    urls = [u for u in (paper.get("pdf_urls") or []) if u]
    if (
        previous
        and previous.get("status") == "ok"
        and previous.get("path")
        and Path(previous["path"]).exists()
    ):
        same_source = (local and previous.get("source_url") == str(local)) or (
            not local and previous.get("source_url") in urls
        )
        if same_source:
            return {**previous, "reason": "reused"}
    if local:
        source = Path(local)
        try:
            size = source.stat().st_size
            with source.open("rb") as handle:
                head = handle.read(1024)
            check_pdf_bytes(head, size, max_bytes=max_bytes)
            stored = store.put_file(source)
        except FileNotFoundError:
            return {**row, "status": "failed", "reason": "missing_local_file", "source_url": str(local)}
        except PdfFetchError as exc:
            return {**row, "status": "failed", "reason": exc.reason, "source_url": str(local)}
        return _stored_row(row, stored, str(local))
    if not urls:
        return {**row, "status": "no_pdf", "reason": "no local file and no pdf_urls"}
    if client is None:
        return {**row, "status": "failed", "reason": "downloads_disabled"}
    problems: list[str] = []
    for url in urls:
        try:
            data = download_pdf(client, url, max_bytes=max_bytes)
        except PdfFetchError as exc:
            problems.append(exc.reason)
            continue
        stored = store.put_bytes(data)
        return _stored_row(row, stored, url)
    # The reason of the last URL tried is the headline; all of them are kept for the record.
    return {
        **row,
        "status": "failed",
        "reason": problems[-1],
        "source_url": urls[-1],
        "detail": ",".join(problems),
    }


def remove_stale_temp_files(store: PdfStore) -> int:
    """Leftovers of killed downloads (never visible under a real name) are deleted on the next run."""
    leftovers = list(store.root.glob(".incoming-*.part"))
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    return len(leftovers)
