"""Checks every parser runs before reading a file, so bad input ends as a recorded reason, never a crash."""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from lumina_assets.core.sandbox import DEFAULT_MEMORY_MB, DEFAULT_WALL_SECONDS, Limits
from lumina_assets.parsing.base import ParseFailure

PDF_MAGIC = b"%PDF-"
DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_PAGES = 500
# A real paper's content streams decode to a few megabytes at most, and MuPDF needs many times a stream's size in
# memory to interpret it: a stream past this is a decompression bomb.
DEFAULT_MAX_STREAM_BYTES = 32 * 1024 * 1024
_FILTER_NAMES = re.compile(r"/(\w+)")


@dataclass(frozen=True)
class PdfLimits:
    """Every limit on the work one PDF may cause (metadata or parsing); `ParsingConfig` fills it from config.
    `memory_mb` is what one document may add to its worker's address space; 0 switches a limit off."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_pages: int = DEFAULT_MAX_PAGES
    max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES
    wall_seconds: float = DEFAULT_WALL_SECONDS
    memory_mb: int = DEFAULT_MEMORY_MB

    def process(self) -> Limits:
        return Limits(wall_seconds=self.wall_seconds, memory_mb=self.memory_mb)


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


def inflated_size(raw: bytes, limit: int) -> int:
    """What a FlateDecode stream decodes to, inflated a megabyte at a time and counted only to just past `limit`
    (never held whole); a broken stream counts what inflated before the break (MuPDF repairs or rejects it)."""
    inflater, total, data = zlib.decompressobj(), 0, raw
    try:
        while data and total <= limit:
            total += len(inflater.decompress(data, 1 << 20))
            data = inflater.unconsumed_tail
    except zlib.error:
        pass
    return total


def check_streams(doc, *, max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES) -> None:
    """Reject a document with a Flate stream (page content, form, font: anything but an image, whose size
    MuPDF bounds by its dimensions) that decodes past `max_stream_bytes`, before MuPDF inflates it whole."""
    if max_stream_bytes <= 0:
        return
    for xref in range(1, doc.xref_length()):
        if not doc.xref_is_stream(xref) or doc.xref_get_key(xref, "Subtype")[1] == "/Image":
            continue
        filters = _FILTER_NAMES.findall(doc.xref_get_key(xref, "Filter")[1])
        if filters != ["FlateDecode"]:
            continue  # unfiltered streams are as large as the file; other chains are left to the limits
        if inflated_size(doc.xref_stream_raw(xref), max_stream_bytes) > max_stream_bytes:
            raise ParseFailure(
                "stream_too_large",
                f"object {xref} decodes past the {max_stream_bytes // (1024 * 1024)} MB stream limit",
            )


@dataclass(kw_only=True, eq=False)
class FileLimits:
    """The file limits every parser takes, and its checked open."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_pages: int = DEFAULT_MAX_PAGES
    max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES

    def open_checked(self, path: Path | str):
        """`check_file`, then the PyMuPDF document, rejecting corrupt, encrypted, zero-page, oversized and bomb
        documents."""
        import pymupdf

        check_file(path, max_bytes=self.max_bytes)
        try:
            doc = pymupdf.open(str(path), filetype="pdf")
        except Exception as exc:  # MuPDF raises FileDataError / RuntimeError variants for broken files
            raise ParseFailure("corrupt", f"{type(exc).__name__}: {str(exc)[:200]}") from None
        try:
            if doc.needs_pass:
                raise ParseFailure("encrypted", "the PDF needs a password")
            if doc.page_count == 0:
                raise ParseFailure("zero_pages", "the PDF has no pages")
            if doc.page_count > self.max_pages:
                raise ParseFailure(
                    "too_many_pages", f"{doc.page_count} pages exceeds the {self.max_pages} page cap"
                )
            check_streams(doc, max_stream_bytes=self.max_stream_bytes)
        except ParseFailure:
            doc.close()
            raise
        return doc
