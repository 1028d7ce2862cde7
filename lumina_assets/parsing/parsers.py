"""Parsers by name (`get_parser`), each module imported only when asked for (unstructured needs an optional
package); and the combined parser: structure from GROBID (PyMuPDF when no GROBID answers), table content from the
first table parser that can run here; one that cannot is skipped with a warning. The parser name recorded says which
contributed (`combined:grobid+pymupdf`)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lumina_assets.core.schemas import Element, ParsedPaper
from lumina_assets.parsing.base import ParseFailure, ParserUnavailable, PdfParser

log = logging.getLogger(__name__)
_NUMBER = re.compile(r"(\d+|[IVXL]+)")
TABLE_PARSERS = ("unstructured", "pymupdf")  # the first that runs here gives the combined parser its tables


def get_parser(name: str, **options: Any) -> PdfParser:
    """A parser by name (`pymupdf`, `grobid`, `unstructured`, `combined`) built with its options."""
    if name == "pymupdf":
        from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser

        return PyMuPdfParser(**options)
    if name == "grobid":
        from lumina_assets.parsing.grobid_parser import GrobidParser

        return GrobidParser(**options)
    if name == "unstructured":
        from lumina_assets.parsing.unstructured_parser import UnstructuredParser

        return UnstructuredParser(**options)
    if name == "combined":
        return CombinedParser(**options)
    raise ValueError(f"unknown parser {name!r}; known: combined, grobid, pymupdf, unstructured")


def _table_key(element: Element) -> str | None:
    match = _NUMBER.search(element.label or "") or _NUMBER.search(element.caption[:20])
    return match.group(1) if match else None


def merge_tables(paper: ParsedPaper, tables: list[Element]) -> int:
    """Give each table of `paper` the content of the same-numbered table from another parser when that content
    is richer; tables only the other parser found are appended. Returns how many tables changed."""
    by_key = {_table_key(t): t for t in tables if t.kind == "table" and t.content.strip()}
    changed = 0
    for element in paper.elements:
        if element.kind != "table":
            continue
        other = by_key.pop(_table_key(element), None)
        if other is not None and len(other.content) > len(element.content):
            element.content = other.content
            changed += 1
    for other in by_key.values():
        paper.elements.append(other)
        changed += 1
    return changed


@dataclass(kw_only=True, eq=False)
class CombinedParser:
    name: ClassVar[str] = "combined"
    version: ClassVar[str] = "1.0"
    parser_options: dict[str, dict] = field(default_factory=dict)  # parser name -> its options
    _parsers: dict[str, PdfParser] = field(default_factory=dict, init=False, repr=False)

    def _parser(self, name: str) -> PdfParser:
        if name not in self._parsers:
            options = dict(self.parser_options.get(name, {}))
            if name == "pymupdf":
                options.setdefault("tables", "finder")  # here tables are the point, so take the slow finder
            self._parsers[name] = get_parser(name, **options)
        return self._parsers[name]

    def parse(self, path: Path | str, paper_id: str) -> ParsedPaper:
        used = "grobid"
        try:
            paper = self._parser(used).parse(path, paper_id)
        except ParserUnavailable as exc:
            log.warning("grobid unavailable (%s); structure from pymupdf instead", exc.detail)
            used = "pymupdf"
            paper = self._parser(used).parse(path, paper_id)
        table_source = None
        for name in TABLE_PARSERS:
            try:
                tables = [e for e in self._parser(name).parse(path, paper_id).elements if e.kind == "table"]
            except ParserUnavailable as exc:
                log.warning("table parser %s unavailable: %s", name, exc.detail)
                continue
            except ParseFailure as exc:
                log.warning("table parser %s failed on %s: %s", name, paper_id, exc)
                continue
            if tables:
                merge_tables(paper, tables)
                table_source = name
                break
        paper.parser = f"combined:{used}+{table_source or 'none'}"
        return paper
