"""What enters retrieval from a paper's body: no back matter, no bare pointers, no stubs on their own, labels as
printed. Checked on the seven shared PDFs and on small hand-made sections."""

from __future__ import annotations

import re

import pytest

from lumina_assets.core.schemas import Element, ParsedPaper, Section
from lumina_assets.parsing.chunking import passages_for_paper, whitespace_token_counter
from lumina_assets.parsing.passage_hygiene import (
    is_back_matter,
    is_bare_pointer,
    is_boilerplate,
    printed_number,
    real_words,
)
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser

BACK_MATTER_WORDS = re.compile(r"^(acknowledg|competing interests|author contributions|funding)", re.I)


@pytest.fixture(scope="module")
def shared_passages(shared_data):
    parser = PyMuPdfParser()
    out = {}
    for pdf in sorted((shared_data / "pdfs").glob("*.pdf")):
        parsed = parser.parse(pdf, pdf.stem)
        out[pdf.stem] = (parsed, passages_for_paper(pdf.stem, parsed=parsed))
    return out


def test_back_matter_is_parsed_but_not_retrievable(shared_passages):
    parsed_titles = [s.title for parsed, _ in shared_passages.values() for s in parsed.sections]
    assert sum(1 for t in parsed_titles if BACK_MATTER_WORDS.match(t)) >= 7  # the parser still sees them
    for name, (_, passages) in shared_passages.items():
        assert not [p.section_title for p in passages if BACK_MATTER_WORDS.match(p.section_title)], name


def test_no_stub_passages_in_the_shared_pdfs(shared_passages):
    """Every text, figure or formula passage has at least 10 real words (table rows are numbers by nature)."""
    for name, (_, passages) in shared_passages.items():
        stubs = [p.text for p in passages if p.kind != "table" and real_words(p.text) < 10]
        assert not stubs, (name, stubs)


BOILERPLATE_MARKS = (
    "©",
    "c\u20dd",
    "Proceedings of",
    "Equal contribution",
    "Full list of author information",
)


def test_publication_boilerplate_is_parsed_but_not_retrievable(shared_passages):
    """Venue footers, copyright lines, licences and author notes of the shared PDFs stay out of the body passages,
    and the paragraphs beside them stay in."""
    parsed_text = " ".join(s.text for parsed, _ in shared_passages.values() for s in parsed.sections)
    assert sum(parsed_text.count(mark) for mark in BOILERPLATE_MARKS) >= 7  # the parser still sees them
    for name, (_, passages) in shared_passages.items():
        body = [p.text for p in passages if p.kind == "text"]
        assert not [t for t in body if any(mark in t for mark in BOILERPLATE_MARKS)], name
    specter = " ".join(p.text for p in shared_passages["2020.acl-main.207"][1])
    assert "along with our trained embedding model and its associated code base" in specter


@pytest.mark.parametrize(
    ("paragraph", "expected"),
    [
        ("Proceedings of NAACL-HLT 2018, pages 84–91 New Orleans, Louisiana, June 1 - 6, 2018.", True),
        ("July 5 - 10, 2020. c\u20dd2020 Association for Computational Linguistics", True),
        ("∗Equal contribution 1 https://github.com/allenai/specter", True),
        ("This work is licensed under a Creative Commons Attribution 4.0 International License.", True),
        ("We release the corpus under a Creative Commons licence so that others can extend it.", False),
        ("As reported in the proceedings of the workshop, the parser fails on two-column pages.", False),
        ("In (c) 2020 figures are shown for every run, with the results of (a) and (b) beside them.", False),
        ("© 2016 De Marchis et al. " + "Long prose about the licence and the results. " * 30, False),
    ],
)
def test_is_boilerplate(paragraph, expected):
    assert is_boilerplate(paragraph) is expected


def test_labels_are_the_printed_ones(shared_passages):
    for _, passages in shared_passages.values():
        for passage in passages:
            assert not re.match(r"^(s\d+|abstract|(figure|table|formula)-\d+)$", passage.section_number or "")
    specter = shared_passages["2020.acl-main.207"][1]
    assert any(p.section_number == "3.1" for p in specter)  # a real number stays
    assert any(p.section_title == "Figure 1" and p.section_number == "" for p in specter)


def test_formula_passages_start_with_a_whole_word(shared_passages):
    """A formula passage opens with the sentence that introduces it, never a cut-off "tween a Jaccard index ..."."""
    checked = 0
    for parsed, passages in shared_passages.values():
        words = set(" ".join(s.text for s in parsed.sections).split())
        for passage in passages:
            if passage.kind == "formula" and passage.text[:1].isalpha():
                assert passage.text.split()[0] in words, passage.text[:80]
                checked += 1
    assert checked >= 3


def test_pointer_dropped_stub_merged_abstract_kept():
    paper = ParsedPaper(
        paper_id="p",
        parser="test",
        abstract="Short abstract.",
        sections=[
            Section(
                "1", "Results", "The model improves recall on every benchmark we tried by a wide margin."
            ),
            Section("1.1", "Details", "See Figure 6."),
            Section("2", "Discussion", "It works well."),
            Section(
                "s4", "Acknowledgments", "We thank the reviewers for their many helpful comments on drafts."
            ),
        ],
        elements=[Element("figure", "Figure 1", "Overview.", page=1)],
    )
    passages = passages_for_paper("p", parsed=paper, count_tokens=whitespace_token_counter)
    assert [p.text for p in passages] == [
        "Short abstract.",  # an abstract is never dropped: a BEIR document is its abstract
        "The model improves recall on every benchmark we tried by a wide margin. It works well.",
    ]
    assert passages[0].section_number == "" and passages[1].section_number == "1"


@pytest.mark.parametrize(
    "title, expected",
    [
        ("Acknowledgements", True),
        ("ACKNOWLEDGMENTS", True),
        ("7 Acknowledgments", True),
        ("Authors’ contributions", True),
        ("Competing interests", True),
        ("Funding", True),
        ("Limitations", False),
        ("Results", False),
        ("Funding sources and impact on research", False),
    ],
)
def test_is_back_matter(title, expected):
    assert is_back_matter(title) is expected


def test_pointers_and_printed_numbers():
    assert is_bare_pointer("See Figure 6.") and is_bare_pointer("Table 3 shows the results.")
    assert is_bare_pointer(
        "Table 12 shows the examples of queries and corresponding papers in RealScholarQuery."
    )
    assert not is_bare_pointer(
        "Table 3 shows that recall improves on all seven of the collections we tried here."
    )
    assert [printed_number(n) for n in ("2.1", "s6", "3-2", "figure-5", "abstract", "A.1", "0")] == [
        "2.1",
        "",
        "3",
        "",
        "",
        "A.1",
        "",
    ]
