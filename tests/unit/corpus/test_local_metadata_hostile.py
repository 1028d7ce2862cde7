"""Reading a local PDF's metadata against hostile files: a first page holding megabytes of text operators is not
interpreted again and again (the metadata read took the whole 120 s limit where parsing took 11 s), the page cap
parsing applies holds here too, and free-text fields (a 1 MB /Title) are capped with the truncation recorded."""

from __future__ import annotations

import hostile
import pymupdf

from lumina_assets.core.hygiene import MAX_NAME_CHARS, MAX_TITLE_CHARS, cap_metadata
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.local import PAGE_CONTENT_BUDGET, load_pdf_folder, pdf_metadata
from lumina_assets.corpus.normalize import normalize
from lumina_assets.parsing.preflight import PdfLimits


def test_a_first_page_over_the_content_budget_is_not_read_for_metadata(tmp_path):
    """Before: page one of this 12 KB file (4 MB of text operators) was interpreted five times and walked line by
    line in Python (13.5 s here, 6x its parse); a 31 MB page used the whole 120 s limit. Now it is not read: the
    title comes from the file name and the skip is recorded."""
    bomb = tmp_path / "dense-first-page.pdf"
    bomb.write_bytes(hostile.bomb_pdf(4))
    assert bomb.stat().st_size < 20_000
    paper = pdf_metadata(bomb)
    assert "page_text:skipped" in paper.metadata_sources
    assert paper.title == "dense-first-page" and "title:file_name" in paper.metadata_sources
    assert "Hello hostile" not in paper.title and paper.abstract is None
    report = load_pdf_folder(tmp_path)
    assert [p.source_id for p in report.papers] == ["dense-first-page.pdf"]
    assert any("not read for metadata" in r for r in report.repairs)


def test_a_document_without_pages_is_not_said_to_be_skipped(tmp_path, shared_data):
    cut = tmp_path / "cut-short.pdf"  # MuPDF repairs it into a document with no page
    cut.write_bytes((shared_data / "pdfs" / "papermage.pdf").read_bytes()[:40_000])
    paper = pdf_metadata(cut)
    assert paper.title == "cut-short" and "page_text:skipped" not in paper.metadata_sources


def test_real_papers_are_read_as_before(shared_data):
    for path in sorted((shared_data / "pdfs").glob("*.pdf")):
        paper = pdf_metadata(path)
        assert "page_text:skipped" not in paper.metadata_sources, path.name
        assert not any(s.endswith(":truncated") for s in paper.metadata_sources), path.name
    assert (
        PAGE_CONTENT_BUDGET > 500_000
    )  # the densest first page of the shared PDFs holds 35 KB, any page 476 KB


def test_an_inner_page_over_the_budget_is_left_out_and_page_one_still_read(tmp_path, shared_data):
    document = pymupdf.open(shared_data / "pdfs" / "N18-3011.pdf")
    dense = pymupdf.open(stream=hostile.bomb_pdf(3), filetype="pdf")
    document.insert_pdf(dense)
    path = tmp_path / "paper-with-dense-last-page.pdf"
    document.save(path)
    paper = pdf_metadata(path)
    assert "page_text:skipped" not in paper.metadata_sources
    assert paper.title == pdf_metadata(shared_data / "pdfs" / "N18-3011.pdf").title


def test_the_page_cap_of_parsing_holds_for_metadata(tmp_path):
    """Metadata is read under the limits parsing applies (PdfLimits): too many pages is refused here too."""
    document = pymupdf.open()
    for _ in range(5):
        document.new_page().insert_text((72, 72), "A page of a long document")
    document.save(tmp_path / "long.pdf")
    report = load_pdf_folder(tmp_path, limits=PdfLimits(max_pages=4))
    assert report.papers == [] and [r.reason for r in report.rejected] == ["too_many_pages"]
    assert len(load_pdf_folder(tmp_path, limits=PdfLimits(max_pages=5)).papers) == 1


def test_a_one_megabyte_title_is_capped_and_the_cut_recorded(tmp_path):
    """Before: a 1 MB /Title was stored whole, and then in every passage row of the paper."""
    title = "A Very Long Title " * (1024 * 1024 // 18)
    body = hostile.text_page(["Short visible title line", "Abstract", "A paper that names itself at length."])
    (tmp_path / "long-title.pdf").write_bytes(
        hostile.fix_xref(hostile.raw_pdf(body, title_hex="FEFF" + title.encode("utf-16-be").hex()))
    )
    report = load_pdf_folder(tmp_path)
    (paper,) = report.papers
    assert len(paper.title) <= MAX_TITLE_CHARS and paper.title.startswith("A Very Long Title")
    assert paper.title.endswith("\u2026") and "title:truncated" in paper.metadata_sources
    assert any("title truncated" in r for r in report.repairs)


def test_every_source_is_capped_on_normalization():
    """OpenAlex / arXiv / BEIR records pass through normalization: the same caps apply."""
    huge = Paper(
        paper_id="doi:10.1/huge",
        title="T" * 100_000,
        venue="V" * 5000,
        authors=["A" * 1000, "Ada Lovelace", *[f"Author {n}" for n in range(600)]],
        abstract="An abstract long enough to be kept by the filters of normalization, " * 3,
        source="openalex",
        language="en",
    )
    (paper,) = normalize([huge]).papers
    assert len(paper.title) <= MAX_TITLE_CHARS and len(paper.venue) <= 512
    assert len(paper.authors) == 500 and len(paper.authors[0]) <= MAX_NAME_CHARS
    assert paper.authors[1] == "Ada Lovelace"
    assert {"title:truncated", "venue:truncated", "authors:truncated"} <= set(paper.metadata_sources)
    plain = Paper(paper_id="doi:10.1/plain", title="A normal title", authors=["Ada Lovelace"])
    assert cap_metadata(plain) == [] and plain.metadata_sources == []
