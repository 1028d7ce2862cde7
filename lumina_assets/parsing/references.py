"""Bibliography entries: a reference list cut into entries, each entry parsed into fields (author-year, Vancouver and
IEEE layouts, docs/pdf-papers.md), and in-text citation markers resolved to entries."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from lumina_assets.core.schemas import CitationLink, Reference, Section
from lumina_assets.parsing.base import join_lines

YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)[a-z]?\b")
DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+[^\s\"<>.,;)\]])")
ARXIV = re.compile(r"(?:arXiv\s*:?\s*|abs/|arxiv\.org/(?:abs|pdf)/)(\d{4}\.\d{4,5})(?:v\d+)?", re.I)
REF_NUMBERED = re.compile(r"^\s*(\[\d{1,3}\]|\d{1,3}\.\s)")
NUMERIC_CITE = re.compile(r"\[(\d{1,3}(?:\s*[-–,]\s*\d{1,3})*)\]")
AUTHOR_YEAR_CITE = re.compile(
    r"(?P<name>[A-Z][A-Za-z'`\-]+)(?:\s+(?:et\s+al\.?|and\s+[A-Z][A-Za-z'`\-]+|&\s+[A-Z][A-Za-z'`\-]+))?,?\s+\(?"
    r"(?P<year>(?:19|20)\d\d)[a-z]?"
)
_MARKER = re.compile(r"^\s*(?:\[\d{1,3}\]|\d{1,3}\.(?=\s))\s*")
# The year that closes an author list: "... Etzioni. 2018." / "... Etzioni (2018)." / "..., 2018." (not a volume)
_AUTHOR_YEAR = re.compile(r"(?:\.\s+|\s\(|,\s+)((?:19|20)\d\d)[a-z]?(?:\)\s*[.,:]?|[.,:])(?:\s|$)")
_QUOTED = re.compile(r"[“\"](?P<title>[^”\"]{8,}?)[,.]?[”\"]")
# Vancouver author list: "Sampson P, De Marchis C, Hughes AM, et al." (initials without full stops), then ". "
_VANCOUVER_NAME = r"[A-Z][^\s,.;]+(?:[ -][A-Za-z][^\s,.;]+){0,3} [A-Z]{1,3}(?:-[A-Z])?"
_VANCOUVER_HEAD = re.compile(rf"^((?:{_VANCOUVER_NAME}, )*{_VANCOUVER_NAME}(?:,? et al)?)\.\s+")
_VANCOUVER_YEAR = re.compile(r"\b((?:19|20)\d\d)[a-z]?\s*(?:[A-Z][a-z]{2}(?:\s\d{1,2})?)?\s*;")
# A sentence end inside a reference: ". " not after an initial ("S. Weld"), "et al", "vs", "Proc", "Vol" ...
_SENTENCE_END = re.compile(
    r"(?<!\b[A-Z])(?<!\bet al)(?<!\bvs)(?<!\bVol)(?<!\bvol)(?<!\bProc)(?<!\bno)(?<!\bNo)(?<!\bpp)(?<!\bEd)(?<!\beds)"
    r"(?<!\bInt)(?<!\bJ)(?:\.\s+(?=\S)|[?!]\s+(?=[^a-z\s]))"  # "Title? a subtitle" stays one title
)
_VENUE_CUT = re.compile(
    r",\s*(?:pages?|pp\.|vol\.|volume|abs/|page)\b|,\s*\d+[(:]|\s\d+\s*\(\d+\)|;\s*\d|,\s*(?:19|20)\d\d\b"
    r"|\.\s+(?:Association for|ACM|IEEE|Springer|Curran|PMLR|OpenReview)|\s\((?:19|20)\d\d\)",
)


@dataclass
class ReferenceLine:
    """One line of a reference list as the layout parser saw it: where it starts and which block it belongs to."""

    text: str
    x0: float
    page: int
    column: str
    block: int  # an id shared by the lines of one text block


def split_reference_lines(lines: list[ReferenceLine]) -> list[str]:
    """Reference list lines into entries: numbered markers, else hanging indent, else block boundaries."""
    if not lines:
        return []
    numbered = sum(1 for line in lines if REF_NUMBERED.match(line.text))
    entries: list[list[str]] = []
    if numbered >= 3:
        for line in lines:
            if REF_NUMBERED.match(line.text) or not entries:
                entries.append([line.text])
            else:
                entries[-1].append(line.text)
        return [join_lines(e) for e in entries]
    # Left edge per page column: the smallest x0 seen at least twice (a stray line does not move it).
    seen: dict[tuple[int, str], Counter[int]] = {}
    for line in lines:
        seen.setdefault((line.page, line.column), Counter())[round(line.x0)] += 1
    edges = {}
    for key, counts in seen.items():
        repeated = [x for x, n in counts.items() if n >= 2]
        edges[key] = min(repeated or counts)
    indented = sum(1 for line in lines if line.x0 > edges[(line.page, line.column)] + 4)
    hanging = indented >= len(lines) * 0.2
    previous_block = None
    for line in lines:
        at_edge = line.x0 <= edges[(line.page, line.column)] + 2
        starts = at_edge if hanging else line.block != previous_block
        if starts or not entries:
            entries.append([line.text])
        else:
            entries[-1].append(line.text)
        previous_block = line.block
    return [join_lines(e) for e in entries if len(" ".join(e)) > 15]


def _sentences(text: str) -> list[str]:
    """Pieces of a reference cut at sentence ends (not at initials or common abbreviations)."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[start : match.start() + 1].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def split_authors(text: str) -> list[str]:
    """Names from an author list: "A, B, and C", "A and B", "Surname AB, Surname C", "Surname, A., & Surname, B."."""
    text = re.sub(r"\bet al\.?", "", text).strip(" ,;")
    if not text:
        return []
    parts = [
        p.strip() for p in re.split(r",\s*(?:and|&)\s+|\s+(?:and|&)\s+|;\s*|,\s*", text) if p.strip(" .")
    ]
    # APA "Surname, A. B." comes out as alternating surname / initials: pair them back
    if len(parts) >= 2 and all(re.fullmatch(r"(?:[A-Z]\.?\s*-?){1,4}", p) for p in parts[1::2]):
        parts = [f"{initials} {surname}" for surname, initials in zip(parts[::2], parts[1::2], strict=False)]
    # a full stop closes the list ("... Weld."), but not one after an initial ("N. R.")
    parts = [p if re.search(r"\b[A-Z]\.$", p) else p.rstrip(". ") for p in parts]
    return [p for p in parts if 1 < len(p) <= 60 and not p.isdigit()][:50]


