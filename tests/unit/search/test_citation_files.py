"""Citation files a reference manager reads as meant: BibTeX checked with pybtex (BibTeX's own name rules), RIS with
rispy and against the RIS line layout, CSV with the csv module. Names with particles, organisations, arXiv
identifiers and page ranges; metadata read from the real shared PDFs; no control characters in any file."""

from __future__ import annotations

import csv
import io
import re

import pymupdf
import pytest
import rispy
from pybtex.database import parse_string

from lumina_assets.parsing.pdf_metadata import read_header
from lumina_assets.search.citation_export import citation_keys, parse_name, to_bibtex, to_csv, to_ris

RIS_LINE = re.compile(r"^[A-Z][A-Z0-9]  - ")


def _bib(results):
    return parse_string(to_bibtex(results), "bibtex").entries


def _ris_lines(text: str) -> list[str]:
    assert "\r\n" in text and "\n" not in text.replace("\r\n", "")  # CR LF line ends throughout
    return [line for line in text.split("\r\n") if line]


def test_particles_stay_in_the_last_name_for_bibtex_and_ris():
    result = {
        "paper_id": "p",
        "title": "Multi-contact functional electrical stimulation for hand opening",
        "authors": ["Cristiano De Marchis", "Johannes van der Waals", "Guido Van Rossum", "Andrew D. White"],
        "year": 2016,
        "venue": "Journal of NeuroEngineering and Rehabilitation",
    }
    assert citation_keys([result]) == ["demarchis2016multi"]
    (entry,) = _bib([result]).values()
    people = entry.persons["author"]
    assert [(p.first_names, p.prelast_names, p.last_names) for p in people] == [
        (["Cristiano"], [], ["De", "Marchis"]),
        (["Johannes"], ["van", "der"], ["Waals"]),
        (["Guido"], [], ["Van", "Rossum"]),
        (["Andrew"], [], ["White"]),
    ]
    assert people[3].middle_names == ["D."]
    (record,) = rispy.loads(to_ris([result]))
    assert record["authors"] == [
        "De Marchis, Cristiano",
        "van der Waals, Johannes",
        "Van Rossum, Guido",
        "White, Andrew D.",
    ]


def test_an_organisation_is_one_braced_name():
    result = {
        "paper_id": "o",
        "title": "Dolma",
        "authors": ["Allen Institute for AI", "Bill and Melinda Gates Foundation", "Kyle Lo"],
        "year": 2024,
    }
    (entry,) = _bib([result]).values()
    people = entry.persons["author"]
    assert len(people) == 3
    assert people[0].last_names == ["{Allen Institute for AI}"] and not people[0].first_names
    assert people[1].last_names == ["{Bill and Melinda Gates Foundation}"]
    assert (people[2].first_names, people[2].last_names) == (["Kyle"], ["Lo"])
    assert citation_keys([result]) == ["allen2024dolma"]
    (record,) = rispy.loads(to_ris([result]))
    assert record["authors"] == ["Allen Institute for AI", "Bill and Melinda Gates Foundation", "Lo, Kyle"]
    assert parse_name("Allen Institute for AI").organisation and not parse_name("Kyle Lo").organisation


def test_arxiv_papers_carry_eprint_and_pages_are_written():
    pasa = {
        "paper_id": "arxiv:2501.10120",
        "title": "PaSa: An LLM Agent for Comprehensive Academic Paper Search",
        "authors": ["Yichen He", "Guanhua Huang"],
        "year": 2025,
        "venue": "arXiv",
        "url": "https://arxiv.org/abs/2501.10120",
        "arxiv_primary_class": "cs.IR",
    }
    specter = {
        "paper_id": "doi:10.18653/v1/2020.acl-main.207",
        "title": "SPECTER: Document-level Representation Learning using Citation-informed Transformers",
        "authors": ["Arman Cohan"],
        "year": 2020,
        "venue": "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics",
        "doi": "10.18653/v1/2020.acl-main.207",
        "pages": "2270–2282",
    }
    entries = _bib([pasa, specter])
    arxiv, acl = entries["he2025pasa"], entries["cohan2020specter"]
    assert arxiv.type == "misc" and "howpublished" not in arxiv.fields
    assert (arxiv.fields["eprint"], arxiv.fields["archivePrefix"], arxiv.fields["primaryClass"]) == (
        "2501.10120",
        "arXiv",
        "cs.IR",
    )
    assert acl.type == "inproceedings" and acl.fields["pages"] == "2270--2282"
    assert acl.fields["doi"] == "10.18653/v1/2020.acl-main.207" and "eprint" not in acl.fields
    records = rispy.loads(to_ris([pasa, specter]))
    assert (
        records[0]["doi"] == "10.48550/arXiv.2501.10120"
        and records[0]["accession_number"] == "arXiv:2501.10120"
    )
    assert (records[1]["start_page"], records[1]["end_page"]) == ("2270", "2282")
    # an arXiv paper known only by its DOI; a preprint without an id keeps its venue
    by_doi = {
        "paper_id": "x",
        "title": "T",
        "authors": ["A B"],
        "year": 2023,
        "doi": "10.48550/arXiv.2304.02623",
    }
    assert _bib([by_doi])["b2023t"].fields["eprint"] == "2304.02623"
    bare = {"paper_id": "y", "title": "U", "authors": ["A B"], "year": 2023, "venue": "arXiv"}
    assert _bib([bare])["b2023u"].fields["howpublished"] == "arXiv"


