"""Metadata of the shared PDFs as their pages print it. Every expected value was read off the PDFs by hand (first
page, running headers, arXiv stamps), not produced by the code under test."""

from __future__ import annotations

import pymupdf
import pytest

from lumina_assets.corpus.local import pdf_metadata
from lumina_assets.parsing.pdf_metadata import (
    authors_from_first_page,
    authors_from_info,
    from_running_text,
    looks_like_name,
    read_header,
)

ACL_2020 = "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics"
EXPECTED = {
    "0046d83a-edd6-4631-b57c-755cdcce8b7f": dict(
        authors=[
            "Cristiano De Marchis",
            "Thiago Santos Monteiro",
            "Cristina Simon-Martinez",
            "Silvia Conforto",
            "Alireza Gharabaghi",
        ],
        venue="Journal of NeuroEngineering and Rehabilitation",
        year=2016,
        doi="10.1186/s12984-016-0129-6",
        arxiv_id=None,
    ),
    "2020.acl-main.207": dict(
        authors=["Arman Cohan", "Sergey Feldman", "Iz Beltagy", "Doug Downey", "Daniel S. Weld"],
        venue=ACL_2020,
        year=2020,
        doi="10.18653/v1/2020.acl-main.207",  # the ACL Anthology DOI of the id in the file name
        arxiv_id=None,
    ),
    "2020.acl-main.447": dict(
        authors=["Kyle Lo", "Lucy Lu Wang", "Mark Neumann", "Rodney Kinney", "Daniel S. Weld"],
        venue=ACL_2020,
        year=2020,
        doi="10.18653/v1/2020.acl-main.447",  # the ACL Anthology DOI of the id in the file name
        arxiv_id=None,
    ),
    "2304.02623v1": dict(
        authors=[
            "Zejiang Shen",
            "Tal August",
            "Pao Siangliulue",
            "Kyle Lo",
            "Jonathan Bragg",
            "Jeff Hammerbacher",
            "Doug Downey",
            "Joseph Chee Chang",
            "David Sontag",
        ],
        venue="arXiv",
        year=2023,
        doi=None,
        arxiv_id="2304.02623",
    ),
    "N18-3011": dict(
        authors=[
            "Waleed Ammar",
            "Dirk Groeneveld",
            "Chandra Bhagavatula",
            "Iz Beltagy",
            "Miles Crawford",
            "Doug Downey",
            "Jason Dunkelberger",
            "Ahmed Elgohary",
            "Sergey Feldman",
            "Vu Ha",
            "Rodney Kinney",
            "Sebastian Kohlmeier",
            "Kyle Lo",
            "Tyler Murray",
            "Hsu-Han Ooi",
            "Matthew Peters",
            "Joanna Power",
            "Sam Skjonsberg",
            "Lucy Lu Wang",
            "Chris Wilhelm",
            "Zheng Yuan",
            "Madeleine van Zuylen",
            "Oren Etzioni",
        ],
        venue="Proceedings of NAACL-HLT 2018",
        year=2018,
        doi="10.18653/v1/n18-3011",  # DOIs compare case-insensitively; stored lower-case
        arxiv_id=None,
    ),
    "papermage": dict(
        authors=[
            "Kyle Lo",
            "Zejiang Shen",
            "Benjamin Newman",
            "Joseph Chee Chang",
            "Russell Authur",
            "Erin Bransom",
            "Stefan Candra",
            "Yoganand Chandrasekhar",
            "Regan Huff",
            "Bailey Kuehl",
            "Amanpreet Singh",
            "Chris Wilhelm",
            "Angele Zamarron",
            "Marti A. Hearst",
            "Daniel S. Weld",
            "Doug Downey",
            "Luca Soldaini",
        ],
        venue=None,  # a preprint layout: no venue printed anywhere in the PDF
        doi=None,
        arxiv_id=None,
    ),
    "pasa": dict(
        authors=[
            "Yichen He",
            "Guanhua Huang",
            "Peiyuan Feng",
            "Yuan Lin",
            "Yuchen Zhang",
            "Hang Li",
            "Weinan E",
        ],
        venue="arXiv",
        year=2025,
        doi=None,
        arxiv_id="2501.10120",
    ),
}


