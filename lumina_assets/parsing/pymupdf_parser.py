"""The default parser: PyMuPDF text with layout heuristics, fast and offline.

One text page per PDF page feeds the layout (`pdf_layout`), headings (`pdf_headings`), captions, tables and display
formulas (`pdf_elements`), the reading pass into sections (`pdf_sections`) and the reference list (`references`);
this module extracts the pages, the title and the elements. Table rows are rebuilt from the text lines by the caption
(`tables="fast"`); the combined parser takes PyMuPDF's slow table finder on caption pages (`tables="finder"`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from lumina_assets.core.schemas import Element, ParsedPaper
from lumina_assets.parsing.base import ParseFailure, join_lines
from lumina_assets.parsing.pdf_elements import (
    EQ_NUMBER,
    caption_match,
    cell_rows,
    formula_groups,
    is_formula,
    nearby_nonprose,
    preferred_table_side,
    table_side,
)
from lumina_assets.parsing.pdf_layout import Block, Layout, Page, extract_page, remove_running_text
from lumina_assets.parsing.pdf_sections import SectionReader
from lumina_assets.parsing.preflight import FileLimits
from lumina_assets.parsing.references import link_citations
from lumina_assets.parsing.titles import clean_title, usable_title_line

MIN_CHARS_PER_PAGE = 100  # less text than this is a scan without a text layer


@dataclass(kw_only=True, eq=False)
class PyMuPdfParser(FileLimits):
    name: ClassVar[str] = "pymupdf"
    version: ClassVar[str] = "1.3"  # part of the parser tag: a new version re-parses every paper
    tables: Literal["fast", "finder"] = "fast"

    def parse(self, path: Path | str, paper_id: str) -> ParsedPaper:
        doc = self.open_checked(path)
        try:
            return self._parse_document(doc, paper_id)
        except ParseFailure:
            raise
        except Exception as exc:  # a page MuPDF cannot interpret: a recorded failure, not a crashed run
            raise ParseFailure("corrupt", f"{type(exc).__name__}: {str(exc)[:200]}") from None
        finally:
            doc.close()

    def _parse_document(self, doc, paper_id: str) -> ParsedPaper:
        pages = [extract_page(page, index + 1) for index, page in enumerate(doc)]
        chars = sum(len(line.text) for page in pages for block in page.blocks for line in block.lines)
        if chars < MIN_CHARS_PER_PAGE * max(1, min(len(pages), 3)) / 3:
            raise ParseFailure(
                "no_text_layer", f"{chars} characters of text in {len(pages)} pages (scanned?)"
            )
        remove_running_text(pages)
        layout = Layout(pages)
        title = self._title(pages, doc, layout)
        elements = self._elements(pages, layout, doc)
        paper = self._structure(pages, layout, title, elements, paper_id)
        paper.page_count = len(pages)
        return paper

    def _title(self, pages: list[Page], doc, layout: Layout) -> str:
        first = pages[0]
        top = [
            line
            for block in first.blocks
            for line in block.lines
            if line.y0 < first.height * 0.45 and usable_title_line(line.text, direction=None)
        ]
        candidates = [line for line in top if len(line.text) >= 15 and len(line.text.split()) >= 3]
        if candidates:
            biggest = max(line.size for line in candidates)
            # a title's short last line ("Citation-informed Transformers", "Beyond Summarization:") belongs to it
            title_lines = [
                line for line in top if abs(line.size - biggest) <= 0.3 and len(line.text.strip()) >= 2
            ]
            if biggest >= layout.body_size + 1:
                text = clean_title(
                    join_lines([line.text for line in sorted(title_lines, key=lambda ln: (ln.y0, ln.x0))])
                )
                if 10 <= len(text) <= 300:
                    for line in title_lines:
                        line.text = ""
                    return text
        meta = (doc.metadata or {}).get("title") or ""
        return meta.strip()

    def _elements(self, pages: list[Page], layout: Layout, doc) -> dict[int, Element]:
        """Captions, their tables / figure labels, and display formulas, keyed by the id of the block they replace."""
        elements: dict[int, Element] = {}
        preferred = preferred_table_side(pages, layout) if self.tables == "fast" else 0
        for page in pages:
            blocks = [b for b in page.blocks if any(line.text for line in b.lines)]
            page.blocks = blocks
            table_pages: list[Block] = []
            for block in blocks:
                match = caption_match(block, layout)
                if not match:
                    continue
                element = self._captioned(match, block, blocks, page.number, preferred)
                elements[id(block)] = element
                if element.kind == "table":
                    table_pages.append(block)
            if table_pages and self.tables == "finder":
                self._finder_tables(doc[page.number - 1], page, table_pages, elements)
            _formula_elements(blocks, page.number, elements)
        return elements

    def _captioned(self, match, block: Block, blocks: list[Block], page: int, preferred: int) -> Element:
        """The table or figure a caption names, its body (the non-prose blocks on its side) consumed with it."""
        kind = "table" if match.group("kind").lower().startswith("tab") else "figure"
        label = f"{'Table' if kind == 'table' else 'Figure'} {match.group('num')}"
        caption = block.text[match.end() :].strip()
        element = Element(kind=kind, label=label, caption=caption, page=page)
        block.consumed = True
        above = nearby_nonprose(blocks, block, -1, table=kind == "table")
        below = nearby_nonprose(blocks, block, +1, table=kind == "table")
        if kind == "table":
            body = table_side(above, below, preferred)
        else:
            body = above if len(above) >= len(below) else below
        for part in body:
            part.consumed = True
        lines = [line for part in body for line in part.lines]
        if kind == "table" and self.tables == "fast":
            element.content = "\n".join(cell_rows(lines))
        elif kind == "figure":
            element.content = " ".join(line.text for line in lines)[:500]
        return element

    def _finder_tables(
        self, page, extracted: Page, captions: list[Block], elements: dict[int, Element]
    ) -> None:
        import pymupdf

        try:
            found = page.find_tables().tables
        except Exception:  # the finder is best effort; the caption survives without content
            return
        for table in found:
            rect = pymupdf.Rect(table.bbox)
            nearest = min(captions, key=lambda c: min(abs(c.y0 - rect.y1), abs(c.y1 - rect.y0)))
            element = elements[id(nearest)]
            markdown = table.to_markdown().strip()
            element.content = f"{element.content}\n{markdown}".strip() if element.content else markdown
            for block in extracted.blocks:
                if not block.consumed and rect.contains(pymupdf.Rect(block.x0, block.y0, block.x1, block.y1)):
                    block.consumed = True

    def _structure(
        self, pages: list[Page], layout: Layout, title: str, elements: dict[int, Element], paper_id: str
    ) -> ParsedPaper:
        reader = SectionReader(layout)
        for page in pages:
            reader.read_page(page, elements)
        abstract, sections, references, placed = reader.finish()
        return ParsedPaper(
            paper_id=paper_id,
            parser=self.name,
            title=title,
            abstract=abstract,
            sections=sections,
            references=references,
            citations=link_citations(sections, references),
            elements=placed,
        )


def _formula_elements(blocks: list[Block], page: int, elements: dict[int, Element]) -> None:
    """Display formulas (groups of blocks that read as one), keyed by their first block's id; their blocks consumed."""
    for group in formula_groups(blocks):
        merged = Block(
            lines=[line for b in group for line in b.lines],
            x0=min(b.x0 for b in group),
            y0=min(b.y0 for b in group),
            x1=max(b.x1 for b in group),
            y1=max(b.y1 for b in group),
            page=page,
        )
        if not is_formula(merged):
            continue
        text = " ".join(line.text for line in sorted(merged.lines, key=lambda ln: (round(ln.y0), ln.x0)))
        number = EQ_NUMBER.search(text)
        elements[id(group[0])] = Element(
            kind="formula",
            label=f"({number.group('n')})" if number else None,
            caption="",
            content=EQ_NUMBER.sub("", text).strip() if number else text,
            page=page,
        )
        for block in group:
            block.consumed = True