def test_ris_records_follow_the_ris_layout():
    results = [
        {"paper_id": f"p{i}", "title": f"Paper {i}", "authors": ["Ann Smith"], "year": 2020 + i}
        for i in range(3)
    ]
    text = to_ris(results)
    assert text.startswith("TY  - ")
    lines = _ris_lines(text)
    assert all(RIS_LINE.match(line) for line in lines), [line for line in lines if not RIS_LINE.match(line)]
    assert [line[:2] for line in lines].count("TY") == 3 and [line[:2] for line in lines].count("ER") == 3
    assert not any(re.fullmatch(r"\d+\.", line) for line in text.split("\r\n"))
    assert len(rispy.loads(text)) == 3


HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31m\x07\x01\x08\x9b2J\x85\x9d0;x\x9c\ufffe\uffff"
# what may remain in a file: printable text, tabs (BibTeX indentation), line ends
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


@pytest.mark.parametrize("writer", [to_bibtex, to_ris, to_csv])
def test_no_control_characters_reach_a_citation_file(writer):
    result = {
        "paper_id": f"p{HOSTILE}",
        "title": f"Safe{HOSTILE} title",
        "authors": [f"Ann{HOSTILE} Smith", f"{HOSTILE}Bob Jones"],
        "venue": f"Proceedings of{HOSTILE} ACL",
        "year": 2020,
        "doi": "10.1/x",
        "url": "https://example.org/a",
        "passages": [{"text": f"Evidence {HOSTILE} sentence here.", "page_start": 1, "highlights": []}],
    }
    text = writer([result])
    assert not CONTROL.search(text), repr(CONTROL.search(text).group())
    assert "owned" not in text and "[2J" not in text and "0;" not in text
    assert "Safe title" in text and "Smith" in text and "Proceedings of ACL" in text
    if writer is to_csv:
        (row,) = csv.DictReader(io.StringIO(text))
        assert row["title"] == "Safe title" and row["evidence"] == "Evidence sentence here."
    elif writer is to_ris:
        assert rispy.loads(text)[0]["title"] == "Safe title"
    else:
        assert next(iter(parse_string(text, "bibtex").entries.values())).fields["title"] == "Safe title"


@pytest.mark.parametrize(
    ("pdf", "key", "first_author"),
    [
        (
            "0046d83a-edd6-4631-b57c-755cdcce8b7f.pdf",
            "demarchis2016multi",
            (["Cristiano"], ["De", "Marchis"]),
        ),
        ("N18-3011.pdf", "ammar2018construction", (["Waleed"], ["Ammar"])),
    ],
)
def test_citations_of_the_shared_pdfs(shared_data, pdf, key, first_author):
    """Metadata as read from the real PDF, exported and read back by pybtex and rispy."""
    path = shared_data / "pdfs" / pdf
    with pymupdf.open(path) as document:
        header = read_header(document, file_stem=path.stem)
        title = document.metadata["title"]
    result = {
        "paper_id": pdf,
        "title": title,
        "authors": header.authors,
        "year": header.year,
        "venue": header.venue,
        "doi": header.doi,
        "pages": header.pages,
    }
    (entry,) = _bib([result]).values()
    assert citation_keys([result]) == [key]
    person = entry.persons["author"][0]
    assert (person.first_names, person.last_names) == first_author
    assert len(entry.persons["author"]) == len(header.authors)
    (record,) = rispy.loads(to_ris([result]))
    assert len(record["authors"]) == len(header.authors) and record["doi"] == header.doi


def test_a_bibtex_style_formats_the_entries_as_a_reference_list():
    """pybtex's `plain` style (BibTeX's plain.bst) sorts by last name and prints the names, pages and arXiv id."""
    from pybtex import format_from_string

    results = [
        {
            "paper_id": "a",
            "title": "Multi-contact functional electrical stimulation",
            "authors": ["Cristiano De Marchis", "Allen Institute for AI"],
            "year": 2016,
            "venue": "Journal of NeuroEngineering and Rehabilitation",
        },
        {
            "paper_id": "b",
            "title": "PaSa: An LLM Agent",
            "authors": ["Yichen He"],
            "year": 2025,
            "venue": "arXiv",
            "url": "https://arxiv.org/abs/2501.10120",
        },
        {
            "paper_id": "c",
            "title": "SPECTER",
            "authors": ["Arman Cohan"],
            "year": 2020,
            "venue": "Proceedings of ACL",
            "pages": "2270–2282",
        },
    ]
    text = format_from_string(to_bibtex(results), style="plain", output_backend="text")
    lines = text.splitlines()
    assert [line.split("]")[1].split()[:2] for line in lines] == [
        ["Arman", "Cohan."],
        ["Cristiano", "De"],  # sorted under D: "De Marchis" is the last name
        ["Yichen", "He."],
    ]
    assert "Cristiano De Marchis and Allen Institute for AI." in lines[1]
    assert "2270–2282" in lines[0] and "arXiv:2501.10120" in lines[2]
