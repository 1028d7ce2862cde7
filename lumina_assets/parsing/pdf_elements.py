"""Figures, tables and display formulas for the PyMuPDF parser: captions, the blocks that make a table's body
or a figure's labels, and formula fragments regrouped into one formula."""

from __future__ import annotations

import re

from lumina_assets.parsing.pdf_headings import KNOWN_HEADINGS, NUMBERED
from lumina_assets.parsing.pdf_layout import MATH_CHARS, Block, Layout, Line

CAPTION = re.compile(
    r"^(?P<kind>Figure|Fig\.|Table|Tab\.)\s*(?P<num>\d+|[IVXL]+|[A-Z]\.?\d+)\s*(?P<sep>[:.|—–-])?\s*", re.I
)
EQ_NUMBER = re.compile(r"\((?P<n>\d{1,3}[a-z]?)\)\s*$")


def caption_match(block: Block, layout: Layout) -> re.Match[str] | None:
    first = block.lines[0]
    match = CAPTION.match(first.text)
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


def is_formula(block: Block) -> bool:
    if len(block.lines) > 4:
        return False
    text = block.text
    math_share = sum(line.math for line in block.lines) / len(block.lines)
    has_math = any(ch in MATH_CHARS for ch in text)
    numbered = bool(EQ_NUMBER.search(text))
    words = text.split()
    long_words = sum(1 for w in words if len(w) > 3 and w.isalpha())
    if len(text.replace(" ", "")) < 3:
        return False
    if numbered and (has_math or math_share > 0.2) and long_words < 12:
        return True
    return math_share >= 0.5 and long_words <= 3 and len(words) <= 40


def _is_fragment(block: Block) -> bool:
    if len(block.lines) > 4:
        return False
    text = block.text
    return (
        len(text) <= 25
        or bool(EQ_NUMBER.search(text))
        or sum(ln.math for ln in block.lines) >= 0.3 * len(block.lines)
    )


def formula_groups(blocks: list[Block]) -> list[list[Block]]:
    """MuPDF cuts a display formula into several small blocks (fraction bars, sub / superscripts): regroup them
    by vertical proximity so the formula is judged, and kept, as one piece."""
    fragments = sorted((b for b in blocks if not b.consumed and _is_fragment(b)), key=lambda b: (b.y0, b.x0))
    groups: list[list[Block]] = []
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


def cell_rows(lines: list[Line]) -> list[str]:
    """Lines on one baseline become one table row, cells separated by ` | `. A row that starts over the table's
    second column (a header with no name for the row-label column, "CLS | USR | CITE" over "SPECTER | 84.2 |
    88.4") opens with an empty cell, so its names line up with the data."""
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda ln: (round(ln.y1), ln.x0)):
        if rows and abs(rows[-1][0].y1 - line.y1) < 2.5:
            rows[-1].append(line)
        else:
            rows.append([line])
    cells: list[list[tuple[float, str]]] = []
    for row in rows:
        placed = []
        for line in sorted(row, key=lambda ln: ln.x0):
            texts = line.cells or [line.text]
            starts = line.cell_x if len(line.cell_x) == len(texts) else [line.x0] * len(texts)
            placed += list(zip(starts, texts, strict=True))
        cells.append(placed)
    widest = max((len(row) for row in cells), default=0)
    full = [row for row in cells if len(row) == widest and widest >= 2]
    if full:
        label_x = sorted(row[0][0] for row in full)[len(full) // 2]
        second_x = sorted(row[1][0] for row in full)[len(full) // 2]
        middle = (label_x + second_x) / 2
        for row in cells:
            if 2 <= len(row) < widest and row[0][0] > middle:  # a lone cell is a wrapped cell's second line
                row.insert(0, (label_x, ""))
    return [" | ".join(text for _, text in row) for row in cells]


def is_header_row(block: Block) -> bool:
    """A table's header row: one to three lines, each of short cells on one baseline ("Method | Crawler Recall |
    Precision | Recall@20"). It reads as prose (words, few digits), but it belongs to the table."""
    return (
        len(block.lines) <= 3
        and all(
            len(line.cells) >= 3 or (len(line.cells) == 2 and all(len(c.split()) <= 3 for c in line.cells))
            for line in block.lines
        )
        and all(len(cell.split()) <= 5 for line in block.lines for cell in line.cells)
    )


def nearby_nonprose(
    blocks: list[Block], caption: Block, direction: int, *, table: bool = False
) -> list[Block]:
    """Blocks that sit directly above (-1) or below (+1) a caption, overlap it horizontally and are not prose:
    the body of its table or the labels inside its figure. For a table, its header row counts although it reads
    as prose, a column heading such as "Method" is not a section heading, and text of the next column (within
    the 30 pt margin but beside the caption) is not part of it."""
    left, right = caption.x0 - 30, caption.x1 + 30
    candidates = [
        b
        for b in blocks
        if b is not caption
        and not b.consumed
        and b.x1 > left
        and b.x0 < right
        and b.page == caption.page
        and (not table or min(b.x1, caption.x1) > max(b.x0, caption.x0) - 5 or b.x1 - b.x0 < 60)
    ]
    if direction < 0:
        candidates = sorted((b for b in candidates if b.y1 <= caption.y0 + 2), key=lambda b: -b.y1)
    else:
        candidates = sorted((b for b in candidates if b.y0 >= caption.y1 - 2), key=lambda b: b.y0)
    picked: list[Block] = []
    edge = caption.y0 if direction < 0 else caption.y1
    for block in candidates:
        gap = (edge - block.y1) if direction < 0 else (block.y0 - edge)
        first = block.lines[0]
        if (
            gap > 45
            or (block.is_prose() and not (table and is_header_row(block)))
            or CAPTION.match(first.text)
        ):
            break
        named = first.text.lower().rstrip(".:") in KNOWN_HEADINGS
        among_cells = table and any(len(line.cells) >= 2 for line in block.lines)  # "Method" over columns
        if first.bold and (NUMBERED.match(first.text) or (named and not among_cells)):
            break  # the next section's heading
        picked.append(block)
        edge = block.y0 if direction < 0 else block.y1
    return picked


def table_side(above: list[Block], below: list[Block], preferred: int) -> list[Block]:
    """The blocks of a caption's table: the side that has any; where both do (stacked tables), the side where
    this paper puts its tables (`preferred`: -1 above the caption, +1 below, 0 unknown), else the longer one."""
    if above and below and preferred:
        return above if preferred < 0 else below
    return above if len(above) >= len(below) else below


def preferred_table_side(pages, layout) -> int:
    """Where a paper's tables sit relative to their captions (-1 above, +1 below, 0 unknown): the side taken by
    the captions whose table lies on one side only."""
    votes = 0
    for page in pages:
        blocks = [b for b in page.blocks if any(line.text for line in b.lines)]
        for block in blocks:
            match = caption_match(block, layout)
            if not match or not match.group("kind").lower().startswith("tab"):
                continue
            above = nearby_nonprose(blocks, block, -1, table=True)
            below = nearby_nonprose(blocks, block, +1, table=True)
            if bool(above) != bool(below):
                votes += -1 if above else 1
    return (votes > 0) - (votes < 0)
