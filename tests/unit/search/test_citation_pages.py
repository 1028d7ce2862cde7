"""Pages and arXiv identifiers travel from every source that knows them to the exported citation: a Zotero library
(its `pages` field), a shared ACL PDF whose first page prints its page range, the arXiv feed's primary category and
OpenAlex's `biblio`, through the catalogue row, the index's paper rows and a search result, into BibTeX read back by
pybtex and RIS read back by rispy. An index or a table written before these columns existed keeps working (None),
and rows without pages keep their content hash. Indexes are built with the deterministic hashing embedder."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import rispy
from hashing_embedder import HashingEmbedder
from pybtex.database import parse_string
from zotero_db import ZoteroDatabase

from lumina_assets.core.ids import normalize_arxiv_class, normalize_pages
from lumina_assets.core.schemas import PAPERS_TABLE_SCHEMA, PASSAGE_SCHEMA, Paper, rows_to_table
from lumina_assets.corpus import catalogue
from lumina_assets.corpus.arxiv import parse_feed
from lumina_assets.corpus.batches import row_hash
from lumina_assets.corpus.catalogue import Record
from lumina_assets.corpus.enrich import merge_enrichment
from lumina_assets.corpus.library import load_library
from lumina_assets.corpus.local import pdf_metadata
from lumina_assets.corpus.openalex import work_to_paper
from lumina_assets.corpus.zotero_export import read_export
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.parsing.tei import parse_tei_header
from lumina_assets.search.citation_export import to_bibtex, to_ris
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService


def index(uri: str, papers: list[Paper], embedder=None) -> indexing.IndexStats:
    """The papers as the `papers` table holds them, indexed with their title and abstract passages."""
    rows = [p.to_row() for p in papers]
    frame = pl.from_arrow(rows_to_table(rows, PAPERS_TABLE_SCHEMA))
    passages = [
        row.to_row()
        for p in papers
        for row in passages_for_paper(p.paper_id, title=p.title, abstract=p.abstract or p.title)
    ]
    passage_frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    return indexing.index_corpus(connect_lancedb(uri), passage_frame, frame, embedder or HashingEmbedder())


def results_for(uri: str, *queries: str) -> dict[str, dict]:
    """Search results by paper id, over one search per query."""
    service = SearchService(lambda: SearchEngine(uri, HashingEmbedder(), SearchConfig()), pool_size=1)
    found: dict[str, dict] = {}
    for query in queries:
        for result in service.search(SearchRequest(query, k=20, overview=False))["results"]:
            found.setdefault(result["paper_id"], result)
    return found


def bibtex(results: list[dict]) -> dict:
    return {
        entry.fields["title"].replace("{", "").replace("}", ""): entry
        for entry in parse_string(to_bibtex(results), "bibtex").entries.values()
    }


def ris(results: list[dict]) -> dict:
    return {record["title"]: record for record in rispy.loads(to_ris(results))}


# ---------------------------------------------------------------- Zotero


def zotero_library(shared_data: Path, folder: Path) -> Path:
    """A Zotero data folder: one paper with pages in Zotero (written with a single hyphen), one without pages in
    Zotero whose attached PDF prints them (SPECTER, ACL 2020), one with neither."""
    (folder / "storage" / "SPEC0PDF").mkdir(parents=True)
    shutil.copyfile(
        shared_data / "pdfs" / "2020.acl-main.207.pdf", folder / "storage/SPEC0PDF/Cohan 2020.pdf"
    )
    z = ZoteroDatabase(folder / "zotero.sqlite")
    ammar = z.item(
        "conferencePaper",
        "AMMAR001",
        title="Construction of the Literature Graph in Semantic Scholar",
        date="2018-06-00 June 2018",
        DOI="10.18653/v1/N18-3011",
        proceedingsTitle="Proceedings of NAACL-HLT",
        abstractNote="We describe a deployed scalable system for organizing published scientific literature.",
        pages="84-91",
    )
    z.creators(ammar, ("Waleed", "Ammar"), ("Dirk", "Groeneveld"))
    specter = z.item("conferencePaper", "SPECTER1", title="SPECTER: Document-level Representation Learning")
    z.creators(specter, ("Arman", "Cohan"))
    z.attach(specter, "SPEC0PDF", "storage:Cohan 2020.pdf")
    other = z.item(
        "journalArticle",
        "NOPAGES1",
        title="Citation graphs without page numbers",
        date="2021",
        publicationTitle="Scientometrics",
        abstractNote="A journal article whose library entry has no page range.",
    )
    z.creators(other, ("Ann", "Smith"))
    z.close()
    return folder


def test_zotero_pages_reach_bibtex_and_ris(shared_data, tmp_path):
    report = load_library(zotero_library(shared_data, tmp_path / "Zotero"))
    assert not report.errors, report.errors
    papers = {p.source_id: p for p in report.papers}
    assert papers["AMMAR001"].pages == "84--91" and "pages:zotero" in papers["AMMAR001"].metadata_sources
    assert papers["SPECTER1"].pages == "2270--2282"  # Zotero has none: the PDF's printed range
    assert "pages:pdf_text" in papers["SPECTER1"].metadata_sources
    assert papers["NOPAGES1"].pages is None

    uri = str(tmp_path / "lancedb")
    index(uri, report.papers)
    results = list(
        results_for(
            uri,
            "literature graph semantic scholar",
            "specter representation learning",
            "citation graphs page numbers",
        ).values()
    )
    assert len(results) == 3
    entries = bibtex(results)
    assert entries["Construction of the Literature Graph in Semantic Scholar"].fields["pages"] == "84--91"
    assert entries["SPECTER: Document-level Representation Learning"].fields["pages"] == "2270--2282"
    assert "pages" not in entries["Citation graphs without page numbers"].fields
    records = ris(results)
    ammar = records["Construction of the Literature Graph in Semantic Scholar"]
    assert (ammar["start_page"], ammar["end_page"]) == ("84", "91")
    assert "start_page" not in records["Citation graphs without page numbers"]


def test_pages_in_library_exports_are_read(tmp_path):
    """BibTeX `pages`, RIS `SP`/`EP` and CSL-JSON `page` (text or a number), each normalised."""
    (tmp_path / "lib.bib").write_text(
        "@inproceedings{ammar2018,\n  title = {Literature Graph},\n  pages = {84--91},\n}\n"
        "@article{smith2021,\n  title = {One page},\n  pages = {e1002},\n}\n"
        "@misc{he2025,\n  title = {PaSa},\n  eprint = {2501.10120},\n  archivePrefix = {arXiv},\n"
        "  primaryClass = {cs.IR},\n}\n"
    )
    bib = {item.title: item for item in read_export(tmp_path / "lib.bib").items}
    assert bib["Literature Graph"].pages == "84--91" and bib["One page"].pages == "e1002"
    assert (bib["PaSa"].arxiv_id, bib["PaSa"].arxiv_primary_class) == ("2501.10120", "cs.IR")
    (tmp_path / "lib.ris").write_text(
        "TY  - CPAPER\r\nTI  - Literature Graph\r\nSP  - 84\r\nEP  - 91\r\nER  - \r\n"
        "TY  - JOUR\r\nTI  - Short range\r\nSP  - 1234\r\nEP  - 56\r\nER  - \r\n"
    )
    ris_items = {item.title: item for item in read_export(tmp_path / "lib.ris").items}
    assert ris_items["Literature Graph"].pages == "84--91" and ris_items["Short range"].pages == "1234--1256"
    (tmp_path / "lib.json").write_text(
        json.dumps(
            [{"id": "a", "title": "Dashed", "page": "2270–2282"}, {"id": "b", "title": "N", "page": 7}]
        )
    )
    csl = {item.title: item for item in read_export(tmp_path / "lib.json").items}
    assert csl["Dashed"].pages == "2270--2282" and csl["N"].pages == "7"


# ---------------------------------------------------------------- a PDF on its own


def test_an_acl_pdf_page_range_reaches_the_export(shared_data, tmp_path):
    """N18-3011 prints "Proceedings of NAACL-HLT 2018, pages 84–91" under its first page."""
    paper = pdf_metadata(shared_data / "pdfs" / "N18-3011.pdf")
    assert paper.pages == "84--91" and "pages:pdf_text" in paper.metadata_sources
    uri = str(tmp_path / "lancedb")
    index(uri, [paper])
    result = results_for(uri, "literature graph semantic scholar")[paper.paper_id]
    assert result["pages"] == "84--91"
    (entry,) = bibtex([result]).values()
    assert entry.type == "inproceedings" and entry.fields["pages"] == "84--91"
    (record,) = rispy.loads(to_ris([result]))
    assert (record["start_page"], record["end_page"]) == ("84", "91")


# ---------------------------------------------------------------- arXiv and OpenAlex


def test_an_arxiv_result_carries_eprint_archive_prefix_and_primary_class(shared_data, tmp_path):
    """The recorded feed's paper has a journal DOI, so nothing but the stored arXiv id can give its `eprint`; the
    arXiv PDF's stamp gives its class too."""
    feed = (shared_data / "api_fixtures/arxiv/zoia__arxiv_response.xml").read_text()
    (from_feed,) = parse_feed(feed).papers
    assert from_feed.arxiv_primary_class == "cond-mat.mes-hall" and from_feed.doi
    from_pdf = pdf_metadata(shared_data / "pdfs" / "pasa.pdf")
    assert (from_pdf.arxiv_id, from_pdf.arxiv_primary_class) == ("2501.10120", "cs.IR")
    uri = str(tmp_path / "lancedb")
    index(uri, [from_feed, from_pdf])
    results = results_for(uri, "paper search agent", from_feed.title)
    entries = parse_string(to_bibtex(list(results.values())), "bibtex").entries.values()
    by_eprint = {e.fields.get("eprint"): e for e in entries}
    assert set(by_eprint) == {from_feed.arxiv_id, "2501.10120"}
    for eprint, primary in ((from_feed.arxiv_id, "cond-mat.mes-hall"), ("2501.10120", "cs.IR")):
        fields = by_eprint[eprint].fields
        assert (fields["archivePrefix"], fields["primaryClass"]) == ("arXiv", primary)
    records = {r["title"]: r for r in rispy.loads(to_ris(list(results.values())))}
    assert records[from_feed.title]["accession_number"] == f"arXiv:{from_feed.arxiv_id}"


