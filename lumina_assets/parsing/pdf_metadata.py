"""Paper metadata as the PDF itself prints it (authors, venue, year, DOI, arXiv id, pages), with the Info
dictionary as the fallback; each field records where it came from (`sources`). docs/pdf-papers.md has the rules."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from lumina_assets.parsing.titles import ARXIV_STAMP, is_letter_spaced

DOI_IN_TEXT = re.compile(r"(?:doi\s*[:.]?\s*|doi\.org/)(10\.\d{4,9}/[^\s\"<>,;]+)", re.IGNORECASE)
ARXIV_IN_TEXT = re.compile(r"arXiv:\s*(\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
# the stamp arXiv prints in the margin of its PDFs: "arXiv:2501.10120v1  [cs.IR]  17 Jan 2025"
ARXIV_STAMP_DATED = re.compile(
    r"arXiv:\s*(\d{4}\.\d{4,5})(?:v\d+)?\s+\[(?P<primary>[^\]]{1,30})\]\s+\d{1,2}\s+[A-Z][a-z]{2}\s+"
    r"(?P<year>(?:19|20)\d\d)"
)
_PROCEEDINGS = re.compile(
    r"((?:In\s+)?Proceedings of (?:the )?[^\n]{3,200}?)(?:,\s*(?:pages|pp\.|page)\b|,?\s*$|\s*\((?:19|20)\d\d\))",
    re.IGNORECASE | re.MULTILINE,
)
# "De Marchis et al. Journal of NeuroEngineering and Rehabilitation (2016) 13:22" (BMC / Springer running header)
_JOURNAL_HEADER = re.compile(
    r"^(?:.{0,60}?et al\.?\s+)?(?P<journal>[A-Z][A-Za-z&:,'’\- ]{5,120}?)\s*\(?(?P<year>(?:19|20)\d\d)\)?"
    r"\s*(?:,\s*)?\d+(?:\s*\(\d+\))?\s*[:,]\s*\d+"
)
# "IEEE TRANSACTIONS ON PATTERN ANALYSIS AND MACHINE INTELLIGENCE, VOL. 40, NO. 5, MAY 2018" (IEEE running header)
_VOLUME_HEADER = re.compile(
    r"^(?P<journal>[A-Z][A-Za-z ,&:\-]{5,150}?),?\s+VOL\.?\s*\d+,\s*NO\.?\s*\d+,\s*(?:[A-Z][A-Za-z]*\.?\s+)?"
    r"(?P<year>(?:19|20)\d\d)",
    re.IGNORECASE,
)
# "CHI '23, April 23–28, 2023, Hamburg, Germany" (ACM conference line on page one)
_ACM_CONFERENCE = re.compile(
    r"^(?P<venue>[A-Z][A-Za-z]{1,15} ?['’]\d{2}),\s+[A-Z][a-z]+\.? \d{1,2}[^,]{0,20},\s+(?P<year>(?:19|20)\d\d)\b"
)
_JOURNAL_WORD = re.compile(
    r"\b(Journal|Transactions|Letters|Review|Proceedings|Annals|Bulletin|Nature|Science)\b"
)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")
# "Proceedings of NAACL-HLT 2018, pages 84–91" (ACL), "pp. 12-20"
_PAGES = re.compile(r"\b(?:pages|pp\.)\s*(\d{1,5})\s*(?:-{1,2}|\u2013|\u2014|\u2212)\s*(\d{1,5})\b")
# a journal's running header with its page range: "J. Chem. Theory Comput. 2023, 19, 2149−2160"
_RUNNING_PAGES = re.compile(
    r"(?:19|20)\d\d\s*,\s*\d+\s*(?:\(\d+\))?\s*,\s*(\d{1,5})\s*(?:-{1,2}|\u2013|\u2014|\u2212)\s*(\d{1,5})\s*$"
)
# ACL Anthology ids: "2020.acl-main.207" (2020 on), "N18-3011" (before); their DOIs are 10.18653/v1/<id>
_ANTHOLOGY_ID = re.compile(r"^(?:(?:19|20)\d\d\.[a-z\d]+-[a-z\d]+\.\d{1,4}|[A-Z]\d{2}-\d{4})$")
ACL_DOI_PREFIX = "10.18653/v1/"
_AFFILIATION = re.compile(
    r"\b(universit\w*|institut\w*|department|dept|school|college|laborator\w*|lab|labs|research|centre|center|"
    r"inc|ltd|corp\w*|company|foundation|hospital|academy|faculty|ai2|google|microsoft|meta|bytedance|"
    r"street|road|usa|china|germany|italy|india|japan|france|demo|abstract|keywords?|equal|contribution|"
    r"corresponding|author|open access|research article|preprint|submitted|accepted|published)\b",
    re.IGNORECASE,
)
_MARKERS = "†‡∗*§¶⋄□■◆♣♠♦♥⊥⊤‖#"
_PARTICLES = frozenset("van von de der den da di del la le du dos bin al ter".split())
_NAME_TOKEN = re.compile(r"^(?:[^\W\d_][\w'’\-]*\.?|[^\W\d_]\.(?:-?[^\W\d_]\.)*)$")


@dataclass
class PdfHeader:
    title: str = ""
    authors: list[str] = field(default_factory=list)
    venue: str | None = None
    year: int | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    pages: str | None = None  # "2270–2282", as printed
    arxiv_primary_class: str | None = None  # "cs.IR", from the arXiv stamp
    # field -> pdf_text | pdf_info | arxiv_stamp | file_name | anthology_id
    sources: dict[str, str] = field(default_factory=dict)


def looks_like_name(text: str) -> bool:
    """Two to five capitalized tokens (particles and initials allowed), no digits, no institution words."""
    tokens = text.split()
    if not 2 <= len(tokens) <= 6 or any(ch.isdigit() for ch in text) or _AFFILIATION.search(text):
        return False
    if "@" in text or "/" in text or "http" in text.lower() or ":" in text:
        return False
    named = [t for t in tokens if t.lower() not in _PARTICLES]
    capitalized = all(t[:1].isupper() and _NAME_TOKEN.match(t) for t in named)  # "Émile", "Łukasz" too
    return len(named) >= 2 and capitalized and len(named[0]) > 1


def _is_marker(char: str) -> bool:
    """A footnote or affiliation mark: the listed ones, and any other math or symbol sign or punctuation that is
    not part of a name ("⋆", "∥", "♯" set at body size)."""
    if char in _MARKERS:
        return True
    return unicodedata.category(char) in ("Sm", "So", "Po") and char not in ".'’,;&"


def _clean_piece(text: str) -> str:
    text = "".join(" " if _is_marker(c) else c for c in text)
    text = re.sub(r"(?<=[a-z])[α-ωΑ-Ω]+(?:,[α-ωΑ-Ω]+)*", " ", text)  # "Loα" (a marker set in the body font)
    text = re.sub(r"(?<=[a-z])\d+(?:\s*,\s*\d+)*\b", " ", text)  # "Marchis1,2,3"
    return " ".join(text.split()).strip(" ,;")


def _line_pieces(spans: list[dict], main_size: float) -> list[str]:
    """A line's text cut where a superscript (smaller span) or a marker sits: "Russell Authurα Erin Bransomα"."""
    pieces: list[str] = []
    current = ""
    for span in spans:
        text = span["text"]
        if span["size"] < main_size * 0.85 or not text.strip(" ,") and "," in text:
            pieces.append(current)
            current = ""
            continue
        current += text
    pieces.append(current)
    names: list[str] = []
    for piece in pieces:
        for part in re.split(r",|;|\s+and\s+|\s+&\s+|^and\s+", piece):
            cleaned = _clean_piece(part)
            if cleaned:
                names.append(cleaned)
    return names


