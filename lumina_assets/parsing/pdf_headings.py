"""Section headings for the PyMuPDF parser: numbered, known by name, or set apart by style."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lumina_assets.parsing.pdf_layout import Block, Layout, Line

NUMBERED = re.compile(
    r"^(?P<num>(?:\d{1,2}(?:\.\d{1,2}){0,3}|[A-H](?:\.\d{1,2}){0,3}|[IVX]{1,5}))\.?\s+(?P<title>\S.*)$"
)
KNOWN_HEADINGS = set(
    "abstract|introduction|background|related work|related works|method|methods|methodology|"
    "materials and methods|experiments|experimental setup|results|results and discussion|evaluation|"
    "discussion|analysis|conclusion|conclusions|conclusion and future work|"
    "conclusions and future work|future work|limitations|ethics statement|ethical considerations|"
    "broader impact|acknowledgments|acknowledgements|acknowledgment|acknowledgement|references|"
    "bibliography|literature cited|works cited|appendix|appendices|supplementary material|keywords|"
    "funding|author contributions|competing interests|data availability".split("|")
)
REFERENCE_HEADINGS = {"references", "bibliography", "literature cited", "works cited", "reference"}
ROMAN = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}


@dataclass
class Heading:
    number: str
    title: str


def _numbered_heading(
    match, line: Line, layout: Layout, *, set_off: bool, after_refs: bool
) -> Heading | None:
    """A numbered heading ("2.1 Methods", "IV. RESULTS", "A Proofs" past the references), or None; `set_off`: the
    next line is in another style and prose follows."""
    number, title = match.group("num"), match.group("title").strip()
    if not title[:1].isupper() or title.endswith((",", ";")):
        return None
    if not (layout.styled(line) or (set_off and line.size >= layout.body_size - 0.6)):
        return None
    if number.isalpha() and number not in ROMAN and not (after_refs or title.lower().startswith("appendix")):
        return None  # "A Study of ..." in bold is not appendix A unless we are past the references
    if sum(map(str.isdigit, title)) > len(title) / 3:
        return None
    return Heading(str(ROMAN.get(number, number)), title.rstrip(" .:"))


def _unnumbered_heading(
    text: str,
    line: Line,
    following: Line | None,
    layout: Layout,
    *,
    distinct: bool,
    prose_follows: bool,
    started: bool,
) -> Heading | None:
    """A known section name set apart, or once the body started a short capitalised line: bold and alone, or in
    another font over prose in the body font."""
    alone = following is None
    if text.lower().rstrip(".:") in KNOWN_HEADINGS and (
        layout.styled(line) or text.isupper() or alone or distinct
    ):
        return Heading("", text.rstrip(" .:"))
    if not started or len(text.split()) > 8 or not text[:1].isupper() or text.endswith((".", ",", ";", ":")):
        return None
    if "," in text:
        return None
    if sum(map(str.isdigit, text)) >= 3 or line.size < layout.body_size - 1.2:
        return None
    set_apart = distinct and line.font != layout.body_font and following.font == layout.body_font
    if (line.bold and alone) or (set_apart and prose_follows and len(text) < 60):
        return Heading("", text)
    return None


def detect_heading(
    line: Line, following: Line | None, block: Block, layout: Layout, *, after_refs: bool, started: bool
) -> Heading | None:
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
    match = NUMBERED.match(text)
    if match:
        return _numbered_heading(
            match, line, layout, set_off=distinct and prose_follows, after_refs=after_refs
        )
    return _unnumbered_heading(
        text, line, following, layout, distinct=distinct, prose_follows=prose_follows, started=started
    )