@pytest.fixture(scope="module")
def papers(shared_data):
    return {name: pdf_metadata(shared_data / "pdfs" / f"{name}.pdf") for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_printed_metadata(papers, name):
    paper, expected = papers[name], EXPECTED[name]
    for field, value in expected.items():
        assert getattr(paper, field) == value, (name, field)


def test_each_field_names_its_source(papers):
    sources = dict(entry.split(":", 1) for entry in papers["2020.acl-main.207"].metadata_sources)
    assert (
        sources["authors"] == "pdf_text" and sources["venue"] == "pdf_text" and sources["title"] == "pdf_info"
    )
    pasa = dict(entry.split(":", 1) for entry in papers["pasa"].metadata_sources)
    assert (
        pasa["venue"] == "arxiv_stamp" and pasa["arxiv_id"] == "arxiv_stamp" and pasa["title"] == "pdf_text"
    )
    papermage = dict(entry.split(":", 1) for entry in papers["papermage"].metadata_sources)
    assert papermage["year"] == "pdf_info_date"  # only the PDF's creation date tells the year
    assert "venue" not in papermage


def test_info_authors_are_the_fallback_when_the_page_prints_none(tmp_path):
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 90), "A Study of Things That Matter", fontsize=18)
    page.insert_text((72, 140), "Abstract", fontsize=11)
    page.insert_text(
        (72, 160), "We study things that matter and report what we found about them.", fontsize=10
    )
    doc.set_metadata({"author": "Ada Lovelace ; Charles Babbage"})
    doc.save(tmp_path / "info.pdf")
    paper = pdf_metadata(tmp_path / "info.pdf")
    assert paper.authors == ["Ada Lovelace", "Charles Babbage"]
    assert "authors:pdf_info" in paper.metadata_sources


