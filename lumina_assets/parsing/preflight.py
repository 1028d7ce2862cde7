"""Checks every parser runs before reading a file, so bad input ends as a recorded reason, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

from lumina_assets.parsing.base import ParseFailure

PDF_MAGIC = b"%PDF-"
DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_PAGES = 500


def check_file(path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """Size, `%PDF` magic and an `%%EOF` trailer; returns the size in bytes."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ParseFailure("missing_file", f"{path.name}: {exc.strerror}") from None
    if size == 0:
        raise ParseFailure("empty_file", path.name)
    if size > max_bytes:
        raise ParseFailure("too_large", f"{size} bytes exceeds the {max_bytes} byte cap")
    with path.open("rb") as handle:
        head = handle.read(1024)
        handle.seek(max(0, size - 2048), os.SEEK_SET)
        tail = handle.read()
    if PDF_MAGIC not in head:
        raise ParseFailure("not_pdf", f"no %PDF header in the first 1024 bytes (starts {head[:8]!r})")
    if b"%%EOF" not in tail:
        # A cut download: MuPDF would "repair" it silently and return whatever pages survived.
        raise ParseFailure("truncated", "no %%EOF trailer at the end of the file")
    return size


def open_pdf(path: Path | str, *, max_pages: int = DEFAULT_MAX_PAGES):
    """Open with PyMuPDF and reject corrupt, encrypted, zero-page and oversized documents."""
    import pymupdf

    try:
        doc = pymupdf.open(str(path), filetype="pdf")
    except Exception as exc:  # MuPDF raises FileDataError / RuntimeError variants for broken files
        raise ParseFailure("corrupt", f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if doc.needs_pass:
        doc.close()
        raise ParseFailure("encrypted", "the PDF needs a password")
    if doc.page_count == 0:
        doc.close()
        raise ParseFailure("zero_pages", "the PDF has no pages")
    if doc.page_count > max_pages:
        count = doc.page_count
        doc.close()
        raise ParseFailure("too_many_pages", f"{count} pages exceeds the {max_pages} page cap")
    return doc