def _first_page_lines(page) -> list[tuple[float, float, float, str, list[dict]]]:
    """(y0, y1, main size, text, spans) of every horizontal line on the page, top to bottom."""
    out = []
    for block in page.get_text("dict", flags=0)["blocks"]:
        for line in block.get("lines", []):
            if abs(line["dir"][0] - 1.0) > 0.01:
                continue
            spans = [s for s in line["spans"] if s["text"]]
            text = "".join(s["text"] for s in spans).strip()
            if not text:
                continue
            sizes = Counter()
            for span in spans:
                sizes[round(span["size"], 1)] += len(span["text"].strip())
            out.append((line["bbox"][1], line["bbox"][3], sizes.most_common(1)[0][0], text, spans))
    out.sort(key=lambda item: item[0])
    rows: list[list] = []  # lines whose tops lie within 3 pt form one row, read left to right
    for item in out:
        if rows and item[0] - rows[-1][0][0] < 3:
            rows[-1].append(item)
        else:
            rows.append([item])
    return [item for row in rows for item in sorted(row, key=lambda it: it[4][0]["bbox"][0])]


def _title_band(lines: list[tuple]) -> tuple[float, float] | None:
    """(the title's font size, its bottom): the largest text in the lines that are not an arXiv stamp or
    letter-spaced; None without such lines."""
    titled = [
        ln
        for ln in lines
        if len(ln[3]) > 8
        and not ARXIV_STAMP.search(ln[3])
        and not is_letter_spaced([s["text"] for s in ln[4]])
    ]
    if not titled:
        return None
    title_size = max(ln[2] for ln in titled)
    return title_size, max(ln[1] for ln in titled if abs(ln[2] - title_size) < 0.3)