@pytest.mark.parametrize(
    ("fixture", "pages"),
    [
        ("test_doi_search_paper_attributes3__interaction2.json", "46--51"),
        ("test_doi_search_paper_attributes1__interaction2.json", "1--11"),
        ("test_doi_search_paper_attributes0__interaction2.json", "100814"),  # an article number
        ("test_doi_search_paper_attributes4__interaction2.json", None),  # biblio without pages
    ],
)
def test_openalex_biblio_gives_pages(shared_data, fixture, pages):
    work = json.loads((shared_data / "api_fixtures/openalex_extracted" / fixture).read_text())
    assert work_to_paper(work).pages == pages


def test_a_grobid_header_gives_its_page_range(shared_data):
    """GROBID 0.6.1's TEI of a journal paper: `<biblScope unit="page" from="1683" to="1688"/>`; a TEI without one
    gives no pages (the PDF's own range then stands)."""
    tei = shared_data / "grobid_tei"
    assert parse_tei_header((tei / "0f318087-b211-4ace-8ac9-3d9372a73c1c.tei.xml").read_bytes())["pages"] == (
        "1683-1688"
    )
    assert normalize_pages("1683-1688") == "1683--1688"
    assert "pages" not in parse_tei_header((tei / "N18-3011.tei.xml").read_bytes())