def test_small_caps_title_is_repaired(tmp_path):
    """A title set in small capitals (a full-size initial, then smaller capitals) reads "L ONG E VAL : ..." in the
    PDF's text; the catalogue gets "LONGEVAL: ..."."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    font = pymupdf.Font("tiro")
    x = 100.0
    for text, size in [
        ("L", 17),
        ("ONG", 13),
        ("E", 17),
        ("VAL", 13),
        (":", 17),
        (" Guidelines for Human", 17),
    ]:
        page.insert_text((x, 100), text, fontsize=size, fontname="tiro")
        x += font.text_length(text, fontsize=size) + 3
    page.insert_text(
        (100, 125), "Evaluation of Faithfulness in Long-form Summarization", fontsize=17, fontname="tiro"
    )
    page.insert_text((100, 160), "Kalpesh Krishna, Erin Bransom, Bailey Kuehl", fontsize=11, fontname="tiro")
    doc.save(tmp_path / "smallcaps.pdf")
    assert "L ONG E VAL :" in pymupdf.open(tmp_path / "smallcaps.pdf")[0].get_text()  # what the page says
    paper = pdf_metadata(tmp_path / "smallcaps.pdf")
    assert (
        paper.title == "LONGEVAL: Guidelines for Human Evaluation of Faithfulness in Long-form Summarization"
    )
    assert paper.authors == ["Kalpesh Krishna", "Erin Bransom", "Bailey Kuehl"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Daniel S. Weld", True),
        ("Madeleine van Zuylen", True),
        ("Weinan E", True),
        ("Émile Durkheim", True),
        ("Łukasz Kaiser", True),
        ("Allen Smith", True),
        ("Allen Institute for AI", False),
        ("Seattle WA 98103", False),
        ("Northwestern University", False),
        ("Paper Search", True),  # shape alone cannot tell: the letter-spaced logo is refused by its spans
        ("{kylel, lucas}@allenai.org", False),
    ],
)
def test_looks_like_name(text, expected):
    assert looks_like_name(text) is expected


@pytest.mark.parametrize(
    "first_page, margins, expected",
    [
        (
            "Title\nCHI '23, April 23–28, 2023, Hamburg, Germany\n© 2023 Copyright held by the owner/author(s).",
            [],
            ("CHI '23", 2023),
        ),
        (
            "Title",
            ["IEEE TRANSACTIONS ON PATTERN ANALYSIS AND MACHINE INTELLIGENCE, VOL. 40, NO. 5, MAY 2018"] * 6,
            ("IEEE TRANSACTIONS ON PATTERN ANALYSIS AND MACHINE INTELLIGENCE", 2018),
        ),
        (
            "Title",
            ["Smith et al. BMC Bioinformatics (2019) 20:118"] * 5 + ["Page 2 of 12"],
            ("BMC Bioinformatics", 2019),
        ),
        ("In this paper we study things.\nWe build on prior work in the area.", ["7", "8"], None),
    ],
)
def test_venue_layouts_beyond_the_shared_pdfs(first_page, margins, expected):
    """Layouts the shared PDFs do not have, written as such papers print them (ACM, IEEE, BMC)."""
    from lumina_assets.parsing.pdf_metadata import venue_from_text

    found = venue_from_text(first_page, margins, None, page_count=6)
    assert (found[:2] if found else None) == expected


@pytest.mark.parametrize(
    ("name", "pages"),
    [
        ("N18-3011", "84–91"),
        ("2020.acl-main.207", "2270–2282"),
        ("2020.acl-main.447", "4969–4983"),
        ("pasa", None),
    ],
)
def test_pages_printed_on_page_one(shared_data, name, pages):
    with pymupdf.open(shared_data / "pdfs" / f"{name}.pdf") as document:
        header = read_header(document, file_stem=name)
    assert header.pages == pages
    assert (header.sources.get("pages") == "pdf_text") == bool(pages)


def test_anthology_doi_needs_the_anthology_id_and_the_acl_line(shared_data, tmp_path):
    """An ACL PDF named by its anthology id gets 10.18653/v1/<id>; renamed, it gets none; a non-ACL PDF whose
    name happens to look like an anthology id gets none either."""
    acl = (shared_data / "pdfs" / "2020.acl-main.207.pdf").read_bytes()
    (tmp_path / "specter.pdf").write_bytes(acl)
    (tmp_path / "2020.acl-main.999.pdf").write_bytes((shared_data / "pdfs" / "pasa.pdf").read_bytes())
    with pymupdf.open(shared_data / "pdfs" / "2020.acl-main.207.pdf") as document:
        header = read_header(document, file_stem="2020.acl-main.207")
    assert header.doi == "10.18653/v1/2020.acl-main.207" and header.sources["doi"] == "anthology_id"
    assert pdf_metadata(tmp_path / "specter.pdf").doi is None
    assert pdf_metadata(tmp_path / "2020.acl-main.999.pdf").doi is None


def _title_page(lines: list[list[tuple[str, str]]], *, marker_size: float = 8) -> pymupdf.Page:
    """An achemso-style title page (the layout of "A Perspective on Explanations of Molecular Prediction Models"):
    a two-line bold title, the author line(s) with affiliation marks raised and smaller, affiliations, e-mail,
    "Abstract"."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)

    def put(x, y, text, size, font="tiro"):
        page.insert_text((x, y), text, fontsize=size, fontname=font)
        return x + pymupdf.get_text_length(text, fontname=font, fontsize=size)

    put(90, 110, "A Perspective on Explanations of Molecular", 17.28, "tibo")
    put(180, 132, "Prediction Models", 17.28, "tibo")
    y = 165
    for line in lines:
        x = 85
        for text, mark in line:
            x = put(x, y, text, 12)
            if mark:
                x = put(x, y - 4 if marker_size < 12 else y, mark, marker_size)
        y += 16
    put(120, y + 5, "†", 8)
    put(125, y + 9, "Department of Chemistry, University of Rochester, Rochester, NY, 14627", 10.95)
    put(200, y + 30, "E-mail: andrew.white@rochester.edu", 10.95)
    put(280, y + 60, "Abstract", 12, "tibo")
    put(72, y + 80, "Chemistry and materials science are complex. Recently, there have been successes", 12)
    return page


