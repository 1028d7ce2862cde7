"""The default parser: PyMuPDF text with layout heuristics, fast and offline.

One `get_text("dict")` per page (images off, ligatures expanded) feeds everything: two-column reading order,
running headers / footers / page numbers removed by repetition across pages, headings from font size, weight
and numbering, hyphenation repaired, captions, display formulas, tables and the reference list split into entries.
PyMuPDF's own table finder costs about a second a page, so it runs only on pages that carry a table caption
(`tables="finder"`); the default `tables="fast"` rebuilds table rows from the text lines next to the caption.

Why one module over 500 lines: every heuristic here (running text, reading order, headings, captions, formulas,
tables, reference splitting and citation linking) reads and rewrites the same private per-page records (`_Line`,
`_Block`, `_Page`, `_Layout`) in one pass; split across modules they would become a public API for internals
that exist only for this parser. Parser-independent pieces already live elsewhere (preflight, base, quality).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lumina_assets.core.schemas import CitationLink, Element, ParsedPaper, Reference, Section
from lumina_assets.parsing.base import ParseFailure, ensure_unique_numbers, join_lines, register
from lumina_assets.parsing.preflight import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_PAGES,
    DEFAULT_MAX_STREAM_BYTES,
    check_file,
    open_pdf,
)
from lumina_assets.parsing.titles import clean_title, usable_title_line

# Whitespace kept, ligatures expanded (ﬁ -> fi), images skipped (the slow part of "dict"), mediabox clip.
_TEXT_FLAGS = 2 | 64 | 128
_BOLD_FLAG = 16
_MARGIN = 0.075  # share of the page height that counts as header / footer zone
_MATH_FONT = re.compile(r"CMMI|CMSY|CMEX|MSBM|MSAM|Math|Symbol|STIX|Euclid|rsfs|esint|MT2MIS|MTSY|MTMI", re.I)
_MATH_CHARS = set("=≤≥≈∑∏∫∈∉∀∃∂∇√±×÷→←↔⇒⊂⊆∪∩αβγδεθλμπσφψωΣΠΩΔΓΛ")
_BOLD_FONT = re.compile(r"Bold|Black|Heavy|Semibold|Demi|Medi|[.,-]B$|[.,-]Bd$|-SB$", re.I)
_NUMBERED = re.compile(
    r"^(?P<num>(?:\d{1,2}(?:\.\d{1,2}){0,3}|[A-H](?:\.\d{1,2}){0,3}|[IVX]{1,5}))\.?\s+(?P<title>\S.*)$"
)
_CAPTION = re.compile(
    r"^(?P<kind>Figure|Fig\.|Table|Tab\.)\s*(?P<num>\d+|[IVXL]+|[A-Z]\.?\d+)\s*(?P<sep>[:.|—–-])?\s*", re.I
)
_EQ_NUMBER = re.compile(r"\((?P<n>\d{1,3}[a-z]?)\)\s*$")
_PAGE_NUMBER = re.compile(r"^(page\s*)?\d{1,4}(\s*(of|/)\s*\d{1,4})?$", re.I)
_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)[a-z]?\b")
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+[^\s\"<>.,;)])")
_REF_NUMBERED = re.compile(r"^\s*(\[\d{1,3}\]|\d{1,3}\.\s)")
_NUMERIC_CITE = re.compile(r"\[(\d{1,3}(?:\s*[-–,]\s*\d{1,3})*)\]")
_AUTHOR_YEAR_CITE = re.compile(
    r"(?P<name>[A-Z][A-Za-z'`\-]+)(?:\s+(?:et\s+al\.?|and\s+[A-Z][A-Za-z'`\-]+|&\s+[A-Z][A-Za-z'`\-]+))?,?\s+\(?(?P<year>(?:19|20)\d\d)[a-z]?"
)
_KNOWN_HEADINGS = {
    "abstract",
    "introduction",
    "background",
    "related work",
    "related works",
    "method",
    "methods",
    "methodology",
    "materials and methods",
    "experiments",
    "experimental setup",
    "results",
    "results and discussion",
    "evaluation",
    "discussion",
    "analysis",
    "conclusion",
    "conclusions",
    "conclusion and future work",
    "conclusions and future work",
    "future work",
    "limitations",
    "ethics statement",
    "ethical considerations",
    "broader impact",
    "acknowledgments",
    "acknowledgements",
    "acknowledgment",
    "acknowledgement",
    "references",
    "bibliography",
    "literature cited",
    "works cited",
    "appendix",
    "appendices",
    "supplementary material",
    "keywords",
    "funding",
    "author contributions",
    "competing interests",
    "data availability",
}
_REFERENCE_HEADINGS = {"references", "bibliography", "literature cited", "works cited", "reference"}
_ROMAN = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


@dataclass
class _Line:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    bold: bool
    math: float  # share of characters in math fonts
    page: int  # 1-based
    cells: list[str] = field(default_factory=list)  # pieces merged from one baseline (table cells)
    font: str = ""


@dataclass
class _Block:
    lines: list[_Line]
    x0: float
    y0: float
    x1: float
    y1: float
    page: int
    column: str = "F"  # L, R or F (full width)
    consumed: bool = False

    @property
    def text(self) -> str:
        return join_lines([line.text for line in self.lines])

    @property
    def size(self) -> float:
        return _median([line.size for line in self.lines])

    def is_prose(self) -> bool:
        words = [len(line.text.split()) for line in self.lines]
        text = self.text
        digits = sum(map(str.isdigit, text))
        return sum(words) >= 6 * len(words) and digits < 0.25 * max(1, len(text))


@dataclass
class _Page:
    number: int
    width: float
    height: float
    blocks: list[_Block] = field(default_factory=list)


_FONT_STYLE: dict[str, tuple[bool, bool]] = {}


def _font_style(font: str) -> tuple[bool, bool]:
    """(bold, math) for a font name, cached: a page has tens of thousands of spans but a handful of fonts."""
    style = _FONT_STYLE.get(font)
    if style is None:
        style = (bool(_BOLD_FONT.search(font)), bool(_MATH_FONT.search(font)))
        _FONT_STYLE[font] = style
    return style


def _line_from_spans(line: dict, page: int) -> _Line | None:
    parts: list[str] = []
    chars = bold_chars = math_chars = 0
    sizes: dict[float, int] = {}
    fonts: dict[str, int] = {}
    for span in line["spans"]:
        text = span["text"]
        parts.append(text)
        length = len(text)
        if length == 1 and text == " " or not length:
            continue
        bold, math = _font_style(span["font"])
        chars += length
        if bold or span["flags"] & _BOLD_FLAG:
            bold_chars += length
        if math:
            math_chars += length
        size = span["size"]
        sizes[size] = sizes.get(size, 0) + length
        fonts[span["font"]] = fonts.get(span["font"], 0) + length
    if not chars:
        return None
    text = " ".join("".join(parts).translate(_CONTROL_CHARS).split())
    if not text:
        return None
    x0, y0, x1, y1 = line["bbox"]
    return _Line(
        text=text,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        size=round(max(sizes, key=sizes.__getitem__), 1),
        bold=bold_chars >= 0.8 * chars,
        math=math_chars / chars,
        page=page,
        font=max(fonts, key=fonts.__getitem__),
    )


def _merge_same_baseline(lines: list[_Line]) -> list[_Line]:
    """MuPDF splits "1" and "Introduction" (or table cells) into separate lines on one baseline: rejoin them."""
    merged: list[_Line] = []
    for line in lines:
        last = merged[-1] if merged else None
        if last and abs(last.y1 - line.y1) < 1.5 and line.x0 > last.x0:
            last.cells = (last.cells or [last.text]) + (line.cells or [line.text])
            total = len(last.text) + len(line.text)
            last.math = (last.math * len(last.text) + line.math * len(line.text)) / total
            last.bold = last.bold and line.bold
            last.size = max(last.size, line.size)
            last.text = f"{last.text} {line.text}"
            last.x1 = max(last.x1, line.x1)
            last.y0, last.y1 = min(last.y0, line.y0), max(last.y1, line.y1)
        else:
            merged.append(line)
    return merged


# Glyphs without a Unicode mapping come out as control characters: drop them.
_CONTROL_CHARS = {code: None for code in (*range(0, 9), 11, 12, *range(14, 32), 127)}


_HTML_TOKENS = re.compile(
    r'<p style="top:([\d.]+)pt;left:([\d.]+)pt;line-height:([\d.]+)pt">'
    r'|font-family:([^,;"]+)[^"]*?font-size:([\d.]+)pt[^"]*">([^<]*)'
    r"|<(/?)b>"
)


def _page_line_styles(html: str) -> list[tuple[float, float, float, float, bool, float, str]]:
    """(top, left, line height, size, bold, math share, font) per line, in one pass over the page's HTML.

    A line's size and font are those of its longest span; bold means 80 % of its characters are bold.
    """
    styles: list[tuple[float, float, float, float, bool, float, str]] = []
    top = left = height = 0.0
    chars = bold_chars = math_chars = longest = 0
    size = 0.0
    font = ""
    bold_depth = 0
    started = False

    def paragraph_style():
        """(top, left, height, size, bold, math share, font) of the paragraph read so far."""
        bold = chars > 0 and bold_chars >= 0.8 * chars
        return (top, left, height, size, bold, math_chars / chars if chars else 0.0, font)

    for p_top, p_left, p_height, span_font, span_size, text, closing in _HTML_TOKENS.findall(html):
        if p_top:
            if started:
                styles.append(paragraph_style())
            started = True
            top, left, height = float(p_top), float(p_left), float(p_height)
            chars = bold_chars = math_chars = longest = 0
            size, font = 0.0, ""
        elif span_font:
            length = len(text.strip())
            if not length:
                continue
            chars += length
            is_bold, is_math = _font_style(span_font)
            if is_bold or bold_depth > 0:
                bold_chars += length
            if is_math:
                math_chars += length
            if length > longest:
                longest, size, font = length, float(span_size), span_font
        else:
            bold_depth += -1 if closing else 1
    if started:
        styles.append(paragraph_style())
    return styles


def _extract_page(page, number: int) -> _Page:
    """Blocks (geometry and text) and HTML (font size, weight, family per line) from one text page.

    Both come from the same MuPDF text page in C, which costs far less than building the span-level "dict";
    when their line counts disagree the page falls back to "dict".
    """
    textpage = page.get_textpage(flags=_TEXT_FLAGS)
    raw_blocks = [b for b in textpage.extractBLOCKS() if b[6] == 0]
    styles = _page_line_styles(textpage.extractHTML())
    texts = [b[4].rstrip("\n").split("\n") for b in raw_blocks]
    if sum(len(t) for t in texts) != len(styles):
        return _extract_page_dict(page, number)
    rect = page.rect
    out = _Page(number=number, width=rect.width, height=rect.height)
    cursor = 0
    for (bx0, by0, bx1, by1, *_), block_lines in zip(raw_blocks, texts, strict=True):
        lines: list[_Line] = []
        for text in block_lines:
            top, left, height, size, bold, math, font = styles[cursor]
            cursor += 1
            if not text.isprintable():
                text = text.translate(_CONTROL_CHARS)
            text = " ".join(text.split())
            if text:
                lines.append(_Line(text, left, top, bx1, top + height, size, bold, math, number, font=font))
        if not lines:
            continue
        if by1 - by0 > 4 * (bx1 - bx0) and by1 - by0 > 150:
            continue  # rotated text: arXiv side stamps, axis labels
        if len(lines) > 1:
            lines = _merge_same_baseline(lines)
        out.blocks.append(_Block(lines=lines, x0=bx0, y0=by0, x1=bx1, y1=by1, page=number))
    return out


def _extract_page_dict(page, number: int) -> _Page:
    data = page.get_text("dict", flags=_TEXT_FLAGS)
    out = _Page(number=number, width=data["width"], height=data["height"])
    for block in data["blocks"]:
        if block.get("type", 0) != 0:
            continue
        lines: list[_Line] = []
        for line in block["lines"]:
            dx, dy = line["dir"]
            if abs(dy) > 0.1 or dx < 0:  # rotated text: arXiv side stamps, axis labels
                continue
            parsed = _line_from_spans(line, number)
            if parsed:
                lines.append(parsed)
        lines = _merge_same_baseline(lines)
        if lines:
            out.blocks.append(
                _Block(
                    lines=lines,
                    x0=min(line.x0 for line in lines),
                    y0=min(line.y0 for line in lines),
                    x1=max(line.x1 for line in lines),
                    y1=max(line.y1 for line in lines),
                    page=number,
                )
            )
    return out


def _margin_key(text: str) -> str:
    return re.sub(r"\d+", "#", text.lower()).strip()


def _remove_running_text(pages: list[_Page]) -> int:
    """Drop running headers / footers (repeated in the margin zone on several pages) and bare page numbers."""
    seen: Counter[str] = Counter()
    for page in pages:
        keys = set()
        for block in page.blocks:
            for line in block.lines:
                if line.y1 < page.height * _MARGIN or line.y0 > page.height * (1 - _MARGIN):
                    keys.add(_margin_key(line.text))
        seen.update(keys)
    threshold = max(2, int(0.3 * len(pages)))
    repeated = {key for key, count in seen.items() if count >= threshold}
    removed = 0
    for page in pages:
        kept_blocks = []
        for block in page.blocks:
            kept = []
            for line in block.lines:
                in_margin = line.y1 < page.height * _MARGIN or line.y0 > page.height * (1 - _MARGIN)
                in_number_zone = line.y1 < page.height * 0.1 or line.y0 > page.height * 0.88
                if (in_margin and _margin_key(line.text) in repeated) or (
                    in_number_zone and _PAGE_NUMBER.match(line.text) and len(block.lines) == 1
                ):
                    removed += 1
                    continue
                kept.append(line)
            if kept:
                block.lines = kept
                block.y0, block.y1 = min(ln.y0 for ln in kept), max(ln.y1 for ln in kept)
                kept_blocks.append(block)
        page.blocks = kept_blocks
    return removed


def _reading_order(page: _Page) -> list[_Block]:
    """Two-column order: full-width blocks cut the page into bands; inside a band, left column then right."""
    mid = page.width / 2
    for block in page.blocks:
        if block.x1 <= mid + 12:
            block.column = "L"
        elif block.x0 >= mid - 12:
            block.column = "R"
        else:
            block.column = "F"
    ordered: list[_Block] = []
    pending: list[_Block] = []

    def flush() -> None:
        ordered.extend(sorted((b for b in pending if b.column == "L"), key=lambda b: (b.y0, b.x0)))
        ordered.extend(sorted((b for b in pending if b.column == "R"), key=lambda b: (b.y0, b.x0)))
        pending.clear()

    for block in sorted(page.blocks, key=lambda b: (b.y0, b.x0)):
        if block.column == "F":
            flush()
            ordered.append(block)
        else:
            pending.append(block)
    flush()
    return ordered


def _roman_or_same(number: str) -> str:
    return str(_ROMAN[number]) if number in _ROMAN else number


@dataclass
class _Heading:
    number: str
    title: str


class _Layout:
    """Font statistics of one document: the body size every heading test compares against."""

    def __init__(self, pages: list[_Page]):
        sizes: Counter[float] = Counter()
        fonts: Counter[str] = Counter()
        for page in pages:
            for block in page.blocks:
                for line in block.lines:
                    sizes[round(line.size * 2) / 2] += len(line.text)
                    fonts[line.font] += len(line.text)
        self.body_size = sizes.most_common(1)[0][0] if sizes else 10.0
        self.body_font = fonts.most_common(1)[0][0] if fonts else ""

    def styled(self, line: _Line) -> bool:
        return line.bold or line.size >= self.body_size + 0.9


def _heading(
    line: _Line, following: _Line | None, block: _Block, layout: _Layout, *, after_refs: bool, started: bool
) -> _Heading | None:
    """A heading is short, styled (bold / larger) or set apart from the text it introduces (another font or
    size on the next line), and numbered, a known section name, or (once the body started) a bold line alone."""
    text = line.text.strip()
    if len(text) < 2 or len(text) > 90 or len(text.split()) > 14 or line.math > 0.3:
        return None
    distinct = following is not None and (
        following.font != line.font or abs(following.size - line.size) >= 0.3 or following.bold != line.bold
    )
    prose_follows = following is not None and sum(len(ln.text.split()) for ln in block.lines[1:]) >= 6 * (
        len(block.lines) - 1
    )
    alone = following is None
    lowered = text.lower().rstrip(".:")
    match = _NUMBERED.match(text)
    if match:
        number, title = match.group("num"), match.group("title").strip()
        if not title[:1].isupper() or title.endswith((",", ";")):
            return None
        if not (layout.styled(line) or (distinct and prose_follows and line.size >= layout.body_size - 0.6)):
            return None
        if (
            number.isalpha()
            and number not in _ROMAN
            and not (after_refs or title.lower().startswith("appendix"))
        ):
            return None  # "A Study of ..." in bold is not appendix A unless we are past the references
        if sum(map(str.isdigit, title)) > len(title) / 3:
            return None
        return _Heading(_roman_or_same(number), title.rstrip(" .:"))
    if lowered in _KNOWN_HEADINGS and (layout.styled(line) or text.isupper() or alone or distinct):
        return _Heading("", text.rstrip(" .:"))
    if not started or len(text.split()) > 8 or not text[:1].isupper() or text.endswith((".", ",", ";", ":")):
        return None
    if "," in text:
        return None
    if sum(map(str.isdigit, text)) >= 3 or line.size < layout.body_size - 1.2:
        return None
    set_apart = distinct and line.font != layout.body_font and following.font == layout.body_font
    if (line.bold and alone) or (set_apart and prose_follows and len(text) < 60):
        return _Heading("", text)
    return None


def _caption_match(block: _Block, layout: _Layout) -> re.Match[str] | None:
    first = block.lines[0]
    match = _CAPTION.match(first.text)
    if not match:
        return None
    separator = match.group("sep")
    if separator in (":", "|"):
        return match
    if separator is None:
        # "Fig. 5 Measure of ..." (BMC, Springer): no separator, but set in a smaller font than the body.
        rest = first.text[match.end() :]
        return match if rest[:1].isupper() and first.size < layout.body_size - 0.4 else None
    # "Table 4. On average ..." in running text is a sentence, not a caption, unless styled as one.
    label_bold = first.bold or first.text[: match.end()].strip().isupper()
    return match if label_bold or first.size < layout.body_size - 0.4 else None


def _is_formula(block: _Block) -> bool:
    if len(block.lines) > 4:
        return False
    text = block.text
    math_share = sum(line.math for line in block.lines) / len(block.lines)
    has_math = any(ch in _MATH_CHARS for ch in text)
    numbered = bool(_EQ_NUMBER.search(text))
    words = text.split()
    long_words = sum(1 for w in words if len(w) > 3 and w.isalpha())
    if len(text.replace(" ", "")) < 3:
        return False
    if numbered and (has_math or math_share > 0.2) and long_words < 12:
        return True
    return math_share >= 0.5 and long_words <= 3 and len(words) <= 40


def _is_fragment(block: _Block) -> bool:
    if len(block.lines) > 4:
        return False
    text = block.text
    return (
        len(text) <= 25
        or bool(_EQ_NUMBER.search(text))
        or sum(ln.math for ln in block.lines) >= 0.3 * len(block.lines)
    )


def _formula_groups(blocks: list[_Block]) -> list[list[_Block]]:
    """MuPDF cuts a display formula into several small blocks (fraction bars, sub / superscripts): regroup them
    by vertical proximity so the formula is judged, and kept, as one piece."""
    fragments = sorted((b for b in blocks if not b.consumed and _is_fragment(b)), key=lambda b: (b.y0, b.x0))
    groups: list[list[_Block]] = []
    for block in fragments:
        group = groups[-1] if groups else None
        if (
            group
            and block.y0 <= max(b.y1 for b in group) + 4
            and block.x0 < max(b.x1 for b in group) + 60
            and block.x1 > min(b.x0 for b in group) - 60
        ):
            group.append(block)
        else:
            groups.append([block])
    return groups


def _cell_rows(lines: list[_Line]) -> list[str]:
    """Lines on one baseline become one table row, cells separated by ` | `."""
    rows: list[list[_Line]] = []
    for line in sorted(lines, key=lambda ln: (round(ln.y1), ln.x0)):
        if rows and abs(rows[-1][0].y1 - line.y1) < 2.5:
            rows[-1].append(line)
        else:
            rows.append([line])
    return [
        " | ".join(cell for line in sorted(row, key=lambda ln: ln.x0) for cell in (line.cells or [line.text]))
        for row in rows
    ]


def _nearby_nonprose(blocks: list[_Block], caption: _Block, direction: int) -> list[_Block]:
    """Blocks that sit directly above (-1) or below (+1) a caption, overlap it horizontally and are not prose:
    the body of its table or the labels inside its figure."""
    left, right = caption.x0 - 30, caption.x1 + 30
    candidates = [
        b
        for b in blocks
        if b is not caption and not b.consumed and b.x1 > left and b.x0 < right and b.page == caption.page
    ]
    if direction < 0:
        candidates = sorted((b for b in candidates if b.y1 <= caption.y0 + 2), key=lambda b: -b.y1)
    else:
        candidates = sorted((b for b in candidates if b.y0 >= caption.y1 - 2), key=lambda b: b.y0)
    picked: list[_Block] = []
    edge = caption.y0 if direction < 0 else caption.y1
    for block in candidates:
        gap = (edge - block.y1) if direction < 0 else (block.y0 - edge)
        first = block.lines[0]
        if gap > 45 or block.is_prose() or _CAPTION.match(first.text):
            break
        if first.bold and (_NUMBERED.match(first.text) or first.text.lower().rstrip(".:") in _KNOWN_HEADINGS):
            break  # the next section's heading
        picked.append(block)
        edge = block.y0 if direction < 0 else block.y1
    return picked


def _link_citations(sections: list[Section], references: list[Reference]) -> list[CitationLink]:
    """Numeric ("[3, 5-7]") and author-year ("Beltagy et al., 2019") markers resolved to reference ids."""
    links: list[CitationLink] = []
    heads = [(ref, ref.text[:80].lower(), {str(ref.year)} if ref.year else set()) for ref in references]
    for section in sections:
        for match in _NUMERIC_CITE.finditer(section.text):
            numbers: list[int] = []
            for part in re.split(r"\s*,\s*", match.group(1)):
                bounds = re.split(r"\s*[-–]\s*", part)
                if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
                    lo, hi = int(bounds[0]), int(bounds[1])
                    numbers.extend(range(lo, min(hi, lo + 30) + 1))
                elif part.isdigit():
                    numbers.append(int(part))
            for number in numbers:
                ref_id = f"b{number - 1}" if 0 < number <= len(references) else None
                links.append(CitationLink(section.number, ref_id, match.group(0)))
        for match in _AUTHOR_YEAR_CITE.finditer(section.text):
            name, year = match.group("name").lower(), match.group("year")
            if name in {"table", "figure", "section", "fig", "eq", "in", "the", "and", "see"}:
                continue
            for ref, head, years in heads:
                if year in years and re.search(rf"\b{re.escape(name)}\b", head):
                    links.append(CitationLink(section.number, ref.ref_id, match.group(0)))
                    break
    return links


def _split_references(lines: list[tuple[_Line, _Block]]) -> list[str]:
    """Reference list lines into entries: numbered markers, else hanging indent, else block boundaries."""
    if not lines:
        return []
    numbered = sum(1 for line, _ in lines if _REF_NUMBERED.match(line.text))
    entries: list[list[str]] = []
    if numbered >= 3:
        for line, _ in lines:
            if _REF_NUMBERED.match(line.text) or not entries:
                entries.append([line.text])
            else:
                entries[-1].append(line.text)
        return [join_lines(e) for e in entries]
    # Left edge per page column: the smallest x0 seen at least twice (a stray line does not move it).
    seen: dict[tuple[int, str], Counter[int]] = {}
    for line, block in lines:
        seen.setdefault((line.page, block.column), Counter())[round(line.x0)] += 1
    edges = {}
    for key, counts in seen.items():
        repeated = [x for x, n in counts.items() if n >= 2]
        edges[key] = min(repeated or counts)
    indented = sum(1 for line, block in lines if line.x0 > edges[(line.page, block.column)] + 4)
    hanging = indented >= len(lines) * 0.2
    previous_block = None
    for line, block in lines:
        at_edge = line.x0 <= edges[(line.page, block.column)] + 2
        starts = at_edge if hanging else block is not previous_block
        if starts or not entries:
            entries.append([line.text])
        else:
            entries[-1].append(line.text)
        previous_block = block
    return [join_lines(e) for e in entries if len(" ".join(e)) > 15]


def _reference(ref_id: str, text: str) -> Reference:
    text = re.sub(r"^\s*(\[\d{1,3}\]|\d{1,3}\.)\s*", "", text).strip()
    year_match = _YEAR.search(text)
    doi_match = _DOI.search(text)
    head = re.split(r"\.\s+(?:19|20)\d\d|\(\s*(?:19|20)\d\d", text, maxsplit=1)[0]
    authors = [a.strip() for a in re.split(r",\s*(?:and\s+)?|\s+and\s+", head) if 1 < len(a.strip()) < 40][
        :20
    ]
    return Reference(
        ref_id=ref_id,
        text=text,
        year=int(year_match.group(1)) if year_match else None,
        doi=doi_match.group(1).lower() if doi_match else None,
        authors=authors,
    )


class PyMuPdfParser:
    """Layout-aware PyMuPDF parser; `tables` is "fast" (rows rebuilt from text), "finder" (PyMuPDF table
    finder on caption pages) or "off"."""

    name = "pymupdf"
    version = "1.0"

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
        pages = [_extract_page(page, index + 1) for index, page in enumerate(doc)]
        chars = sum(len(line.text) for page in pages for block in page.blocks for line in block.lines)
        if chars < self.min_chars_per_page * max(1, min(len(pages), 3)) / 3:
            raise ParseFailure(
                "no_text_layer", f"{chars} characters of text in {len(pages)} pages (scanned?)"
            )
        _remove_running_text(pages)
        layout = _Layout(pages)
        title = self._title(pages, doc, layout)
        elements = self._elements(pages, layout, doc)
        paper = self._structure(pages, layout, title, elements, paper_id)
        paper.page_count = len(pages)
        return paper

    def _title(self, pages: list[_Page], doc, layout: _Layout) -> str:
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

    def _elements(self, pages: list[_Page], layout: _Layout, doc) -> dict[int, Element]:
        """Captions, their tables / figure labels, and display formulas, keyed by the id of the block they replace."""
        elements: dict[int, Element] = {}
        for page in pages:
            blocks = [b for b in page.blocks if any(line.text for line in b.lines)]
            page.blocks = blocks
            table_pages: list[_Block] = []
            for block in blocks:
                match = _caption_match(block, layout)
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
                above = _nearby_nonprose(blocks, block, -1)
                below = _nearby_nonprose(blocks, block, +1)
                body = above if len(above) >= len(below) else below
                for part in body:
                    part.consumed = True
                lines = [line for part in body for line in part.lines]
                if kind == "table" and self.tables == "fast":
                    element.content = "\n".join(_cell_rows(lines))
                elif kind == "figure":
                    element.content = " ".join(line.text for line in lines)[:500]
            if table_pages and self.tables == "finder":
                self._finder_tables(doc[page.number - 1], page, table_pages, elements)
            for group in _formula_groups(blocks):
                merged = _Block(
                    lines=[line for b in group for line in b.lines],
                    x0=min(b.x0 for b in group),
                    y0=min(b.y0 for b in group),
                    x1=max(b.x1 for b in group),
                    y1=max(b.y1 for b in group),
                    page=page.number,
                )
                if not _is_formula(merged):
                    continue
                text = " ".join(
                    line.text for line in sorted(merged.lines, key=lambda ln: (round(ln.y0), ln.x0))
                )
                number = _EQ_NUMBER.search(text)
                elements[id(group[0])] = Element(
                    kind="formula",
                    label=f"({number.group('n')})" if number else None,
                    caption="",
                    content=_EQ_NUMBER.sub("", text).strip() if number else text,
                    page=page.number,
                )
                for block in group:
                    block.consumed = True
        return elements

    def _finder_tables(
        self, page, extracted: _Page, captions: list[_Block], elements: dict[int, Element]
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
        self, pages: list[_Page], layout: _Layout, title: str, elements: dict[int, Element], paper_id: str
    ) -> ParsedPaper:
        sections: list[Section] = []
        front: list[list[str]] = []
        abstract: list[list[str]] = []
        ref_lines: list[tuple[_Line, _Block]] = []
        mode = "front"  # front | abstract | body | references
        current: Section | None = None
        paragraphs: list[list[str]] = []
        placed: list[tuple[Element, Section | None]] = []
        after_refs = False
        last_text = ""

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
            ordered = _reading_order(page)
            for position, block in enumerate(ordered):
                element = elements.get(id(block))
                if element is not None:
                    if element.kind == "formula" and last_text:
                        element.caption = last_text[-200:]
                    placed.append((element, current))
                    continue
                if block.consumed:
                    continue
                lines = [line for line in block.lines if line.text]
                if not lines:
                    continue
                heading = _heading(
                    lines[0],
                    lines[1] if len(lines) > 1 else None,
                    block,
                    layout,
                    after_refs=after_refs,
                    started=mode not in ("front", "abstract") or bool(sections),
                )
                if (
                    heading is not None
                    and not heading.number
                    and heading.title.lower() not in _KNOWN_HEADINGS
                ):
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
                    elif lowered in _REFERENCE_HEADINGS:
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
                    ref_lines.extend((line, block) for line in lines)
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
                    last_text = texts[-1]
        close_section()

        abstract_text = "\n\n".join(join_lines(p) for p in abstract).strip()
        if not abstract_text:
            prose = [join_lines(p) for p in front if len(" ".join(p).split()) >= 60]
            abstract_text = max(prose, key=len) if prose else ""
        if not sections and not abstract_text and front:
            sections.append(Section(number="0", title="", text="\n\n".join(join_lines(p) for p in front)))
        references = [_reference(f"b{i}", text) for i, text in enumerate(_split_references(ref_lines))]
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
            citations=_link_citations(sections, references),
            elements=elements_out,
        )


def _continues(previous: str, following: str) -> bool:
    """A paragraph cut by a column or page break continues when the previous text does not end a sentence."""
    previous = previous.rstrip()
    return bool(previous) and previous[-1] not in ".!?:" and following[:1].islower()


@register("pymupdf")
def _factory(**options) -> PyMuPdfParser:
    return PyMuPdfParser(**options)
