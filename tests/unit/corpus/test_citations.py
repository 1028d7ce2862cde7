"""In-corpus citation edges from the shared PDFs' own reference lists. The expected edges were found by reading the
reference lists of the PDFs: SPECTER, S2ORC and PaperMage cite "Construction of the Literature Graph in Semantic
Scholar"; PaperMage cites S2ORC; Beyond Summarization cites SPECTER. No other pair of the seven cites each other."""

from __future__ import annotations

import dataclasses

import pytest

from lumina_assets.core.schemas import Reference
from lumina_assets.corpus.citations import CatalogueIndex, CataloguePaper, update_reference_edges
from lumina_assets.corpus.local import pdf_metadata
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser
from lumina_assets.parsing.tei import parse_tei

NAMES = [
    "N18-3011",
    "2020.acl-main.207",
    "2020.acl-main.447",
    "2304.02623v1",
    "papermage",
    "pasa",
    "0046d83a-edd6-4631-b57c-755cdcce8b7f",
]
EXPECTED = {
    ("2020.acl-main.207", "N18-3011"),
    ("2020.acl-main.447", "N18-3011"),
    ("papermage", "N18-3011"),
    ("papermage", "2020.acl-main.447"),
    ("2304.02623v1", "2020.acl-main.207"),
}


@pytest.fixture(scope="module")
def corpus(shared_data):
    """(catalogue records from the PDFs' own metadata, {file name: bibliography}, {paper id: file name})."""
    parser = PyMuPdfParser()
    papers, bibliographies, names = [], {}, {}
    for name in NAMES:
        path = shared_data / "pdfs" / f"{name}.pdf"
        paper = pdf_metadata(path)
        names[paper.paper_id] = name
        papers.append(
            CataloguePaper(
                paper.paper_id, paper.title, paper.doi, paper.arxiv_id, paper.year, tuple(paper.authors)
            )
        )
        bibliographies[paper.paper_id] = parser.parse(path, paper.paper_id).references
    return papers, bibliographies, names


def _pairs(edges, names):
    return {(names[e.citing], names[e.cited]) for e in edges}


def test_the_five_citations_and_no_other_edge(corpus):
    papers, bibliographies, names = corpus
    update = update_reference_edges(papers, bibliographies)
    assert _pairs(update.edges, names) == EXPECTED
    assert {e.how for e in update.edges} == {"title"}


def test_a_paper_arriving_later_gets_the_edges_of_the_papers_that_cite_it(corpus):
    papers, bibliographies, names = corpus
    litgraph = next(pid for pid, name in names.items() if name == "N18-3011")
    first = update_reference_edges(
        [p for p in papers if p.paper_id != litgraph],
        {pid: refs for pid, refs in bibliographies.items() if pid != litgraph},
    )
    assert _pairs(first.edges, names) == EXPECTED - {(c, d) for c, d in EXPECTED if d == "N18-3011"}
    second = update_reference_edges(papers, bibliographies, first.edges, first.state)
    assert _pairs(second.edges, names) == EXPECTED
    assert (
        second.rematched == 1 and second.extended == 6
    )  # only the new paper's bibliography was matched in full


def test_grobid_bibliography_matches_too(shared_data, corpus):
    papers, _, names = corpus
    tei = parse_tei((shared_data / "grobid_tei" / "2020.acl-main.207.tei.xml").read_bytes(), "specter")
    specter = next(pid for pid, name in names.items() if name == "2020.acl-main.207")
    update = update_reference_edges(papers, {specter: tei.references})
    assert _pairs(update.edges, names) == {("2020.acl-main.207", "N18-3011")}


def test_doi_and_arxiv_ids_match_before_titles():
    index = CatalogueIndex(
        [
            CataloguePaper("p1", "Some title of a paper", doi="10.1/abc"),
            CataloguePaper("p2", "Another paper entirely", arxiv_id="2501.10120"),
        ]
    )
    by_doi = index.match(
        Reference("b0", "X. 2020. Unrelated words. J.", title="Unrelated words", doi="10.1/ABC")
    )
    assert by_doi[:2] == (index.papers[0], "doi")
    by_arxiv = index.match(Reference("b1", "Y. 2025. PaSa. arXiv:2501.10120", arxiv_id="2501.10120"))
    assert by_arxiv[:2] == (index.papers[1], "arxiv")


def test_a_near_title_with_a_distant_year_is_not_a_citation():
    index = CatalogueIndex(
        [CataloguePaper("p1", "Construction of the Literature Graph in Semantic Scholar", year=2018)]
    )
    ref = Reference("b0", "...", title="Construction of the literature graph in semantic scholar", year=2018)
    assert index.match(ref)[1] == "title"
    assert index.match(dataclasses.replace(ref, year=2011)) is None
    other = dataclasses.replace(ref, title="The Semantic Scholar Open Data Platform", year=2018)
    assert index.match(other) is None


def test_a_title_printed_inside_a_raw_entry_matches_only_with_the_same_first_author():
    """A reference whose title field came out wrong still matches a catalogue paper whose title its raw text
    prints, when the first authors' surnames agree; with another first author, or none, it does not."""
    specter = CataloguePaper(
        paper_id="specter",
        title="SPECTER: Document-level Representation Learning using Citation-informed Transformers",
        year=2020,
        authors=("Arman Cohan", "Sergey Feldman"),
    )
    others = [
        CataloguePaper(
            paper_id=f"other{i}", title=f"An unrelated study of topic {i} in detail", authors=("A. Cohan",)
        )
        for i in range(50)
    ]
    index = CatalogueIndex([*others, specter])
    text = (
        "Arman Cohan, Sergey Feldman, Iz Beltagy, Doug Downey, and Daniel Weld. 2020. SPECTER: Document-level "
        "Representation Learning using Citation-informed Transformers. In ACL."
    )
    garbled = Reference(ref_id="b1", text=text, title="In ACL", authors=["Arman Cohan"], year=2020)
    found = index.match(garbled)
    assert found is not None and found[0].paper_id == "specter" and found[1] == "title_in_text"
    assert index.match(dataclasses.replace(garbled, authors=["Kyle Lo"])) is None
    assert index.match(dataclasses.replace(garbled, authors=[])) is None
