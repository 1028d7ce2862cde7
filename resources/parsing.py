"""Parsing stage settings: which parser, the limits that keep a hostile PDF to one recorded failure, the
chunk size and the check that tells a few bad files from a parser that fails everything."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from lumina_assets.core.http import HttpClient, UrlPolicy
from lumina_assets.core.sandbox import DEFAULT_MEMORY_MB, DEFAULT_WALL_SECONDS
from lumina_assets.parsing.base import PdfParser
from lumina_assets.parsing.chunking import DEFAULT_MAX_TOKENS
from lumina_assets.parsing.parsers import get_parser
from lumina_assets.parsing.preflight import DEFAULT_MAX_STREAM_BYTES, PdfLimits

MB = 1024 * 1024


class ParsingConfig(dg.ConfigurableResource):
    parser: str = Field(default="pymupdf", description="pymupdf | grobid | unstructured | combined")
    max_pdf_mb: float = Field(
        default=100.0,
        description="larger files (local or downloaded) are recorded as too_large, never opened",
    )
    max_pages: int = 500
    max_stream_mb: float = Field(
        default=DEFAULT_MAX_STREAM_BYTES / MB,
        description="a PDF stream that decodes past this is a decompression bomb (stream_too_large); 0 = off",
    )
    document_timeout_s: float = Field(
        default=DEFAULT_WALL_SECONDS,
        description="wall time one PDF may take (metadata or parse) before its worker is killed (time_limit)",
    )
    worker_memory_mb: int = Field(
        default=DEFAULT_MEMORY_MB,
        description="memory one PDF may add to its worker process (RLIMIT_AS) before memory_limit; 0 = off",
    )
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, description="passage limit in embedding-model tokens")
    tokenizer: str = Field(default="", description="tokenizer path / name; empty = the bundled MiniLM model")
    failure_threshold: float = Field(
        default=0.25,
        description="parse_failure_rate fails above this share of parser failures (parser_error, crashes)",
    )
    failure_check_min_documents: int = Field(
        default=10, description="the failure-rate rule applies from this many PDFs in a batch"
    )
    workers: int = Field(default=1, description="parse this many PDFs at a time (each in its own process)")
    download_pdfs: bool = True
    download_timeout_s: float = Field(default=60.0, description="connect / read timeout of one download")
    download_deadline_s: float = Field(default=300.0, description="total time one download may take")
    download_max_retries: int = 2
    allow_private_pdf_urls: bool = Field(
        default=False,
        description="fetch PDF URLs on loopback / private / link-local hosts (LUMINA_ALLOW_PRIVATE_URLS)",
    )

    @property
    def max_bytes(self) -> int:
        return int(self.max_pdf_mb * MB)

    def pdf_limits(self) -> PdfLimits:
        return PdfLimits(
            max_bytes=self.max_bytes,
            max_pages=self.max_pages,
            max_stream_bytes=int(self.max_stream_mb * MB),
            wall_seconds=self.document_timeout_s,
            memory_mb=self.worker_memory_mb,
        )

    def build_parser(self, grobid_options: dict | None = None) -> PdfParser:
        limits = {
            "max_bytes": self.max_bytes,
            "max_pages": self.max_pages,
            "max_stream_bytes": int(self.max_stream_mb * MB),
        }
        grobid = {**(grobid_options or {}), **limits}
        options = {
            "pymupdf": limits,
            "grobid": grobid,
            "unstructured": limits,
            "combined": {"parser_options": {"grobid": grobid, "pymupdf": limits, "unstructured": limits}},
        }
        if self.parser not in options:
            raise ValueError(f"unknown parser {self.parser!r}")
        return get_parser(self.parser, **options[self.parser])

    def http_client(self, transport=None) -> HttpClient:
        """Downloads go through the shared HTTP layer (never its text cache), streamed under the PDF size cap
        and a total deadline, and only to public addresses unless private ones are allowed."""
        return HttpClient(
            timeout=self.download_timeout_s,
            deadline=self.download_deadline_s,
            max_bytes=self.max_bytes,
            max_retries=self.download_max_retries,
            url_policy=UrlPolicy(allow_private=self.allow_private_pdf_urls),
            transport=transport,
        )
