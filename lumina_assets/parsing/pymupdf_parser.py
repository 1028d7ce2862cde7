"""The default parser: PyMuPDF text with layout heuristics, fast and offline.

One text page per PDF page (images off, ligatures expanded) feeds everything: the layout (`pdf_layout`: lines,
blocks, running headers / footers, two-column reading order), headings (`pdf_headings`), captions, tables and
display formulas (`pdf_elements`), and the reference list split into parsed entries (`references`). This module
walks the pages once and assembles the sections. PyMuPDF's own table finder costs about a second a page, so it
runs only on pages that carry a table caption (`tables="finder"`); the default `tables="fast"` rebuilds table rows
from the text lines next to the caption.
"""

from __future__ import annotations

import re
from pathlib import Path

from lumina_assets.core.schemas import Element, ParsedPaper, Section
from lumina_assets.parsing.base import ParseFailure, ensure_unique_numbers, join_lines, register
from lumina_assets.parsing.passage_hygiene import last_sentence
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
from lumina_assets.parsing.pdf_headings import KNOWN_HEADINGS, REFERENCE_HEADINGS, detect_heading
from lumina_assets.parsing.pdf_layout import (
    Block,
    Layout,
    Page,
    extract_page,
    reading_order,
    remove_running_text,
)
from lumina_assets.parsing.preflight import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PAGES,
    DEFAULT_MAX_STREAM_BYTES,
    check_file,
    open_pdf,
)
from lumina_assets.parsing.references import (
    ReferenceLine,
    link_citations,
    parse_reference,
    split_reference_lines,
)
from lumina_assets.parsing.titles import clean_title, usable_title_line

_FOOTNOTE_START = re.compile(r"^\d{1,3}(?=[A-Z][a-z])")