def _open_piece(pieces: list[str], spans: list[dict], size: float) -> str:
    """The line's last name when the line does not end with a separator, so the name may run on to the next line."""
    body = "".join(
        " " if _is_marker(c) else c for sp in spans if sp["size"] >= size * 0.85 for c in sp["text"]
    )
    ends_open = pieces and not re.search(r"(?:[,;&]|\band)[\s\d]*$", body)
    return pieces[-1] if ends_open and len(pieces[-1].split()) <= 3 else ""


def authors_from_first_page(page) -> list[str]:
    """The names printed between the title (the largest text in the top half) and the abstract."""
    lines = [ln for ln in _first_page_lines(page) if ln[0] < page.rect.height * 0.6]
    band = _title_band(lines)
    if band is None:
        return []
    title_size, title_bottom = band
    names: list[str] = []
    carry = ""  # the last piece of the previous author line, when a name may run on to the next line
    for y0, _, size, text, spans in lines:
        if y0 < title_bottom - 1 or abs(size - title_size) < 0.3:
            continue
        if re.match(r"^\s*(abstract|a b s t r a c t|keywords|introduction|1\s+introduction)\b", text, re.I):
            break
        if len(text.split()) > 30 or is_letter_spaced([s["text"] for s in spans]):
            continue
        if _AFFILIATION.search(text) or "@" in text:
            carry = ""
            continue
        pieces = _line_pieces(spans, size)
        if carry and pieces and _runs_on(carry, pieces[0]):
            if names and names[-1] == carry:
                names.pop()
            pieces[0] = f"{carry} {pieces[0]}"
        names += [p for p in pieces if looks_like_name(p)]
        carry = _open_piece(pieces, spans, size)
    return list(dict.fromkeys(names))


def _runs_on(tail: str, head: str) -> bool:
    """Whether `tail` (the end of one author line) and `head` (the start of the next) are one name broken by the
    line wrap: "Andrew D." + "White", "Andrew" + "D. White"."""
    joined = f"{tail} {head}"
    if len(joined.split()) > 5 or not looks_like_name(joined):
        return False
    return not looks_like_name(tail) or not looks_like_name(head) or bool(re.search(r"\b[A-Z]\.$", tail))


def authors_from_info(value: str | None) -> list[str]:
    """The Info dictionary's /Author ("A ; B ; C" or "A, B and C"), names only."""
    parts = [
        re.sub(r"^and\s+", "", p.strip())
        for p in re.split(r"\s*;\s*|\s*,\s*|\s+and\s+|\s+&\s+", value or "")
        if p.strip()
    ]
    return [p for p in parts if 1 < len(p) <= 60 and not p.isdigit()]


