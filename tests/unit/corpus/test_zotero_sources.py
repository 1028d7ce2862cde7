"""Reading a Zotero library without Zotero: the data folder (`zotero.sqlite` in Zotero's own schema, opened
a consistent copy, attachments under `storage/<key>/`), and the RIS and CSL-JSON exports."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from zotero_db import ZoteroDatabase

from lumina_assets.corpus import catalogue
from lumina_assets.corpus.library import is_library, load_local_corpus
from lumina_assets.corpus.zotero_export import bibtex_files, read_csl_json, read_ris
from lumina_assets.corpus.zotero_sqlite import read_data_folder


def build_data_folder(shared_data: Path, folder: Path) -> Path:
    (folder / "storage" / "ABCD2345").mkdir(parents=True)
    shutil.copyfile(shared_data / "pdfs" / "N18-3011.pdf", folder / "storage/ABCD2345/Ammar - 2018.pdf")
    z = ZoteroDatabase(folder / "zotero.sqlite")
    ammar = z.item(
        "conferencePaper",
        "QWER7890",
        title="Construction of the Literature Graph in Semantic Scholar",
        date="2018-06-00 June 2018",
        DOI="10.18653/v1/N18-3011",
        proceedingsTitle="Proceedings of NAACL-HLT",
    )
    z.creators(ammar, ("Waleed", "Ammar"), ("Dirk", "Groeneveld"))
    z.creators(ammar, ("Some", "Editor"), creator_type=3)
    z.tag(ammar, "knowledge graphs")
    z.tag(ammar, "to-read")
    thesis = z.collection("Thesis")
    z.db.execute(
        "INSERT INTO collectionItems VALUES (?, ?, 0)", (z.collection("Related work", thesis), ammar)
    )
    z.attach(ammar, "ABCD2345", "storage:Ammar - 2018.pdf")
    z.attach(ammar, "SNAP1111", "storage:snapshot.html", content_type="text/html")
    specter = z.item(
        "preprint",
        "SPEC1234",
        title="SPECTER: Document-level Representation Learning",
        date="2020-04-02",
        abstractNote="We propose SPECTER, document embeddings trained on the citation graph.",
        extra="arXiv: 2004.07180",
    )
    z.creators(specter, ("Arman", "Cohan"))
    z.tag(specter, "embeddings")
    trashed = z.item("journalArticle", "TRSH0000", title="A paper in the trash", abstractNote="Gone.")
    z.db.execute("INSERT INTO deletedItems (itemID) VALUES (?)", (trashed,))
    note = z.item("note", "NOTE0000")
    z.db.execute(
        "INSERT INTO itemNotes (itemID, parentItemID, note) VALUES (?, ?, 'my notes')", (note, ammar)
    )
    z.attach(specter, "EVIL0000", "storage:../../ABCD2345/Ammar - 2018.pdf")  # out of its own folder: ignored
    z.close()
    return folder


def test_data_folder_items_with_authors_tags_collections_and_pdfs(shared_data, tmp_path):
    folder = build_data_folder(shared_data, tmp_path / "Zotero")
    assert is_library(folder)
    items = {item.key: item for item in read_data_folder(folder).items}
    assert set(items) == {"QWER7890", "SPEC1234"}  # no trash, no note, no attachment items
    ammar = items["QWER7890"]
    assert ammar.authors == ["Waleed Ammar", "Dirk Groeneveld"]  # editors are not authors
    assert (
        ammar.year == 2018
        and ammar.doi == "10.18653/v1/n18-3011"
        and ammar.venue == "Proceedings of NAACL-HLT"
    )
    assert ammar.tags == ["knowledge graphs", "to-read"] and ammar.collections == ["Thesis/Related work"]
    assert ammar.files == [folder / "storage/ABCD2345/Ammar - 2018.pdf"]
    specter = items["SPEC1234"]
    assert specter.arxiv_id == "2004.07180" and specter.year == 2020 and specter.files == []


def test_data_folder_loads_as_a_corpus_even_while_zotero_holds_its_lock(shared_data, tmp_path):
    folder = build_data_folder(shared_data, tmp_path / "Zotero")
    before = sorted(p.name for p in folder.iterdir())
    running = sqlite3.connect(folder / "zotero.sqlite")
    running.execute("PRAGMA locking_mode = EXCLUSIVE")
    running.execute("BEGIN EXCLUSIVE")  # what a running Zotero holds
    try:
        report = load_local_corpus(folder)
    finally:
        running.rollback()
        running.close()
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written beside the database
    assert report.kind == "zotero_data_folder"
    papers = {p.source_id: p for p in report.papers}
    ammar = papers["QWER7890"]
    assert ammar.paper_id == "doi:10.18653/v1/n18-3011" and ammar.source == "zotero"
    assert ammar.local_path and Path(ammar.local_path).name == "Ammar - 2018.pdf"
    assert ammar.title == "Construction of the Literature Graph in Semantic Scholar"
    assert "title:zotero" in ammar.metadata_sources and ammar.tags == ["knowledge graphs", "to-read"]
    specter = papers["SPEC1234"]
    assert specter.paper_id == "arxiv:2004.07180" and specter.local_path is None and specter.abstract
    assert catalogue.corpus_origin(folder) == f"zotero:{folder.resolve()}"


def test_ris_export_with_l1_attachments(tmp_path):
    (tmp_path / "files" / "3").mkdir(parents=True)
    (tmp_path / "files/3/paper.pdf").write_bytes(b"%PDF-1.4")
    export = tmp_path / "Exported Items.ris"
    export.write_text(
        "TY  - JOUR\nTI  - Graph neural networks for citations\nAU  - Smith, John\nAU  - Doe, Jane\n"
        "T2  - Journal of Graphs\nAB  - We study graphs.\nDA  - 2020///\nPY  - 2020\nDO  - 10.1000/XYZ123\n"
        "KW  - gnn\nKW  - reading list\nL1  - files/3/paper.pdf\nL1  - files/3/missing.pdf\nER  - \n\n"
        "TY  - CONF\nTI  - A conference paper\nAU  - Roe, Richard\nPY  - 2019\nER  - \n",
        encoding="utf-8",
    )
    first, second = read_ris(export).items
    assert first.title == "Graph neural networks for citations" and first.authors == [
        "Smith, John",
        "Doe, Jane",
    ]
    assert first.venue == "Journal of Graphs" and first.year == 2020 and first.doi == "10.1000/xyz123"
    assert first.tags == ["gnn", "reading list"]
    assert first.files == [tmp_path / "files/3/paper.pdf", tmp_path / "files/3/missing.pdf"]
    assert second.title == "A conference paper" and second.files == []


def test_csl_json_export(tmp_path):
    export = tmp_path / "library.json"
    export.write_text(
        json.dumps(
            [
                {
                    "id": "http://zotero.org/users/1/items/ABCD",
                    "type": "article-journal",
                    "title": "Venue prediction from abstracts",
                    "container-title": "Nature Medicine",
                    "author": [{"family": "Lovelace", "given": "Ada"}, {"literal": "The Consortium"}],
                    "issued": {"date-parts": [[2021, 3]]},
                    "DOI": "10.1/P2",
                    "abstract": "We predict venues.",
                    "keyword": "venues, prediction",
                },
                "not an item",
            ]
        ),
        encoding="utf-8",
    )
    read = read_csl_json(export)
    [item] = read.items
    assert item.authors == ["Ada Lovelace", "The Consortium"] and item.year == 2021 and item.doi == "10.1/p2"
    assert item.venue == "Nature Medicine" and item.tags == ["venues", "prediction"]
    assert len(read.problems) == 1


def test_bibtex_file_fields_as_zotero_and_better_bibtex_write_them(tmp_path):
    assert bibtex_files(
        "Full Text PDF:files/12/A - 2020 - B.pdf:application/pdf;Snapshot:files/13/s.html:text/html", tmp_path
    ) == [
        tmp_path / "files/12/A - 2020 - B.pdf",
        tmp_path / "files/13/s.html",
    ]
    assert bibtex_files("/home/me/Zotero/storage/X/a.pdf;rel/b.pdf", tmp_path) == [
        Path("/home/me/Zotero/storage/X/a.pdf"),
        tmp_path / "rel/b.pdf",
    ]
    assert bibtex_files(r"PDF:files/a\;b\:c.pdf:application/pdf", tmp_path) == [tmp_path / "files/a;b:c.pdf"]


def test_unreadable_bibtex_entries_are_reported_not_fatal(tmp_path):
    export = tmp_path / "broken.bib"
    export.write_text(
        "@article{good, title = {A good entry}, author = {Roe, R.}, abstract = {Text.}, year = {2020}}\n"
        "@article{bad, title = {Unclosed\n",
        encoding="utf-8",
    )
    report = load_local_corpus(export)
    assert [p.title for p in report.papers] == ["A good entry"]
    assert [r.reason for r in report.rejected] == ["unreadable_entry"]