class PyMuPdfParser:
    """Layout-aware PyMuPDF parser; `tables` is "fast" (rows rebuilt from text), "finder" (PyMuPDF table
    finder on caption pages) or "off"."""

    name = "pymupdf"
    # 1.1: references parsed into fields, footnotes out of the list, whole formula sentences; 1.2: compounds
    # broken at a line end keep their hyphen ("document-" + "level"); 1.3: a table keeps its header row, and its
    # side of the caption follows the paper's own convention where tables are stacked
    version = "1.3"

    def __init__(
        self,
        *,
        tables: str = "fast",
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        min_chars_per_page: int = 100,
    ):
        if tables not in {"fast", "finder", "off"}:
            raise ValueError(f"tables must be fast, finder or off, not {tables!r}")
        self.tables = tables
        self.max_bytes = max_bytes
        self.max_pages = max_pages
        self.max_stream_bytes = max_stream_bytes
        self.min_chars_per_page = min_chars_per_page

    def parse(self, path: Path | str, paper_id: str) -> ParsedPaper:
        check_file(path, max_bytes=self.max_bytes)
        doc = open_pdf(path, max_pages=self.max_pages, max_stream_bytes=self.max_stream_bytes)
        try:
            return self._parse_document(doc, paper_id)
        except ParseFailure:
            raise
        except Exception as exc:  # a page MuPDF cannot interpret: a recorded failure, not a crashed run
            raise ParseFailure("corrupt", f"{type(exc).__name__}: {str(exc)[:200]}") from None
        finally:
            doc.close()

    # ------------------------------------------------------------ document

    def _parse_document(self, doc, paper_id: str) -> ParsedPaper:
        pages = [extract_page(page, index + 1) for index, page in enumerate(doc)]
        chars = sum(len(line.text) for page in pages for block in page.blocks for line in block.lines)
        if chars < self.min_chars_per_page * max(1, min(len(pages), 3)) / 3:
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
        candidates = [
            line
            for block in first.blocks
            for line in block.lines
            if line.y0 < first.height * 0.45 and len(line.text) >= 15 and len(line.text.split()) >= 3
        ]
        candidates = [line for line in candidates if usable_title_line(line.text, direction=None)]
        if candidates:
            biggest = max(line.size for line in candidates)
            # a title's short last line ("Citation-informed Transformers", "Beyond Summarization:") belongs to it
            title_lines = [
                line
                for block in first.blocks
                for line in block.lines
                if line.y0 < first.height * 0.45
                and abs(line.size - biggest) <= 0.3
                and len(line.text.strip()) >= 2
                and usable_title_line(line.text, direction=None)
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
                kind = "table" if match.group("kind").lower().startswith("tab") else "figure"
                label = f"{'Table' if kind == 'table' else 'Figure'} {match.group('num')}"
                caption = block.text[match.end() :].strip()
                element = Element(kind=kind, label=label, caption=caption, page=page.number)
                elements[id(block)] = element
                block.consumed = True
                if kind == "table":
                    table_pages.append(block)
                if self.tables == "off" and kind == "table":
                    continue
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
            if table_pages and self.tables == "finder":
                self._finder_tables(doc[page.number - 1], page, table_pages, elements)
            for group in formula_groups(blocks):
                merged = Block(
                    lines=[line for b in group for line in b.lines],
                    x0=min(b.x0 for b in group),
                    y0=min(b.y0 for b in group),
                    x1=max(b.x1 for b in group),
                    y1=max(b.y1 for b in group),
                    page=page.number,
                )
                if not is_formula(merged):
                    continue
                text = " ".join(
                    line.text for line in sorted(merged.lines, key=lambda ln: (round(ln.y0), ln.x0))
                )
                number = EQ_NUMBER.search(text)
                elements[id(group[0])] = Element(
                    kind="formula",
                    label=f"({number.group('n')})" if number else None,
                    caption="",
                    content=EQ_NUMBER.sub("", text).strip() if number else text,
                    page=page.number,
                )
                for block in group:
                    block.consumed = True
        return elements

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

    # ------------------------------------------------------------ sections

    def _structure(
        self, pages: list[Page], layout: Layout, title: str, elements: dict[int, Element], paper_id: str
    ) -> ParsedPaper:
        sections: list[Section] = []
        front: list[list[str]] = []
        abstract: list[list[str]] = []
        ref_lines: list[tuple[ReferenceLine, float, bool]] = []
        mode = "front"  # front | abstract | body | references
        current: Section | None = None
        paragraphs: list[list[str]] = []
        placed: list[tuple[Element, Section | None]] = []
        after_refs = False

        footnotes: list[str] = []

        def close_section() -> None:
            nonlocal current, paragraphs
            if current is not None:
                body = [join_lines(p) for p in paragraphs if p] + footnotes
                current.text = "\n\n".join(body).strip()
                if current.text or current.title:
                    sections.append(current)
            current, paragraphs = None, []
            footnotes.clear()

        for page in pages:
            ordered = reading_order(page)
            for position, block in enumerate(ordered):
                element = elements.get(id(block))
                if element is not None:
                    if element.kind == "formula" and paragraphs and paragraphs[-1]:
                        # the complete sentence that introduces it, not a cut-off fragment of the line above
                        element.caption = last_sentence(join_lines(paragraphs[-1]))
                    placed.append((element, current))
                    continue
                if block.consumed:
                    continue
                lines = [line for line in block.lines if line.text]
                if not lines:
                    continue
                heading = detect_heading(
                    lines[0],
                    lines[1] if len(lines) > 1 else None,
                    block,
                    layout,
                    after_refs=after_refs,
                    started=mode not in ("front", "abstract") or bool(sections),
                )
                if heading is not None and not heading.number and heading.title.lower() not in KNOWN_HEADINGS:
                    following = next((b for b in ordered[position + 1 :] if not b.consumed), None)
                    if following is not None and len(block.lines) == 1 and not following.is_prose():
                        heading = None  # a bold line over tabular text is a table's header row, not a heading
                if heading is None and mode == "body" and block.y0 > page.height * 0.6:
                    if block.size < layout.body_size - 1.2:
                        # A footnote: kept with its section but out of the paragraph flow it interrupts.
                        footnotes.append(join_lines([line.text for line in lines]))
                        continue
                if heading is not None:
                    # A heading may continue on a second line of the same style.
                    rest = lines[1:]
                    if (
                        rest
                        and rest[0].bold == lines[0].bold
                        and abs(rest[0].size - lines[0].size) < 0.3
                        and lines[0].bold
                    ):
                        if len(rest[0].text.split()) <= 6 and not rest[0].text.endswith("."):
                            heading.title = f"{heading.title} {rest[0].text}"
                            rest = rest[1:]
                    lowered = heading.title.lower().rstrip(".:")
                    close_section()
                    if lowered == "abstract" and not heading.number:
                        mode = "abstract"
                    elif lowered in REFERENCE_HEADINGS:
                        mode = "references"
                        after_refs = True
                    else:
                        mode = "body"
                        current = Section(
                            number=heading.number,
                            title=heading.title,
                            text="",
                            page_start=block.page,
                            page_end=block.page,
                        )
                    lines = rest
                    if not lines:
                        continue
                elif (
                    mode == "front"
                    and lines[0].text.lower().startswith("abstract")
                    and len(lines[0].text) > 12
                ):
                    mode = "abstract"  # run-in "Abstract—We present ..." / "Abstract. We ..."
                    lines[0].text = re.sub(r"^abstract\s*[.:—–-]?\s*", "", lines[0].text, flags=re.I)
                texts = [line.text for line in lines]
                if mode == "references":
                    low = block.y0 > page.height * 0.75
                    ref_lines += [
                        (
                            ReferenceLine(line.text, line.x0, line.page, block.column, id(block)),
                            line.size,
                            low,
                        )
                        for line in lines
                    ]
                elif mode == "abstract":
                    abstract.append(texts)
                elif mode == "front":
                    front.append(texts)
                else:
                    if current is None:
                        current = Section(
                            number="0", title="", text="", page_start=block.page, page_end=block.page
                        )
                    current.page_end = block.page
                    if paragraphs and paragraphs[-1] and _continues(paragraphs[-1][-1], texts[0]):
                        paragraphs[-1].extend(texts)
                    else:
                        paragraphs.append(texts)
        close_section()

        abstract_text = "\n\n".join(join_lines(p) for p in abstract).strip()
        if not abstract_text:
            prose = [join_lines(p) for p in front if len(" ".join(p).split()) >= 60]
            abstract_text = max(prose, key=len) if prose else ""
        if not sections and not abstract_text and front:
            sections.append(Section(number="0", title="", text="\n\n".join(join_lines(p) for p in front)))
        references = [
            parse_reference(f"b{i}", text)
            for i, text in enumerate(split_reference_lines(_without_footnotes(ref_lines)))
        ]
        sections = ensure_unique_numbers([s for s in sections if s.text.strip() or s.title])
        elements_out = []
        for element, owner in placed:
            if (element.caption or element.content).strip():
                element.section_number = owner.number if owner is not None else None
                elements_out.append(element)
        return ParsedPaper(
            paper_id=paper_id,
            parser=self.name,
            title=title,
            abstract=abstract_text,
            sections=sections,
            references=references,
            citations=link_citations(sections, references),
            elements=elements_out,
        )


def _without_footnotes(lines: list[tuple[ReferenceLine, float, bool]]) -> list[ReferenceLine]:
    """The reference list without the footnotes of the pages it runs through ("19The Kaggle CORD-19 ..." cutting an
    entry in two): a block low on the page that is set smaller than the list or starts with a footnote number."""
    if not lines:
        return []
    sizes = sorted(size for _, size, _ in lines)
    usual = sizes[len(sizes) // 2]
    footnote_blocks = {
        line.block
        for position, (line, _, low) in enumerate(lines)
        if low
        and _FOOTNOTE_START.match(line.text)
        and (position == 0 or lines[position - 1][0].block != line.block)
    }
    return [
        line
        for line, size, low in lines
        if not (low and size < usual - 1.0) and line.block not in footnote_blocks
    ]


def _continues(previous: str, following: str) -> bool:
    """A paragraph cut by a column or page break continues when the previous text does not end a sentence."""
    previous = previous.rstrip()
    return bool(previous) and previous[-1] not in ".!?:" and following[:1].islower()


@register("pymupdf")
def _factory(**options) -> PyMuPdfParser:
    return PyMuPdfParser(**options)
