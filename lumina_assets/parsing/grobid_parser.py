"""GROBID through grobid-client-python (a self-hosted service, not the shared HttpClient): the PDF goes to
`processFulltextDocument` on `GROBID_URL` and `tei.parse_tei` turns the TEI into a ParsedPaper."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lumina_assets.core import settings
from lumina_assets.core.schemas import ParsedPaper
from lumina_assets.parsing.base import ParseFailure, ParserUnavailable
from lumina_assets.parsing.preflight import FileLimits, check_file
from lumina_assets.parsing.tei import parse_tei

DEFAULT_GROBID_URL = "http://localhost:8070"


def grobid_url_from_env(url: str | None = None) -> str:
    return (url or settings.get().parsing.grobid_url or DEFAULT_GROBID_URL).rstrip("/")


@dataclass(kw_only=True, eq=False)
class GrobidParser(FileLimits):
    name: ClassVar[str] = "grobid"
    version: ClassVar[str] = "1.1"
    grobid_url: str | None = None
    timeout: int = 180
    _client: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.grobid_url = grobid_url_from_env(self.grobid_url)

    def client(self):
        """The grobid client, created once after `/api/isalive` answered; ParserUnavailable otherwise."""
        if self._client is None:
            from grobid_client.grobid_client import GrobidClient, ServerUnavailableException

            client = GrobidClient(grobid_server=self.grobid_url, timeout=self.timeout, check_server=False)
            try:
                alive, status = client.ping()
            except ServerUnavailableException:
                raise ParserUnavailable(f"GROBID server at {self.grobid_url} is not reachable") from None
            if not alive:
                raise ParserUnavailable(
                    f"GROBID server at {self.grobid_url} is not alive (isalive HTTP {status})"
                )
            self._client = client
        return self._client

    def _process(self, service: str, path: Path | str, *, full_text: bool):
        """(path, HTTP status, TEI text) from one GROBID service; citations and coordinates for the full text only."""
        return self.client().process_pdf(
            service,
            str(path),
            generate_ids=False,
            consolidate_header=False,  # no CrossRef lookups: the PDF's own header and bibliography
            consolidate_citations=False,
            include_raw_citations=full_text,
            include_raw_affiliations=False,
            tei_coordinates=full_text,
            segment_sentences=False,
        )

    def parse(self, path: Path | str, paper_id: str) -> ParsedPaper:
        with self.open_checked(path) as doc:  # GROBID would turn bad files into opaque 500s
            page_count = doc.page_count
        _, status, text = self._process("processFulltextDocument", path, full_text=True)
        if status == 204:
            raise ParseFailure("empty_result", "GROBID extracted no content (HTTP 204)")
        if status != 200:
            raise ParseFailure("grobid_error", f"HTTP {status} from {self.grobid_url}: {(text or '')[:200]}")
        if not text or not text.strip():
            raise ParseFailure("empty_result", "GROBID answered 200 with an empty body")
        paper = parse_tei(text.encode("utf-8"), paper_id, parser=self.name)
        paper.page_count = page_count
        if not (paper.sections or paper.abstract):
            raise ParseFailure("empty_result", "GROBID TEI has neither body sections nor an abstract")
        return paper

    def header(self, path: Path | str) -> dict:
        """The PDF's header as GROBID reads it (`processHeaderDocument`): title, authors, venue, year, DOI.
        ParserUnavailable without a server, ParseFailure on a GROBID error."""
        from lumina_assets.parsing.tei import parse_tei_header

        check_file(path, max_bytes=self.max_bytes)
        _, status, text = self._process("processHeaderDocument", path, full_text=False)
        if status != 200 or not text:
            raise ParseFailure("grobid_error", f"HTTP {status} from {self.grobid_url} for the header")
        return parse_tei_header(text.encode("utf-8"))
