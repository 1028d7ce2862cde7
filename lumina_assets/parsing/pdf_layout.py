"""Page layout for the PyMuPDF parser: text lines and blocks with their font size, weight and math share,
running headers / footers removed by repetition across pages, two-column reading order, and the document's body
font (what every heading and caption test compares against)."""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

from lumina_assets.parsing.base import join_lines

# Whitespace kept, ligatures expanded (ﬁ -> fi), images skipped (the slow part of "dict"), mediabox clip.
TEXT_FLAGS = 2 | 64 | 128
_BOLD_FLAG = 16
_MARGIN = 0.075  # share of the page height that counts as header / footer zone
_MATH_FONT = re.compile(r"CMMI|CMSY|CMEX|MSBM|MSAM|Math|Symbol|STIX|Euclid|rsfs|esint|MT2MIS|MTSY|MTMI", re.I)
MATH_CHARS = set("=≤≥≈∑∏∫∈∉∀∃∂∇√±×÷→←↔⇒⊂⊆∪∩αβγδεθλμπσφψωΣΠΩΔΓΛ")
_BOLD_FONT = re.compile(r"Bold|Black|Heavy|Semibold|Demi|Medi|[.,-]B$|[.,-]Bd$|-SB$", re.I)
_PAGE_NUMBER = re.compile(r"^(page\s*)?\d{1,4}(\s*(of|/)\s*\d{1,4})?$", re.I)


@dataclass
class Line:
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
    cell_x: list[float] = field(default_factory=list)  # where each of those pieces starts
    font: str = ""


@dataclass
class Block:
    lines: list[Line]
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
        return statistics.median_high(line.size for line in self.lines)

    def is_prose(self) -> bool:
        words = [len(line.text.split()) for line in self.lines]
        text = self.text
        digits = sum(map(str.isdigit, text))
        return sum(words) >= 6 * len(words) and digits < 0.25 * max(1, len(text))


@dataclass
class Page:
    number: int
    width: float
    height: float
    blocks: list[Block] = field(default_factory=list)


@functools.cache
def _font_style(font: str) -> tuple[bool, bool]:
    """(bold, math) for a font name, cached: a page has tens of thousands of spans but a handful of fonts."""
    return bool(_BOLD_FONT.search(font)), bool(_MATH_FONT.search(font))


def _line_from_spans(line: dict, page: int) -> Line | None:
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
    return Line(
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


def _merge_same_baseline(lines: list[Line]) -> list[Line]:
    """MuPDF splits "1" and "Introduction" (or table cells) into separate lines on one baseline: rejoin them."""
    merged: list[Line] = []
    for line in lines:
        last = merged[-1] if merged else None
        if last and abs(last.y1 - line.y1) < 1.5 and line.x0 > last.x0:
            last.cells = (last.cells or [last.text]) + (line.cells or [line.text])
            last.cell_x = (last.cell_x or [last.x0]) + (line.cell_x or [line.x0])
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
    """(top, left, line height, size, bold, math share, font) per line, in one pass over the page's HTML; a line's
    size and font are those of its longest span, bold means 80 % of its characters are bold."""
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


def extract_page(page, number: int) -> Page:
    """Blocks (geometry and text) and HTML (font size, weight, family per line) from one text page, far cheaper than
    the span-level "dict"; when their line counts disagree the page falls back to "dict"."""
    textpage = page.get_textpage(flags=TEXT_FLAGS)
    raw_blocks = [b for b in textpage.extractBLOCKS() if b[6] == 0]
    styles = _page_line_styles(textpage.extractHTML())
    texts = [b[4].rstrip("\n").split("\n") for b in raw_blocks]
    if sum(len(t) for t in texts) != len(styles):
        return _extract_page_dict(page, number)
    rect = page.rect
    out = Page(number=number, width=rect.width, height=rect.height)
    cursor = 0
    for (bx0, by0, bx1, by1, *_), block_lines in zip(raw_blocks, texts, strict=True):
        lines: list[Line] = []
        for text in block_lines:
            top, left, height, size, bold, math, font = styles[cursor]
            cursor += 1
            if not text.isprintable():
                text = text.translate(_CONTROL_CHARS)
            text = " ".join(text.split())
            if text:
                lines.append(Line(text, left, top, bx1, top + height, size, bold, math, number, font=font))
        if not lines:
            continue
        if by1 - by0 > 4 * (bx1 - bx0) and by1 - by0 > 150:
            continue  # rotated text: arXiv side stamps, axis labels
        if len(lines) > 1:
            lines = _merge_same_baseline(lines)
        out.blocks.append(Block(lines=lines, x0=bx0, y0=by0, x1=bx1, y1=by1, page=number))
    return out


def _extract_page_dict(page, number: int) -> Page:
    data = page.get_text("dict", flags=TEXT_FLAGS)
    out = Page(number=number, width=data["width"], height=data["height"])
    for block in data["blocks"]:
        if block.get("type", 0) != 0:
            continue
        lines: list[Line] = []
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
                Block(
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


def remove_running_text(pages: list[Page]) -> int:
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


def reading_order(page: Page) -> list[Block]:
    """Two-column order: full-width blocks cut the page into bands; inside a band, left column then right."""
    mid = page.width / 2
    for block in page.blocks:
        if block.x1 <= mid + 12:
            block.column = "L"
        elif block.x0 >= mid - 12:
            block.column = "R"
        else:
            block.column = "F"
    ordered: list[Block] = []
    pending: list[Block] = []

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


class Layout:
    """Font statistics of one document: the body size every heading test compares against."""

    def __init__(self, pages: list[Page]):
        sizes: Counter[float] = Counter()
        fonts: Counter[str] = Counter()
        for page in pages:
            for block in page.blocks:
                for line in block.lines:
                    sizes[round(line.size * 2) / 2] += len(line.text)
                    fonts[line.font] += len(line.text)
        self.body_size = sizes.most_common(1)[0][0] if sizes else 10.0
        self.body_font = fonts.most_common(1)[0][0] if fonts else ""

    def styled(self, line: Line) -> bool:
        return line.bold or line.size >= self.body_size + 0.9