def _looks_like_authors(text: str) -> bool:
    """Capitalized names, initials and connectives only: what precedes the year in an author-year entry."""
    words = [
        w
        for w in text.replace(",", " ").split()
        if w not in ("and", "&", "et", "al.", "al", "van", "von", "de")
    ]
    if not words:
        return False
    named = sum(1 for w in words if w[:1].isupper() or w[:1] in "‘’'(")
    return named >= 0.85 * len(words)


def _clean_venue(text: str) -> str | None:
    text = re.sub(r"^(?:In:?|in)\s+", "", text.strip())
    cut = _VENUE_CUT.search(text)
    if cut:
        text = text[: cut.start()]
    text = DOI.sub("", ARXIV.sub("arXiv", text))
    text = re.sub(r"https?://\S+", "", text).strip(" .,;:")
    return text if len(text) >= 2 and not text.isdigit() else None


def _clean_title(text: str) -> str | None:
    text = re.sub(r"\s+", " ", text).strip(' .,;:“”"')
    return text if len(text) >= 6 and len(text.split()) >= 1 else None


def parse_reference(ref_id: str, text: str) -> Reference:
    """A bibliography entry with its fields; a field the string does not show stays empty."""
    text = re.sub(r"\s+", " ", _MARKER.sub("", text)).strip()
    doi_match = DOI.search(text)
    arxiv_match = ARXIV.search(text)
    authors: list[str] = []
    title = venue = None
    year: int | None = None
    quoted = _QUOTED.search(text)
    author_year = _AUTHOR_YEAR.search(text)
    vancouver = _VANCOUVER_YEAR.search(text)
    if quoted:  # IEEE: A. Surname, "Title," in Venue, 2019.
        authors = split_authors(text[: quoted.start()])
        title = _clean_title(quoted.group("title"))
        venue = _clean_venue(text[quoted.end() :].lstrip(" ,."))
    elif author_year and _looks_like_authors(text[: author_year.start()]):
        authors = split_authors(text[: author_year.start()])
        year = int(author_year.group(1))
        pieces = _sentences(text[author_year.end() :])
        title = _clean_title(pieces[0]) if pieces else None
        venue = _clean_venue(" ".join(pieces[1:])) if len(pieces) > 1 else None
    else:
        head = _VANCOUVER_HEAD.match(text)
        pieces = _sentences(text[head.end() :] if head else text)
        if head:
            authors = split_authors(head.group(1))
            title = _clean_title(pieces[0]) if pieces else None
            venue = _clean_venue(pieces[1]) if len(pieces) > 1 else None
        elif len(pieces) >= 2:
            authors = split_authors(pieces[0])
            title = _clean_title(pieces[1])
    if year is None:
        found = vancouver or YEAR.search(text)
        year = int(found.group(1)) if found else None
    if venue and arxiv_match and venue.lower().startswith("arxiv"):
        venue = "arXiv"
    return Reference(
        ref_id=ref_id,
        text=text,
        title=title,
        doi=doi_match.group(1).lower().rstrip(".") if doi_match else None,
        year=year,
        authors=authors,
        venue=venue,
        arxiv_id=arxiv_match.group(1) if arxiv_match else None,
    )


def link_citations(sections: list[Section], references: list[Reference]) -> list[CitationLink]:
    """Numeric ("[3, 5-7]") and author-year ("Beltagy et al., 2019") markers resolved to reference ids."""
    links: list[CitationLink] = []
    heads = [(ref, ref.text[:80].lower(), {str(ref.year)} if ref.year else set()) for ref in references]
    for section in sections:
        for match in NUMERIC_CITE.finditer(section.text):
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
        for match in AUTHOR_YEAR_CITE.finditer(section.text):
            name, year = match.group("name").lower(), match.group("year")
            if name in {"table", "figure", "section", "fig", "eq", "in", "the", "and", "see"}:
                continue
            for ref, head, years in heads:
                if year in years and re.search(rf"\b{re.escape(name)}\b", head):
                    links.append(CitationLink(section.number, ref.ref_id, match.group(0)))
                    break
    return links
