"""Parsing stage settings: which parser, limits for bad input, the chunk size and the failure threshold."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from lumina_assets.core.http import HttpClient
from lumina_assets.parsing.base import PdfParser, get_parser
from lumina_assets.parsing.chunking import DEFAULT_MAX_TOKENS


class ParsingConfig(dg.ConfigurableResource):
    parser: str = Field(default="pymupdf", description="pymupdf | grobid | unstructured | combined")
    pymupdf_tables: str = Field(default="fast", description="fast (rows from text) | finder (PyMuPDF) | off")
    combined_table_parsers: list[str] = Field(default_factory=lambda: ["unstructured", "pymupdf"])
    max_pdf_mb: float = Field(default=100.0, description="larger files are recorded as too_large, not parsed")
    max_pages: int = 500
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, description="passage limit in embedding-model tokens")
    tokenizer: str = Field(default="", description="tokenizer path / name; empty = the bundled MiniLM model")
    failure_threshold: float = Field(
        default=0.25, description="parse_failure_rate check fails above this share"
    )
    workers: int = Field(default=1, description="parse in this many processes (1 = in the run's process)")
    download_pdfs: bool = True
    download_timeout_s: float = 60.0
    download_max_retries: int = 2

    @property
    def max_bytes(self) -> int:
        return int(self.max_pdf_mb * 1024 * 1024)

    def build_parser(self, grobid_options: dict | None = None) -> PdfParser:
        limits = {"max_bytes": self.max_bytes, "max_pages": self.max_pages}
        grobid = {**(grobid_options or {}), **limits}
        if self.parser == "pymupdf":
            return get_parser("pymupdf", tables=self.pymupdf_tables, **limits)
        if self.parser == "grobid":
            return get_parser("grobid", **grobid)
        if self.parser == "unstructured":
            return get_parser("unstructured", **limits)
        if self.parser == "combined":
            return get_parser(
                "combined",
                table_parsers=tuple(self.combined_table_parsers),
                parser_options={"grobid": grobid, "pymupdf": limits, "unstructured": limits},
            )
        raise ValueError(f"unknown parser {self.parser!r}")

    def http_client(self, transport=None) -> HttpClient:
        """Downloads go through the shared HTTP layer; PDFs are binary, so never through its text cache."""
        return HttpClient(
            timeout=self.download_timeout_s, max_retries=self.download_max_retries, transport=transport
        )