def venue_from_text(
    first_page_text: str, pages_margins: list[str], subject: str | None, page_count: int
) -> tuple[str, int | None, str] | None:
    """(venue, year, source) from a "Proceedings of ..." line or an ACM conference line ("CHI '23, April 23–28,
    2023, ...") on page one, a journal named in a running header repeated on most pages (BMC / Springer "(2016)
    13:22", IEEE "VOL. 40, NO. 5, MAY 2018"), or the Info /Subject naming a journal."""
    for line in first_page_text.splitlines()[:80]:
        match = _PROCEEDINGS.search(line.strip())
        if match:
            venue = re.sub(r"^In\s+", "", match.group(1)).strip(" ,.")
            year = _YEAR.search(venue) or _YEAR.search(first_page_text[first_page_text.find(line) :][:300])
            return venue, int(year.group(1)) if year else None, "pdf_text"
    for line in first_page_text.splitlines():
        match = _ACM_CONFERENCE.match(line.strip())
        if match:
            return match.group("venue"), int(match.group("year")), "pdf_text"
    for line, seen in Counter(pages_margins).most_common():
        if seen < max(2, int(0.3 * page_count)):
            break
        match = _VOLUME_HEADER.match(line)
        if match:
            return match.group("journal").strip(" ,."), int(match.group("year")), "pdf_text"
        match = _JOURNAL_HEADER.match(line)
        if match and (_JOURNAL_WORD.search(match.group("journal")) or re.search(r"\bet al\b", line)):
            return match.group("journal").strip(" ,."), int(match.group("year")), "pdf_text"
    if subject:
        head = subject.split(",")[0].strip()
        if _JOURNAL_WORD.search(head) and len(head) > 8:
            year = _YEAR.search(subject)
            return head, int(year.group(1)) if year else None, "pdf_info"
    return None


def pages_from_text(first_page_text: str) -> str | None:
    """The page range printed on page one ("pages 2270–2282" under an ACL paper), as "2270–2282"."""
    match = _PAGES.search(first_page_text)
    if not match or int(match.group(2)) < int(match.group(1)):
        return None
    return f"{match.group(1)}\u2013{match.group(2)}"


def from_running_text(margins: list[str]) -> tuple[str | None, str | None]:
    """(DOI, page range) printed in a running header or footer: on the margin lines of at least two pages."""
    dois = Counter(m.group(1).rstrip(".") for line in margins for m in DOI_IN_TEXT.finditer(line))
    doi = next((d for d, seen in dois.most_common() if seen >= 2), None)
    ranges = Counter(
        (m.group(1), m.group(2))
        for line in margins
        if (m := _RUNNING_PAGES.search(line)) and int(m.group(2)) >= int(m.group(1))
    )
    pages = next((f"{a}\u2013{b}" for (a, b), seen in ranges.most_common() if seen >= 2), None)
    return doi, pages


def anthology_doi(file_stem: str, first_page_text: str) -> str | None:
    """The DOI of an ACL Anthology paper named by its anthology id ("2020.acl-main.207.pdf"), when page one
    prints the ACL copyright line: the Anthology registers its papers as 10.18653/v1/<id>."""
    if (
        not _ANTHOLOGY_ID.match(file_stem or "")
        or "Association for Computational Linguistics" not in first_page_text
    ):
        return None
    return ACL_DOI_PREFIX + file_stem


def margin_lines(document) -> list[str]:
    """Text lines in the top and bottom 8 % of every page (running headers and footers)."""
    zone = 0.08
    out: list[str] = []
    for page in document:
        height = page.rect.height
        for block in page.get_text("blocks"):
            x0, y0, x1, y1, text, *_ = block
            if y1 < height * zone or y0 > height * (1 - zone):
                out += [" ".join(t.split()) for t in text.splitlines() if t.strip()]
    return out


def _header_authors(header: PdfHeader, first, meta: dict[str, str]) -> None:
    """Authors from the first page's text, else from the document info."""
    if first is not None:
        header.authors = authors_from_first_page(first)
        if header.authors:
            header.sources["authors"] = "pdf_text"
    if not header.authors:
        header.authors = authors_from_info(meta.get("author"))
        if header.authors:
            header.sources["authors"] = "pdf_info"


