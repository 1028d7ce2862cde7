"""GROBID TEI XML -> ParsedPaper: numbered sections, paragraphs, in-text citation links resolved to bibliography
ids, bibliography entries with DOIs, figures, tables and formulas (the s2orc-doc2json reading of TEI)."""

from __future__ import annotations

import re

from lumina_assets.core.schemas import CitationLink, Element, ParsedPaper, Reference, Section
from lumina_assets.parsing.base import ParseFailure, ensure_unique_numbers

TEI = "http://www.tei-c.org/ns/1.0"
NS = {"t": TEI}
XML_ID = "{http://www.w3.org/XML/1998/namespace}id"


def _text(node) -> str:
    if node is None:
        return ""
    return " ".join("".join(node.itertext()).split())


def _pages(node) -> list[int]:
    """Pages from GROBID coordinates (`coords="page,x,y,w,h;..."`, present when teiCoordinates was asked for)."""
    coords = node.get("coords") or ""
    return [int(part.split(",")[0]) for part in coords.split(";") if part.split(",")[0].isdigit()]


def _paragraph_text(p) -> str:
    """Paragraph text without the display formulas GROBID nests in some paragraphs."""
    parts: list[str] = []
    if p.text:
        parts.append(p.text)
    for child in p:
        if child.tag != f"{{{TEI}}}formula":
            parts.append("".join(child.itertext()))
        if child.tail:
            parts.append(child.tail)
    return " ".join("".join(parts).split())


def _authors(node) -> list[str]:
    names = []
    for pers in node.iterfind(".//t:author/t:persName", NS):
        forenames = [_text(f) for f in pers.iterfind("t:forename", NS)]
        surname = _text(pers.find("t:surname", NS))
        full = " ".join([*forenames, surname]).strip()
        if full:
            names.append(full)
    return names


def _reference(bibl) -> Reference:
    ref_id = bibl.get(XML_ID) or ""
    # An article's title is <analytic><title>; GROBID writes it empty when it saw none, and then <monogr><title>
    # is the venue, not a title. Without that element (books, some theses) <monogr><title> is the title.
    article_title = bibl.find("t:analytic/t:title", NS)
    title = _text(article_title) if article_title is not None else _text(bibl.find("t:monogr/t:title", NS))
    date = bibl.find(".//t:imprint/t:date[@type='published']", NS)
    year_match = re.match(r"(\d{4})", (date.get("when") or "") if date is not None else "")
    doi = _text(bibl.find(".//t:idno[@type='DOI']", NS)).lower() or None
    authors = _authors(bibl)
    raw = _text(bibl.find("t:note[@type='raw_reference']", NS))
    if not raw:
        venue = _text(bibl.find("t:monogr/t:title", NS))
        pieces = [
            ", ".join(authors),
            year_match.group(1) if year_match else "",
            title,
            venue if venue != title else "",
        ]
        raw = ". ".join(p for p in pieces if p)
    venue = _text(bibl.find("t:monogr/t:title", NS)) if article_title is not None else ""
    arxiv = re.search(r"\d{4}\.\d{4,5}", _text(bibl.find(".//t:idno[@type='arXiv']", NS)))
    return Reference(
        ref_id=ref_id,
        text=raw,
        title=title or None,
        doi=doi,
        year=int(year_match.group(1)) if year_match else None,
        authors=authors,
        venue=venue or None,
        arxiv_id=arxiv.group(0) if arxiv else None,
    )


def _element(figure) -> Element:
    kind = "table" if figure.get("type") == "table" else "figure"
    head = _text(figure.find("t:head", NS))
    label = _text(figure.find("t:label", NS))
    caption = _text(figure.find("t:figDesc", NS)) or _text(figure.find("t:note", NS))
    rows = [
        " | ".join(_text(cell) for cell in row.iterfind("t:cell", NS))
        for row in figure.iterfind(".//t:table/t:row", NS)
    ]
    shown_label = head.rstrip(" :") or (
        f"{'Table' if kind == 'table' else 'Figure'} {label}" if label else None
    )
    return Element(
        kind=kind,
        label=shown_label or None,
        caption=caption,
        content="\n".join(rows),
        page=next(iter(_pages(figure)), None),
    )


def _xml_root(xml: bytes | str, **options):
    """The XML's root element (no entities resolved, no network, no DTD); ParseFailure("bad_tei") if malformed."""
    from lxml import etree

    data = xml.encode("utf-8", errors="replace") if isinstance(xml, str) else xml
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, **options)
    try:
        return etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise ParseFailure("bad_tei", f"malformed TEI XML: {exc}") from None


