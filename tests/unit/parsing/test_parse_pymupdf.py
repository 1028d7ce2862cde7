"""The PyMuPDF parser on the real PDFs (compared with GROBID's TEI of the same papers) and every class of bad
input, generated from the real PDFs."""

from __future__ import annotations

import random
import re

import pymupdf
import pytest

from bench.parse_quality import compare_structure
from lumina_assets.core.schemas import ParsedPaper, Section
from lumina_assets.parsing.base import ParseFailure, ensure_unique_numbers, join_lines
from lumina_assets.parsing.parsers import get_parser
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser
from lumina_assets.parsing.tei import parse_tei

WITH_TEI = ["N18-3011", "2020.acl-main.207", "0046d83a-edd6-4631-b57c-755cdcce8b7f"]


@pytest.fixture(scope="module")
def parsed(shared_data) -> dict[str, ParsedPaper]:
    parser = PyMuPdfParser()
    return {pdf.stem: parser.parse(pdf, pdf.stem) for pdf in sorted((shared_data / "pdfs").glob("*.pdf"))}


@pytest.fixture(scope="module")
def tei(shared_data) -> dict[str, ParsedPaper]:
    return {
        name: parse_tei((shared_data / "grobid_tei" / f"{name}.tei.xml").read_bytes(), name)
        for name in WITH_TEI
    }


def test_every_real_pdf_parses_with_structure(parsed):
    assert len(parsed) == 7
    for name, paper in parsed.items():
        assert paper.parser == "pymupdf"
        assert paper.title and len(paper.title) > 10, name
        assert len(paper.abstract.split()) > 50, name
        assert len(paper.sections) >= 5, name
        assert len(paper.references) >= 20, name
        numbers = [s.number for s in paper.sections]
        assert len(numbers) == len(set(numbers)), name  # passage ids rely on distinct section numbers
        for section in paper.sections:
            assert 1 <= section.page_start <= section.page_end <= paper.page_count, (name, section.title)


@pytest.mark.parametrize("name", WITH_TEI)
def test_structure_matches_grobid(parsed, tei, name):
    score = compare_structure(parsed[name], tei[name])
    assert score.title_recall >= 0.85, score
    assert score.entries_found == score.reference_entries, score


def test_numbered_headings_two_columns_and_order(parsed, tei):
    paper = parsed["N18-3011"]
    assert [(s.number, s.title) for s in paper.sections] == [
        (s.number, s.title) for s in tei["N18-3011"].sections
    ]
    intro = paper.sections[0]
    assert intro.text.startswith("The goal of this work is to facilitate algorithmic discovery")
    # The paragraph that runs from the left column into the right one is read in order, in one piece.
    assert "what rate a paper is being cited and whether it is accelerating" in _section(paper, "5").text


def test_running_headers_page_numbers_and_footnotes_removed(parsed):
    journal = parsed["0046d83a-edd6-4631-b57c-755cdcce8b7f"]
    body = "\n".join(s.text for s in journal.sections)
    assert "Journal of NeuroEngineering and Rehabilitation (2016" not in body  # header on every page
    acl = parsed["N18-3011"]
    for section in acl.sections:
        assert not re.search(r"(^|\n)\d{2}(\n|$)", section.text), section.title  # "90", "91" page numbers
    # Footnotes are kept, after the section text instead of inside the paragraph they interrupt.
    assert _section(acl, "5").text.rstrip().endswith("record linkage.")


def test_hyphenation_repaired(parsed):
    acl = parsed["N18-3011"]
    assert acl.references[0].text.startswith("Waleed Ammar, Matthew E. Peters, Chandra Bhagavatula, and")
    assert "Bhagavat-" not in acl.references[0].text
    assert "bidirectional" in " ".join(s.text for s in acl.sections)


def test_compounds_broken_at_a_line_end_keep_their_hyphen(parsed):
    """SPECTER prints "state-", "document-" and "Citation-" at line ends: the hyphen is the compound's own."""
    specter = parsed["2020.acl-main.207"]
    text = " ".join([specter.title, specter.abstract, *(s.text for s in specter.sections)])
    for compound in ("state-of-the-art", "document-level", "Citation-informed"):
        assert compound in text, compound
    for broken in ("stateof-the-art", "documentlevel", "Citationinformed"):
        assert broken not in text, broken


def test_references_split_and_citations_resolved(parsed):
    acl = parsed["N18-3011"]
    assert acl.references[-1].text.startswith("Chenyan Xiong, Russell Power, and Jamie Callan. 2017.")
    assert all(ref.year for ref in acl.references)
    resolved = [c for c in acl.citations if c.ref_id]
    assert len(resolved) >= 0.9 * len(acl.citations) and len(resolved) >= 20
    ids = {ref.ref_id: ref for ref in acl.references}
    hochreiter = next(c for c in resolved if c.marker.startswith("Hochreiter"))
    assert ids[hochreiter.ref_id].text.startswith("Sepp Hochreiter and")
    numeric = parsed["2304.02623v1"]  # "[4, 27, 32]" style
    first = next(c for c in numeric.citations if c.marker.startswith("[4"))
    assert first.ref_id == "b3"


def test_captions_tables_and_formulas(parsed):
    acl = parsed["N18-3011"]
    tables = [e for e in acl.elements if e.kind == "table"]
    assert [t.label for t in tables] == ["Table 1", "Table 2", "Table 3", "Table 4"]
    assert "title | 85.5 | 85.5 | 85.5" in tables[0].content
    assert tables[0].caption.startswith("Results of the ScienceParse system")
    figure = next(e for e in acl.elements if e.kind == "figure")
    assert (figure.label, figure.caption, figure.page) == ("Figure 1", "Part of the literature graph.", 1)
    specter = parsed["2020.acl-main.207"]
    formula = next(e for e in specter.elements if e.kind == "formula" and e.label == "(1)")
    assert "Transformer(input)" in formula.content and formula.page == 2
    assert all(e.page for e in specter.elements)
    body = " ".join(s.text for s in acl.sections)
    assert "85.5 85.5 85.5" not in body  # table cells left the running text


