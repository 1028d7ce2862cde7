"""Reference strings parsed into fields. Expected fields are copied from the PDFs' printed reference lists; the
agreement figure compares the titles with GROBID's TEI bibliographies of the same PDFs."""

from __future__ import annotations

import pytest
from rapidfuzz import fuzz

from lumina_assets.corpus.citations import normalize_title
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser
from lumina_assets.parsing.references import parse_reference, split_authors
from lumina_assets.parsing.tei import parse_tei

WITH_TEI = ["N18-3011", "2020.acl-main.207", "0046d83a-edd6-4631-b57c-755cdcce8b7f"]


def test_author_year_entry_acl_style():
    ref = parse_reference(
        "b0",
        "Kyle Lo, Lucy Lu Wang, Mark Neumann, Rodney Kinney, and Daniel Weld. 2020. S2ORC: The semantic scholar "
        "open research corpus. In Proceedings of the 58th Annual Meeting of the Association for Computational "
        "Linguistics, pages 4969–4983, Online. Association for Computational Linguistics.",
    )
    assert ref.authors == ["Kyle Lo", "Lucy Lu Wang", "Mark Neumann", "Rodney Kinney", "Daniel Weld"]
    assert ref.year == 2020
    assert ref.title == "S2ORC: The semantic scholar open research corpus"
    assert (
        ref.venue == "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics"
    )


def test_numbered_acm_entry():
    ref = parse_reference(
        "b7",
        "[8] Arman Cohan, Sergey Feldman, Iz Beltagy, Doug Downey, and Daniel S. Weld. 2020. SPECTER: Document-level "
        "Representation Learning using Citation-informed Transformers. In Annual Meeting of the Association for "
        "Computational Linguistics.",
    )
    assert ref.authors[0] == "Arman Cohan" and ref.authors[-1] == "Daniel S. Weld"
    assert ref.title == "SPECTER: Document-level Representation Learning using Citation-informed Transformers"
    assert ref.venue == "Annual Meeting of the Association for Computational Linguistics"


def test_vancouver_entry_with_initials_before_the_title():
    ref = parse_reference(
        "b8",
        "9. Langhorne P, Bernhardt J, Kwakkel G. Stroke rehabilitation. Lancet. 2011; 377(9778):1693–702.",
    )
    assert ref.authors == ["Langhorne P", "Bernhardt J", "Kwakkel G"]
    assert ref.title == "Stroke rehabilitation"
    assert ref.venue == "Lancet"
    assert ref.year == 2011


def test_ieee_quoted_title_doi_and_arxiv():
    ref = parse_reference(
        "b1",
        'A. Smith and B. Jones, "Learning to rank passages for science," in Proc. SIGIR, 2019, pp. 1–10, '
        "doi: 10.1145/3331184.3331234.",
    )
    assert ref.title == "Learning to rank passages for science"
    assert ref.authors == ["A. Smith", "B. Jones"]
    assert ref.doi == "10.1145/3331184.3331234"
    arxiv = parse_reference(
        "b2",
        "Zejiang Shen, Kyle Lo, Lauren Yu, Nathan Dahlberg, Margo Schlanger, and Doug Downey. 2022. Multi-LexSum: "
        "Real-World Summaries of Civil Rights Lawsuits at Multiple Granularities. arXiv preprint arXiv:2206.10883 "
        "(2022).",
    )
    assert arxiv.arxiv_id == "2206.10883"
    assert arxiv.title.startswith("Multi-LexSum: Real-World Summaries")


def test_split_authors_apa_pairs_surnames_with_initials():
    assert split_authors("Gusenbauer, M., & Haddaway, N. R.") == ["M. Gusenbauer", "N. R. Haddaway"]


@pytest.fixture(scope="module")
def parsed(shared_data):
    parser = PyMuPdfParser()
    return {name: parser.parse(shared_data / "pdfs" / f"{name}.pdf", name) for name in WITH_TEI}


@pytest.mark.parametrize("name", WITH_TEI)
def test_titles_agree_with_grobid(parsed, shared_data, name):
    """At least 85 % of GROBID's reference titles are found among the parsed titles (ratio >= 90)."""
    tei = parse_tei((shared_data / "grobid_tei" / f"{name}.tei.xml").read_bytes(), name)
    expected = [normalize_title(r.title) for r in tei.references if r.title]
    mine = [normalize_title(r.title) for r in parsed[name].references if r.title]
    found = sum(1 for title in expected if max((fuzz.ratio(title, m) for m in mine), default=0) >= 90)
    assert found >= 0.85 * len(expected), (found, len(expected))


def test_footnote_inside_reference_list_is_not_an_entry(shared_data):
    """S2ORC's reference list runs past footnote 19 at the bottom of a column: the Ammar et al. entry stays whole."""
    paper = PyMuPdfParser().parse(shared_data / "pdfs" / "2020.acl-main.447.pdf", "s2orc")
    ammar = [r for r in paper.references if r.text.startswith("Waleed Ammar, Dirk Groeneveld")]
    assert len(ammar) == 1
    assert ammar[0].title == "Construction of the literature graph in semantic scholar"
    assert ammar[0].year == 2018
    assert not any("Kaggle CORD-19" in r.text for r in paper.references)


def test_question_mark_inside_a_title_does_not_end_it():
    """PaSa's reference list prints 'Can generative llms create query variants for test collections? an exploratory
    study.' as one title."""
    ref = parse_reference(
        "b1",
        "Marwah Alaofi, Luke Gallagher, Mark Sanderson, Falk Scholer, and Paul Thomas. 2023. Can generative llms "
        "create query variants for test collections? an exploratory study. In Proceedings of the 46th "
        "international ACM SIGIR conference, pages 1869–1873.",
    )
    assert ref.title == "Can generative llms create query variants for test collections? an exploratory study"
    assert ref.venue == "Proceedings of the 46th international ACM SIGIR conference"