def parse_tei(xml: bytes | str, paper_id: str, parser: str = "grobid") -> ParsedPaper:
    """Parse one GROBID TEI document; raises ParseFailure("bad_tei") for XML that is not a TEI document."""
    from lxml import etree

    root = _xml_root(xml, huge_tree=True)
    if root.tag != f"{{{TEI}}}TEI":
        raise ParseFailure("bad_tei", f"root element is {root.tag}, not TEI")
    # GROBID never writes a DTD; entity declarations (and the unresolved entity nodes they leave) are hostile.
    if root.getroottree().docinfo.internalDTD is not None or any(True for _ in root.iter(etree.Entity)):
        raise ParseFailure("bad_tei", "TEI with a DTD or entity references")
    try:
        return _tei_document(root, paper_id, parser)
    except (ValueError, TypeError) as exc:  # a tree shape no GROBID writes: the file's failure, not a crash
        raise ParseFailure("bad_tei", f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _section_divs(root) -> list:
    """The body's top-level divs, then the acknowledgement and annex divs of the back matter."""
    divs = list(root.iterfind("t:text/t:body/t:div", NS))
    for back in root.iterfind("t:text/t:back/t:div", NS):
        if back.get("type") in ("acknowledgement", "annex"):
            divs.extend(back.iterfind("t:div", NS) if back.find("t:div", NS) is not None else [back])
    return divs


def _div_section(
    div,
    known_ids: set[str],
    citations: list[tuple[Section, CitationLink]],
    formulas: list[tuple[Section, Element]],
) -> Section:
    """One div as a section (its paragraphs and pages); its citations and formulas are appended with it."""
    head = div.find("t:head", NS)
    number = (head.get("n") or "").rstrip(".") if head is not None else ""
    section = Section(number=number, title=_text(head), text="")
    paragraphs: list[str] = []
    pages: list[int] = _pages(head) if head is not None else []
    for child in div:
        if child.tag == f"{{{TEI}}}p":
            text = _paragraph_text(child)
            if text:
                paragraphs.append(text)
            pages += _pages(child)
            for ref in child.iterfind(".//t:ref[@type='bibr']", NS):
                target = (ref.get("target") or "").lstrip("#") or None
                link = CitationLink(section.number, target if target in known_ids else None, _text(ref))
                citations.append((section, link))
            for formula in child.iterfind("t:formula", NS):
                formulas.append((section, _formula(formula)))
        elif child.tag == f"{{{TEI}}}formula":
            formulas.append((section, _formula(child)))
    section.text = "\n\n".join(paragraphs)
    if pages:
        section.page_start, section.page_end = min(pages), max(pages)
    return section


def _tei_document(root, paper_id: str, parser: str) -> ParsedPaper:
    title = _text(root.find("t:teiHeader//t:titleStmt/t:title", NS))
    abstract = "\n\n".join(
        _text(p) for p in root.iterfind("t:teiHeader//t:profileDesc/t:abstract//t:p", NS) if _text(p)
    )
    references = [_reference(b) for b in root.iterfind("t:text/t:back//t:listBibl/t:biblStruct", NS)]
    known_ids = {ref.ref_id for ref in references}
    citations: list[tuple[Section, CitationLink]] = []
    formulas: list[tuple[Section, Element]] = []
    sections = [_div_section(div, known_ids, citations, formulas) for div in _section_divs(root)]
    ensure_unique_numbers(sections)
    for section, link in citations:
        link.section_number = section.number
    elements: list[Element] = []
    for section, formula in formulas:
        formula.section_number = section.number
        elements.append(formula)
    for figure in root.iterfind("t:text//t:figure", NS):
        elements.append(_element(figure))
    return ParsedPaper(
        paper_id=paper_id,
        parser=parser,
        title=title,
        abstract=abstract,
        sections=[s for s in sections if s.text or s.title],
        references=references,
        citations=[link for _, link in citations],
        elements=[e for e in elements if (e.caption or e.content).strip()],
        page_count=None,
    )


def _formula(node) -> Element:
    label = _text(node.find("t:label", NS)) or None
    parts = [node.text or ""] + [
        "".join(child.itertext()) + (child.tail or "") for child in node if child.tag != f"{{{TEI}}}label"
    ]
    return Element(
        kind="formula",
        label=label,
        caption="",
        content=" ".join("".join(parts).split()),
        page=next(iter(_pages(node)), None),
    )


def parse_tei_header(xml: bytes | str) -> dict:
    """Title, authors, venue, year, DOI and page range ("1683-1688") from a GROBID TEI header (`processHeaderDocument`
    or the full text's header); empty fields left out. Raises ParseFailure("bad_tei") like `parse_tei`."""
    root = _xml_root(xml)
    source = root.find("t:teiHeader/t:fileDesc/t:sourceDesc/t:biblStruct", NS)
    header: dict = {"title": _text(root.find("t:teiHeader//t:titleStmt/t:title", NS))}
    if source is not None:
        analytic = source.find("t:analytic", NS)
        header["authors"] = _authors(analytic) if analytic is not None else []
        header["venue"] = _text(source.find("t:monogr/t:title", NS))
        date = source.find("t:monogr/t:imprint/t:date[@type='published']", NS)
        year = re.match(r"(\d{4})", (date.get("when") or "") if date is not None else "")
        header["year"] = int(year.group(1)) if year else None
        header["doi"] = _text(source.find(".//t:idno[@type='DOI']", NS)).lower() or None
        scope = source.find("t:monogr/t:imprint/t:biblScope[@unit='page']", NS)
        if scope is not None:
            first, last = scope.get("from") or _text(scope), scope.get("to")
            header["pages"] = f"{first}-{last}" if first and last else first
    return {k: v for k, v in header.items() if v not in (None, "", [])}