def test_enrichment_fills_pages_the_pdf_did_not_print(shared_data):
    work = work_to_paper(
        json.loads(
            (
                shared_data
                / "api_fixtures/openalex_extracted/test_doi_search_paper_attributes3__interaction2.json"
            ).read_text()
        )
    )
    bare = Paper(paper_id="p", title="T", doi=work.doi, metadata_sources=["title:pdf_text"])
    filled = merge_enrichment(bare, work, "openalex_enriched")
    assert filled.pages == "46--51" and "pages:openalex_enriched" in filled.metadata_sources
    printed = dataclasses.replace(bare, pages="47--52", metadata_sources=["pages:pdf_text"])
    assert merge_enrichment(printed, work, "openalex_enriched").pages == "47--52"  # the PDF's own range stays


# ---------------------------------------------------------------- older tables and indexes


def test_an_index_without_the_columns_keeps_answering_and_gains_them(shared_data, tmp_path):
    paper = pdf_metadata(shared_data / "pdfs" / "N18-3011.pdf")
    uri = str(tmp_path / "lancedb")
    index(uri, [dataclasses.replace(paper, pages=None)])  # as an index built before pages were stored
    table = indexing.open_table(connect_lancedb(uri), indexing.PAPERS_TABLE)
    table.drop_columns(["pages", "arxiv_id", "arxiv_primary_class"])
    result = results_for(uri, "literature graph semantic scholar")[paper.paper_id]
    assert result["pages"] is None and result["arxiv_primary_class"] is None
    assert "pages" not in next(iter(bibtex([result]).values())).fields

    class Counting(HashingEmbedder):
        texts: list[str] = []

        def encode(self, texts, **kwargs):
            Counting.texts += list(texts)
            return super().encode(texts, **kwargs)

    stats = index(uri, [paper], Counting())
    assert any("pages / arXiv" in note for note in stats.notes)
    assert Counting.texts == []  # metadata only: nothing embedded again
    assert results_for(uri, "literature graph semantic scholar")[paper.paper_id]["pages"] == "84--91"