FIRST_THREE = [("Geemi P. Wellawatte,", "†"), (" Heta A. Gandhi,", "‡"), (" Aditi Seshadri,", "‡")]
WELLAWATTE = ["Geemi P. Wellawatte", "Heta A. Gandhi", "Aditi Seshadri", "Andrew D. White"]


@pytest.mark.parametrize(
    "lines",
    [
        [[*FIRST_THREE, (" and Andrew D. White", "∗,‡")]],  # one line
        [[*FIRST_THREE, (" and Andrew D.", "")], [("White", "∗,‡,¶")]],  # wrapped after the initial
        [[*FIRST_THREE, (" and Andrew", "")], [("D. White", "∗,‡,¶")]],  # wrapped after the given name
        [[*FIRST_THREE, (" and", "")], [("Andrew D. White", "∗,‡")]],  # wrapped after "and"
    ],
    ids=["one-line", "wrap-after-initial", "wrap-after-given-name", "wrap-after-and"],
)
def test_the_last_author_survives_the_author_line_wrap(lines):
    """A reconstruction of the dropped-last-author case (the PDF is not in the shared data): the last name of an
    author line wrapped onto the next line was cut in two, and "White" alone is not a name."""
    assert authors_from_first_page(_title_page(lines)) == WELLAWATTE


def test_a_mark_set_at_body_size_does_not_drop_a_name():
    lines = [[*FIRST_THREE, (" and Andrew D. White", "⋆∥")]]
    assert authors_from_first_page(_title_page(lines, marker_size=12)) == WELLAWATTE


def test_info_author_list_with_a_final_and():
    assert authors_from_info("Geemi P. Wellawatte, Heta A. Gandhi, Aditi Seshadri, and Andrew D. White") == (
        WELLAWATTE
    )


def test_doi_and_pages_from_a_running_header_and_footer():
    """A journal layout whose page one prints neither: the running header carries the page range ("J. Chem.
    Theory Comput. 2023, 19, 2149−2160") and the footer of later pages the DOI; each counts once it repeats."""
    doc = pymupdf.open()
    for number in range(3):
        page = doc.new_page(width=612, height=792)
        if number:
            page.insert_text((72, 40), "J. Chem. Theory Comput. 2023, 19, 2149-2160", fontsize=8)
            page.insert_text((72, 770), "https://doi.org/10.1021/acs.jctc.2c01235", fontsize=8)
        page.insert_text((72, 300), "Body text of a page that says nothing about itself.", fontsize=10)
    header = read_header(doc, file_stem="paper")
    assert (header.doi, header.pages) == ("10.1021/acs.jctc.2c01235", "2149–2160")
    once = pymupdf.open()
    for number in range(3):
        page = once.new_page(width=612, height=792)
        if number == 1:  # printed on one page only: a reference or a note, not a running footer
            page.insert_text((72, 770), "https://doi.org/10.1021/acs.jctc.2c01235", fontsize=8)
        page.insert_text((72, 300), "Body text of a page that says nothing about itself.", fontsize=10)
    assert read_header(once, file_stem="paper").doi is None
    # the minus sign ACS prints between the pages (a base-14 font above cannot draw it)
    margins = ["J. Chem. Theory Comput. 2023, 19, 2149\u22122160"] * 2
    assert from_running_text(margins) == (None, "2149–2160")
