"""The reading pass of the PyMuPDF parser: blocks in reading order become front matter, the abstract, sections
(headings from `pdf_headings`, footnotes kept with their section, paragraphs joined across column and page
breaks) and the reference list's lines; captions and formulas (`pdf_elements`) are placed in the section they
appear in."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lumina_assets.core.schemas import Element, Reference, Section
from lumina_assets.parsing.base import ensure_unique_numbers, join_lines
from lumina_assets.parsing.pdf_headings import KNOWN_HEADINGS, REFERENCE_HEADINGS, Heading, detect_heading
from lumina_assets.parsing.pdf_layout import Block, Layout, Line, Page, reading_order
from lumina_assets.parsing.references import ReferenceLine, parse_reference, split_reference_lines
from lumina_assets.parsing.sentences import last_sentence

_FOOTNOTE_START = re.compile(r"^\d{1,3}(?=[A-Z][a-z])")


@dataclass
class SectionReader:
    """Reads pages block by block; `mode` is the part of the paper being read: front | abstract | body |
    references."""

    layout: Layout
    sections: list[Section] = field(default_factory=list)
    front: list[list[str]] = field(default_factory=list)
    abstract: list[list[str]] = field(default_factory=list)
    ref_lines: list[tuple[ReferenceLine, float, bool]] = field(default_factory=list)
    mode: str = "front"
    current: Section | None = None
    paragraphs: list[list[str]] = field(default_factory=list)
    placed: list[tuple[Element, Section | None]] = field(default_factory=list)
    after_refs: bool = False
    footnotes: list[str] = field(default_factory=list)

    def read_page(self, page: Page, elements: dict[int, Element]) -> None:
        ordered = reading_order(page)
        for position in range(len(ordered)):
            self._read_block(page, ordered, position, elements)

    def close_section(self) -> None:
        if self.current is not None:
            body = [join_lines(p) for p in self.paragraphs if p] + self.footnotes
            self.current.text = "\n\n".join(body).strip()
            if self.current.text or self.current.title:
                self.sections.append(self.current)
        self.current, self.paragraphs = None, []
        self.footnotes.clear()

    def finish(self) -> tuple[str, list[Section], list[Reference], list[Element]]:
        """(abstract, sections, references, placed elements) once every page is read: without an abstract
        heading the longest front-matter paragraph is the abstract; elements without text are left out."""
        self.close_section()
        abstract_text = "\n\n".join(join_lines(p) for p in self.abstract).strip()
        if not abstract_text:
            prose = [join_lines(p) for p in self.front if len(" ".join(p).split()) >= 60]
            abstract_text = max(prose, key=len) if prose else ""
        sections = self.sections
        if not sections and not abstract_text and self.front:
            sections.append(
                Section(number="0", title="", text="\n\n".join(join_lines(p) for p in self.front))
            )
        references = [
            parse_reference(f"b{i}", text)
            for i, text in enumerate(split_reference_lines(_without_footnotes(self.ref_lines)))
        ]
        sections = ensure_unique_numbers([s for s in sections if s.text.strip() or s.title])
        elements = []
        for element, owner in self.placed:
            if (element.caption or element.content).strip():
                element.section_number = owner.number if owner is not None else None
                elements.append(element)
        return abstract_text, sections, references, elements

    def _read_block(
        self, page: Page, ordered: list[Block], position: int, elements: dict[int, Element]
    ) -> None:
        block = ordered[position]
        element = elements.get(id(block))
        if element is not None:
            self._place(element)
            return
        if block.consumed:
            return
        lines = [line for line in block.lines if line.text]
        if not lines:
            return
        heading = self._heading(lines, block, ordered, position)
        if (
            heading is None
            and self.mode == "body"
            and block.y0 > page.height * 0.6
            and block.size < self.layout.body_size - 1.2
        ):
            # A footnote: kept with its section but out of the paragraph flow it interrupts.
            self.footnotes.append(join_lines([line.text for line in lines]))
            return
        if heading is not None:
            lines = self._open_section(heading, lines, block)
            if not lines:
                return
        elif (
            self.mode == "front" and lines[0].text.lower().startswith("abstract") and len(lines[0].text) > 12
        ):
            self.mode = "abstract"  # run-in "Abstract—We present ..." / "Abstract. We ..."
            lines[0].text = re.sub(r"^abstract\s*[.:—–-]?\s*", "", lines[0].text, flags=re.I)
        self._add_text(lines, block, page)

    def _place(self, element: Element) -> None:
        if element.kind == "formula" and self.paragraphs and self.paragraphs[-1]:
            # the complete sentence that introduces it, not a cut-off fragment of the line above
            element.caption = last_sentence(join_lines(self.paragraphs[-1]))
        self.placed.append((element, self.current))

    def _heading(
        self, lines: list[Line], block: Block, ordered: list[Block], position: int
    ) -> Heading | None:
        heading = detect_heading(
            lines[0],
            lines[1] if len(lines) > 1 else None,
            block,
            self.layout,
            after_refs=self.after_refs,
            started=self.mode not in ("front", "abstract") or bool(self.sections),
        )
        if heading is not None and not heading.number and heading.title.lower() not in KNOWN_HEADINGS:
            following = next((b for b in ordered[position + 1 :] if not b.consumed), None)
            if following is not None and len(block.lines) == 1 and not following.is_prose():
                return None  # a bold line over tabular text is a table's header row, not a heading
        return heading

    def _open_section(self, heading: Heading, lines: list[Line], block: Block) -> list[Line]:
        """Closes the section before and switches mode; returns the block's lines after the heading (which may
        continue on a second line of the same style)."""
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
        self.close_section()
        if lowered == "abstract" and not heading.number:
            self.mode = "abstract"
        elif lowered in REFERENCE_HEADINGS:
            self.mode = "references"
            self.after_refs = True
        else:
            self.mode = "body"
            self.current = Section(
                number=heading.number,
                title=heading.title,
                text="",
                page_start=block.page,
                page_end=block.page,
            )
        return rest

    def _add_text(self, lines: list[Line], block: Block, page: Page) -> None:
        texts = [line.text for line in lines]
        if self.mode == "references":
            low = block.y0 > page.height * 0.75
            self.ref_lines += [
                (ReferenceLine(line.text, line.x0, line.page, block.column, id(block)), line.size, low)
                for line in lines
            ]
        elif self.mode == "abstract":
            self.abstract.append(texts)
        elif self.mode == "front":
            self.front.append(texts)
        else:
            if self.current is None:
                self.current = Section(
                    number="0", title="", text="", page_start=block.page, page_end=block.page
                )
            self.current.page_end = block.page
            if self.paragraphs and self.paragraphs[-1] and _continues(self.paragraphs[-1][-1], texts[0]):
                self.paragraphs[-1].extend(texts)
            else:
                self.paragraphs.append(texts)


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