def test_catalogue_rows_without_the_columns_read_back_and_keep_their_hash():
    paper = Paper(paper_id="doi:10.1/x", title="T", authors=["A B"], year=2020)
    older = {k: v for k, v in paper.to_row().items() if k not in ("pages", "arxiv_primary_class")}
    assert row_hash(older) == row_hash(paper.to_row())  # a paper without pages: the same hash as before
    assert row_hash({**paper.to_row(), "pages": "1--2"}) != row_hash(paper.to_row())
    catalogue.write_records([Record("inbox", Paper(paper_id="doi:10.1/y", title="U", pages="5--9"))])
    frame = catalogue.tables.read(catalogue.tables.CATALOGUE_RECORDS)
    catalogue.tables.write(catalogue.tables.CATALOGUE_RECORDS, frame.drop("pages", "arxiv_primary_class"))
    (record,) = catalogue.read_records()
    assert record.paper.pages is None and record.paper.title == "U"


def test_arxiv_classes_are_checked():
    assert [normalize_arxiv_class(v) for v in ("cs.IR", " hep-th ", "cond-mat.mes-hall", "math.AG")] == [
        "cs.IR",
        "hep-th",
        "cond-mat.mes-hall",
        "math.AG",
    ]
    assert [normalize_arxiv_class(v) for v in ("", None, "cs.IR}, note={x", "a" * 40, "\x1b[2J")] == [
        None
    ] * 5


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("84-91", "84--91"),
        ("84--91", "84--91"),
        ("2270\u20132282", "2270--2282"),
        ("pp. 84 - 91", "84--91"),
        ("1234-56", "1234--1256"),
        ("S12-S20", "S12--S20"),
        ("e1002", "e1002"),
        ("91-84", None),
        ("84, 91", None),
        ("", None),
    ],
)
def test_page_ranges_are_normalised(raw, expected):
    assert normalize_pages(raw) == expected