def test_table_finder_mode_uses_pymupdf_find_tables(shared_data, tmp_path):
    # The finder costs about a second a page: run it on the one page that holds Table 1.
    page3 = tmp_path / "n18-page3.pdf"
    with pymupdf.open(shared_data / "pdfs" / "N18-3011.pdf") as doc:
        doc.select([2])
        doc.save(page3)
    paper = PyMuPdfParser(tables="finder").parse(page3, "n18")
    tables = {e.label: e for e in paper.elements if e.kind == "table"}
    assert "85.5" in tables["Table 1"].content and "|" in tables["Table 1"].content


def test_registry_builds_the_same_parser():
    parser = get_parser("pymupdf", tables="finder")
    assert isinstance(parser, PyMuPdfParser) and parser.tables == "finder"
    with pytest.raises(ValueError):
        get_parser("nope")


def test_join_lines_and_unique_numbers():
    assert join_lines(["represen-", "tation of", "state-of-the-", "art GPT-", "4 models"]) == (
        "representation of state-of-the-art GPT-4 models"
    )
    compounds = [
        "the state-",
        "of-the-art document-",
        "level, Citation-",
        "informed in-",
        "formation, fine-",
        "tuned",
    ]
    assert (
        join_lines(compounds)
        == "the state-of-the-art document-level, Citation-informed information, fine-tuned"
    )
    sections = ensure_unique_numbers([Section("1", "A", "x"), Section("", "B", "y"), Section("1", "C", "z")])
    assert [s.number for s in sections] == ["1", "s2", "1-2"]


# ---------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def bad_files(shared_data, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("bad")
    source = shared_data / "pdfs" / "N18-3011.pdf"
    data = source.read_bytes()
    files = {}
    files["truncated"] = root / "truncated.pdf"
    files["truncated"].write_bytes(data[: len(data) // 2])
    files["corrupt"] = root / "corrupt.pdf"
    noise = random.Random(7).randbytes(20_000)
    files["corrupt"].write_bytes(b"%PDF-1.7\n" + noise + b"\n%%EOF\n")
    with pymupdf.open(source) as doc:
        files["encrypted"] = root / "encrypted.pdf"
        doc.save(
            files["encrypted"], encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner"
        )
        pixmap = doc[0].get_pixmap(dpi=60)
        with pymupdf.open() as scanned:
            page = scanned.new_page(width=doc[0].rect.width, height=doc[0].rect.height)
            page.insert_image(page.rect, pixmap=pixmap)
            files["image_only"] = root / "image_only.pdf"
            scanned.save(files["image_only"])
    files["zero_pages"] = root / "zero.pdf"
    files["zero_pages"].write_bytes(
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
        b"trailer<</Root 1 0 R>>\n%%EOF\n"
    )
    files["not_pdf"] = root / "not_a_pdf.pdf"
    files["not_pdf"].write_bytes((shared_data / "grobid_tei" / "N18-3011.tei.xml").read_bytes())
    files["empty_file"] = root / "empty.pdf"
    files["empty_file"].write_bytes(b"")
    return files


EXPECTED = {
    "truncated": "truncated",
    "corrupt": "corrupt",
    "encrypted": "encrypted",
    "image_only": "no_text_layer",
    "zero_pages": "zero_pages",
    "not_pdf": "not_pdf",
    "empty_file": "empty_file",
}


@pytest.mark.parametrize(
    ("parser_name", "kind"),
    [
        (parser_name, kind)
        for parser_name in ("pymupdf", "grobid", "unstructured")
        for kind in sorted(EXPECTED)
        # the text-layer check is the PyMuPDF parser's own; GROBID / unstructured would OCR an image-only PDF
        if parser_name == "pymupdf" or kind != "image_only"
    ],
)
def test_bad_input_is_a_recorded_reason(bad_files, parser_name, kind):
    """The same reasons from every parser: the checks run before any parser (or GROBID server) is involved."""
    parser = get_parser(parser_name, grobid_url="http://127.0.0.1:9") if parser_name == "grobid" else None
    parser = parser or get_parser(parser_name)
    with pytest.raises(ParseFailure) as failure:
        parser.parse(bad_files[kind], "bad")
    assert failure.value.reason == EXPECTED[kind]


def test_huge_files_and_page_counts_are_capped(shared_data):
    pdf = shared_data / "pdfs" / "N18-3011.pdf"
    with pytest.raises(ParseFailure) as too_large:
        PyMuPdfParser(max_bytes=100_000).parse(pdf, "x")
    assert too_large.value.reason == "too_large"
    with pytest.raises(ParseFailure) as too_long:
        PyMuPdfParser(max_pages=3).parse(pdf, "x")
    assert too_long.value.reason == "too_many_pages"


def test_damaged_middle_is_repaired_not_failed(shared_data, tmp_path):
    """Zeroed bytes inside the file (xref intact at the end) are MuPDF-repairable: the paper still parses."""
    data = bytearray((shared_data / "pdfs" / "N18-3011.pdf").read_bytes())
    data[50_000:52_000] = b"\x00" * 2000
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(bytes(data))
    paper = PyMuPdfParser().parse(damaged, "x")
    assert paper.page_count == 8 and len(paper.sections) >= 5


def _section(paper: ParsedPaper, number: str) -> Section:
    return next(s for s in paper.sections if s.number == number)