def _header_doi(
    header: PdfHeader, first_text: str, meta: dict[str, str], running_doi: str | None, file_stem: str
) -> None:
    """The DOI printed on the first page or in the info's subject, else in the running text, else from an ACL
    Anthology id."""
    from lumina_assets.core.ids import normalize_doi

    doi_match = DOI_IN_TEXT.search(first_text) or DOI_IN_TEXT.search(meta.get("subject") or "")
    if doi_match:
        header.doi = normalize_doi(doi_match.group(1).rstrip("."))
        header.sources["doi"] = "pdf_text" if DOI_IN_TEXT.search(first_text) else "pdf_info"
    if header.doi is None and running_doi:
        header.doi = normalize_doi(running_doi)
        header.sources["doi"] = "pdf_text"
    if header.doi is None and anthology_doi(file_stem, first_text):
        header.doi = normalize_doi(anthology_doi(file_stem, first_text))
        header.sources["doi"] = "anthology_id"


def _header_arxiv(header: PdfHeader, first_text: str, file_stem: str):
    """The arXiv id printed (the dated stamp first) or in the file's name, and the stamp's primary class; returns
    the dated stamp's match."""
    from lumina_assets.core.ids import normalize_arxiv_class, normalize_arxiv_id

    stamp = ARXIV_STAMP_DATED.search(first_text)
    printed = stamp or ARXIV_IN_TEXT.search(first_text[:600])
    from_name = normalize_arxiv_id(file_stem) if file_stem else None
    if printed or from_name:
        header.arxiv_id = printed.group(1) if printed else from_name
        header.sources["arxiv_id"] = ("arxiv_stamp" if stamp else "pdf_text") if printed else "file_name"
    if stamp and header.arxiv_id == stamp.group(1) and normalize_arxiv_class(stamp.group("primary")):
        header.arxiv_primary_class = normalize_arxiv_class(stamp.group("primary"))
        header.sources["arxiv_primary_class"] = "arxiv_stamp"
    return stamp


def _header_venue_year(header: PdfHeader, found, stamp, meta: dict[str, str]) -> None:
    """Venue and year from the text (`found`), else the arXiv stamp; the year at last from the creation date."""
    if found:
        header.venue, header.year, source = found
        header.sources["venue"] = source
        if header.year:
            header.sources["year"] = source
    elif stamp:
        header.venue = "arXiv"
        header.sources["venue"] = "arxiv_stamp"
        header.year = int(stamp.group("year"))
        header.sources["year"] = "arxiv_stamp"
    if header.year is None:
        created = re.match(r"D:(\d{4})", meta.get("creationDate") or "")
        if created:
            header.year = int(created.group(1))
            header.sources["year"] = "pdf_info_date"


def header_from_info(meta: dict[str, str], file_stem: str) -> PdfHeader:
    """What a PDF says of itself without reading a page: the Info dictionary's authors and creation year, and an
    arXiv id in the file name."""
    header = PdfHeader()
    _header_authors(header, None, meta)
    _header_arxiv(header, "", file_stem)
    _header_venue_year(header, None, None, meta)
    return header


def read_header(document, *, file_stem: str = "") -> PdfHeader:
    """Everything the PDF prints about itself (title excepted: see corpus.local), each field with its source."""
    header = PdfHeader()
    meta = {k: v for k, v in (document.metadata or {}).items() if isinstance(v, str)}
    first = document[0] if document.page_count else None
    first_text = first.get_text("text") if first is not None else ""
    _header_authors(header, first, meta)
    margins = margin_lines(document)
    running_doi, running_pages = from_running_text(margins)
    _header_doi(header, first_text, meta, running_doi, file_stem)
    header.pages = pages_from_text(first_text) or running_pages
    if header.pages:
        header.sources["pages"] = "pdf_text"
    stamp = _header_arxiv(header, first_text, file_stem)
    found = venue_from_text(first_text, margins, meta.get("subject"), document.page_count)
    _header_venue_year(header, found, stamp, meta)
    return header
