"""Hostile Zotero libraries (issue 40 items 1 and 2, issue 39 item 6): each bad zotero.sqlite, a symbolic link loop
in storage/, attachment paths that would leave storage/<key>/, wrongly typed or deeply nested CSL-JSON items, a
database a writer process is changing, top-level PDFs and feed libraries. One bad input never fails the import: the
library is one `unreadable_corpus` row with advice, or the bad item / attachment is a row of its own and the good
items come in."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from zotero_db import ZoteroDatabase

from lumina_assets.corpus.library import load_local_corpus
from lumina_assets.corpus.zotero_sqlite import read_data_folder

N18 = "N18-3011.pdf"


def good_library(folder: Path, shared_data: Path | None = None) -> ZoteroDatabase:
    """Two regular items (one with a stored PDF when shared_data is given); the database is left open."""
    folder.mkdir(parents=True, exist_ok=True)
    z = ZoteroDatabase(folder / "zotero.sqlite")
    ammar = z.item(
        "conferencePaper",
        "QWER7890",
        title="Construction of the Literature Graph in Semantic Scholar",
        DOI="10.18653/v1/N18-3011",
        abstractNote="We describe the literature graph.",
    )
    z.creators(ammar, ("Waleed", "Ammar"))
    specter = z.item(
        "preprint",
        "SPEC1234",
        title="SPECTER: Document-level Representation Learning",
        abstractNote="Citations.",
    )
    z.creators(specter, ("Arman", "Cohan"))
    if shared_data is not None:
        (folder / "storage" / "ABCD2345").mkdir(parents=True)
        shutil.copyfile(shared_data / "pdfs" / N18, folder / "storage/ABCD2345/Ammar.pdf")
        z.attach(ammar, "ABCD2345", "storage:Ammar.pdf")
    return z


def _bad_database(kind: str, path: Path, tmp_path: Path) -> None:
    if kind == "random_bytes":
        path.write_bytes(os.urandom(64 * 1024))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        z = good_library(tmp_path / "whole")
        for number in range(400):  # enough pages that a cut lands inside the tables
            z.item("journalArticle", f"K{number:07d}", title=f"Paper {number} " + "x" * 200)
        z.close()
        data = (tmp_path / "whole" / "zotero.sqlite").read_bytes()
        path.write_bytes(data[: len(data) // 3])
    elif kind == "missing_tables":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE settings (setting TEXT, key TEXT, value)")
        db.commit()
        db.close()


@pytest.mark.parametrize("kind", ["random_bytes", "empty", "truncated", "missing_tables"])
def test_an_unreadable_database_is_one_row_with_advice(kind, tmp_path):
    folder = tmp_path / "Zotero"
    folder.mkdir()
    _bad_database(kind, folder / "zotero.sqlite", tmp_path)
    report = load_local_corpus(folder)  # before: sqlite3.DatabaseError out of the loader
    assert report.papers == []
    [rejection] = report.rejected
    assert rejection.reason == "unreadable_corpus" and rejection.source == "zotero"
    [message] = report.errors
    assert "zotero.sqlite" in message and "What to do:" in message and "zotero.sqlite.bak" in message


def test_text_sqlite_cannot_decode_is_repaired_not_fatal(tmp_path):
    z = good_library(tmp_path / "Zotero")
    bad = z.item("journalArticle", "BADTEXT1", abstractNote="An abstract.")
    z.db.execute("INSERT INTO itemDataValues (value) VALUES (CAST(X'4361742066C3FF20666F6F' AS TEXT))")
    [(value_id,)] = z.db.execute("SELECT MAX(valueID) FROM itemDataValues")
    z.db.execute("INSERT INTO itemData VALUES (?, 1, ?)", (bad, value_id))  # field 1: title
    z.close()
    report = load_local_corpus(tmp_path / "Zotero")  # before: OperationalError "Could not decode to UTF-8"
    titles = sorted(p.title for p in report.papers)
    assert len(titles) == 3 and "Cat f\ufffd\ufffd foo" in titles
    assert report.rejected == []


def test_a_symlink_loop_in_storage_is_reported_and_the_item_kept(shared_data, tmp_path):
    folder = tmp_path / "Zotero"
    z = good_library(folder, shared_data)
    specter = 2
    (folder / "storage").mkdir(exist_ok=True)
    os.symlink("LOOP0002", folder / "storage" / "LOOP0001")
    os.symlink("LOOP0001", folder / "storage" / "LOOP0002")
    z.attach(specter, "LOOP0001", "storage:paper.pdf")
    z.close()
    report = load_local_corpus(folder)
    assert sorted(p.source_id for p in report.papers) == ["QWER7890", "SPEC1234"]
    assert [r.reason for r in report.rejected] == ["attachment_symlink_loop"]
    assert report.rejected[0].paper_id == "zotero:SPEC1234:attachment"


def test_every_stored_attachment_resolves_inside_its_storage_folder(shared_data, tmp_path):
    """`../` in the key or the name, and a storage/<key> folder that is a symbolic link out of the data folder,
    never make an outside file a paper (before: the outside PDF was loaded and became servable)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copyfile(shared_data / "pdfs" / "pasa.pdf", outside / "secret.pdf")
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    folder = tmp_path / "Zotero"
    z = good_library(folder, shared_data)
    keys = []
    for number, (key, path) in enumerate(
        [
            ("../../outside", "storage:secret.pdf"),  # `../` in the attachment key
            ("ESC00001", "storage:../../../outside/secret.pdf"),  # `../` in the name
            ("LINKDIR1", "storage:secret.pdf"),  # storage/<key> is a symbolic link out
            ("LINKFIL1", "storage:passwd.pdf"),  # a file link to a non-PDF outside
        ]
    ):
        parent = z.item("journalArticle", f"ITEM000{number}", title=f"Item {number}", abstractNote="Text.")
        z.attach(parent, key, path)
        keys.append(key)
    os.symlink(outside, folder / "storage" / "LINKDIR1")
    (folder / "storage" / "LINKFIL1").mkdir()
    os.symlink(outside / "passwd", folder / "storage" / "LINKFIL1" / "passwd.pdf")
    z.close()
    report = load_local_corpus(folder)
    by_key = {p.source_id: p for p in report.papers}
    for number in range(4):
        assert by_key[f"ITEM000{number}"].local_path is None  # the item kept, without the outside file
    assert not any(p.local_path and "outside" in p.local_path for p in report.papers)
    assert sorted((r.title, r.reason) for r in report.rejected) == sorted(
        (key, "attachment_outside_storage") for key in keys
    )


def test_a_top_level_pdf_becomes_a_paper_and_feed_items_are_left_out(shared_data, tmp_path):
    folder = tmp_path / "Zotero"
    z = good_library(folder, shared_data)
    (folder / "storage" / "TOPL0001").mkdir()
    shutil.copyfile(shared_data / "pdfs" / "pasa.pdf", folder / "storage/TOPL0001/pasa.pdf")
    z.attach(None, "TOPL0001", "storage:pasa.pdf")  # dragged into Zotero, no parent item
    z.attach(None, "TOPL0002", "storage:gone.pdf")  # its file is missing
    (folder / "storage" / "TOPL0003").mkdir()
    (folder / "storage/TOPL0003/broken.pdf").write_bytes(b"not a pdf at all")
    z.attach(None, "TOPL0003", "storage:broken.pdf")
    feed = z.feed_library()
    z.item("journalArticle", "FEED0001", library=feed, title="An RSS entry", abstractNote="From a feed.")
    z.close()
    report = load_local_corpus(folder)
    papers = {p.source_id: p for p in report.papers}
    assert set(papers) == {"QWER7890", "SPEC1234", "TOPL0001"}  # no feed item
    pasa = papers["TOPL0001"]
    assert (
        pasa.title.lower().startswith("pasa")
        and pasa.local_path
        and "title:pdf" in " ".join(pasa.metadata_sources)
    )
    assert sorted((r.paper_id, r.reason) for r in report.rejected) == [
        ("zotero:TOPL0002", "standalone_attachment_missing"),
        ("zotero:TOPL0003", "not_pdf"),
    ]
    assert any("1 item(s) of Zotero feed libraries" in note for note in report.repairs)


def test_deep_collections_and_many_tags_are_capped(tmp_path):
    z = good_library(tmp_path / "Zotero")
    parent = None
    for depth in range(3000):
        parent = z.collection(f"level-{depth:04d}", parent)
    z.db.execute("INSERT INTO collectionItems VALUES (?, 1, 0)", (parent,))
    for number in range(800):
        z.tag(1, f"tag-{number:04d}-" + "t" * 300)
    z.close()
    [paper] = [p for p in load_local_corpus(tmp_path / "Zotero").papers if p.source_id == "QWER7890"]
    [path] = paper.collections
    assert path.count("/") == 15 and len(path) <= 512
    assert len(paper.tags) == 500 and all(len(tag) <= 256 for tag in paper.tags)
    assert {"tags:truncated"} <= set(paper.metadata_sources)


@pytest.mark.parametrize(
    "bad, reason",
    [
        ({"issued": "2020"}, "issued"),
        ({"URL": ["https://a.example"]}, "URL"),
        ({"keyword": 5}, "keyword"),
        ({"DOI": 10.1234}, "DOI"),
        ({"title": "Deep", "note": "x", "extra": None}, None),  # a good one with an unread field
    ],
)
def test_a_wrongly_typed_csl_item_is_named_and_the_others_come_in(bad, reason, tmp_path):
    export = tmp_path / "library.json"
    good = {"id": "good", "title": "A good item", "abstract": "Text.", "issued": {"date-parts": [[2020]]}}
    export.write_text(json.dumps([good, {"id": "bad", "title": "Bad", **bad}, good | {"id": "good2"}]))
    report = load_local_corpus(export)  # before: AttributeError / TypeError out of the reader
    if reason is None:
        assert len(report.papers) == 3
        return
    assert sorted(p.source_id for p in report.papers) == ["good", "good2"]
    [rejection] = report.rejected
    assert rejection.reason == "unreadable_entry" and rejection.paper_id == "zotero:item 2"
    assert reason in report.errors[0] and "(id bad)" in report.errors[0]


def test_csl_json_nested_100000_deep_is_one_problem(tmp_path):
    export = tmp_path / "library.json"
    deep = '{"id": "deep", "title": ' + "[" * 100_000 + "]" * 100_000 + "}"
    good = json.dumps({"id": "good", "title": "A good item", "abstract": "Text."})
    export.write_text(f"[{good}, {deep}, {good.replace('good', 'good2')}]")
    report = load_local_corpus(export)  # before: RecursionError out of json.loads
    assert sorted(p.source_id for p in report.papers) == ["good", "good2"]
    assert [r.reason for r in report.rejected] == ["unreadable_entry"]
    assert "nested deeper than 32 levels" in report.errors[0]
    whole = tmp_path / "deep.json"
    whole.write_text("[" * 100_000 + "]" * 100_000)
    report = load_local_corpus(whole)
    assert report.papers == [] and [r.reason for r in report.rejected] == ["unreadable_entry"]


WRITER = r"""
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size = 10")  # a small page cache: the transaction's pages spill into the file
db.execute("BEGIN EXCLUSIVE")
db.execute("UPDATE itemDataValues SET value = 'UNCOMMITTED ' || value")
for number in range(3000):
    db.execute("INSERT INTO items (itemTypeID, libraryID, key) VALUES (11, 1, ?)", (f"NEW{number:05d}",))
    db.execute("INSERT INTO itemDataValues (value) VALUES (?)", ("UNCOMMITTED " + "y" * 400 + str(number),))
print("ready", flush=True)
sys.stdin.read()  # holds the transaction until the test closes stdin
db.execute("ROLLBACK")
"""


@pytest.mark.parametrize("locking_mode", ["NORMAL", "EXCLUSIVE"])
def test_a_library_a_writer_is_changing_reads_its_last_committed_state(locking_mode, tmp_path):
    folder = tmp_path / "Zotero"
    z = good_library(folder)
    for number in range(300):
        z.item("journalArticle", f"OLD{number:05d}", title=f"Committed paper {number}", abstractNote="Text.")
    z.close()
    script = WRITER.replace(
        "BEGIN EXCLUSIVE", f'PRAGMA locking_mode = {locking_mode}")\ndb.execute("BEGIN EXCLUSIVE'
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", script, str(folder / "zotero.sqlite")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        assert b"UNCOMMITTED" in (folder / "zotero.sqlite").read_bytes()  # pages spilled into the file
        assert (folder / "zotero.sqlite-journal").exists()
        read = read_data_folder(folder)  # before: "database disk image is malformed", or uncommitted rows
        beside = sorted(p.name for p in folder.iterdir())
    finally:
        writer.stdin.close()
        writer.wait(timeout=30)
    keys = {item.key for item in read.items}
    assert len(keys) == 302 and not any(key.startswith("NEW") for key in keys)
    assert not any("UNCOMMITTED" in (item.title + (item.abstract or "")) for item in read.items)
    assert read.notes[0] == "zotero.sqlite read from a snapshot copy"
    assert beside == ["zotero.sqlite", "zotero.sqlite-journal"]  # nothing written beside the library


def test_a_library_nobody_writes_is_read_with_the_backup_api(tmp_path):
    good_library(tmp_path / "Zotero").close()
    read = read_data_folder(tmp_path / "Zotero")
    assert read.notes[0] == "zotero.sqlite read from a backup copy" and len(read.items) == 2


def test_a_bibtex_export_builds_one_latex_decoder(tmp_path, monkeypatch):
    """Issue 40 item 11: pylatexenc's decoder (and its macro table) was built for every field, 95 % of the time of a
    50,000-entry import; the figures are in docs/security.md (`lumina` has no timed tests)."""
    from pylatexenc import latex2text, latexwalker

    from lumina_assets.corpus import zotero_export

    zotero_export._latex_decoder.cache_clear()
    zotero_export._latex.cache_clear()
    built = {"decoders": 0, "tables": 0}
    decoder, table = latex2text.LatexNodes2Text.__init__, latexwalker.get_default_latex_context_db

    def counting_decoder(self, *args, **kwargs):
        built["decoders"] += 1
        decoder(self, *args, **kwargs)

    def counting_table():
        built["tables"] += 1
        return table()

    monkeypatch.setattr(latex2text.LatexNodes2Text, "__init__", counting_decoder)
    monkeypatch.setattr(latexwalker, "get_default_latex_context_db", counting_table)
    export = tmp_path / "library.bib"
    export.write_text(
        "".join(
            f'@article{{k{n}, title = {{The {{Graph}} number {n}}}, author = {{M{{\\"u}}ller, J{n}}}, '
            f"journal = {{J. {{Graphs}} {n}}}, abstract = {{Text $x_{n}$.}}, year = {{2020}}}}\n"
            for n in range(40)
        )
    )
    read = zotero_export.read_bibtex(export)
    assert len(read.items) == 40 and read.items[3].title == "The Graph number 3"
    assert read.items[3].authors == ["J3 Müller"] and read.items[3].abstract == "Text $x_3$."
    assert built == {"decoders": 1, "tables": 1}  # before: one of each per field (200 here)


def test_a_journal_left_by_a_killed_writer_is_rolled_back_in_the_copy(tmp_path):
    """Zotero killed mid-transaction leaves a hot journal: the read still gives the last committed state."""
    folder = tmp_path / "Zotero"
    good_library(folder).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder / "zotero.sqlite")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert writer.stdout.readline().strip() == "ready"
    writer.kill()  # SIGKILL: no rollback, the journal stays hot
    writer.wait(timeout=30)
    writer.stdin.close()
    assert (folder / "zotero.sqlite-journal").exists()
    before = (folder / "zotero.sqlite").read_bytes()
    read = read_data_folder(folder)
    assert sorted(item.key for item in read.items) == ["QWER7890", "SPEC1234"]
    assert not any("UNCOMMITTED" in item.title for item in read.items)
    assert (folder / "zotero.sqlite").read_bytes() == before  # the user's file is untouched


def test_attachment_names_with_a_nul_byte_are_refused_not_fatal(tmp_path):
    z = good_library(tmp_path / "Zotero")
    z.attach(1, "NULNAME1", "storage:a\x00b.pdf")
    z.attach(2, "NULLINK1", "/tmp/a\x00b.pdf", link_mode=2)
    z.close()
    report = load_local_corpus(tmp_path / "Zotero")  # before: ValueError "embedded null byte"
    assert sorted(p.source_id for p in report.papers) == ["QWER7890", "SPEC1234"]
    assert [r.reason for r in report.rejected] == ["attachment_outside_storage"]
    export = tmp_path / "library.bib"
    export.write_text(
        "@article{a, title = {With a bad file}, abstract = {Text.}, file = {PDF:files/a\x00b.pdf:application/pdf}}\n"
        "@article{b, title = {A good one}, abstract = {Text.}}\n"
    )
    assert sorted(p.source_id for p in load_local_corpus(export).papers) == ["a", "b"]


def test_a_pdf_stored_without_the_pdf_suffix_is_read_by_its_content_type(shared_data, tmp_path):
    folder = tmp_path / "Zotero"
    z = good_library(folder)
    (folder / "storage" / "TOPL0004").mkdir(parents=True)
    shutil.copyfile(shared_data / "pdfs" / "pasa.pdf", folder / "storage/TOPL0004/PaSa full text")
    z.attach(None, "TOPL0004", "storage:PaSa full text")  # top level, application/pdf, no suffix
    (folder / "storage" / "ABCD2346").mkdir()
    shutil.copyfile(shared_data / "pdfs" / N18, folder / "storage/ABCD2346/Ammar")
    ammar = z.db.execute("SELECT itemID FROM items WHERE key = 'QWER7890'").fetchone()[0]
    z.attach(ammar, "ABCD2346", "storage:Ammar")
    (folder / "storage" / "FIFO0001").mkdir()
    os.mkfifo(folder / "storage/FIFO0001/pipe")  # looked at by name and type, never opened
    specter = z.db.execute("SELECT itemID FROM items WHERE key = 'SPEC1234'").fetchone()[0]
    z.attach(specter, "FIFO0001", "storage:pipe")
    z.close()
    report = load_local_corpus(folder)
    papers = {p.source_id: p for p in report.papers}
    assert set(papers) == {"QWER7890", "SPEC1234", "TOPL0004"}
    assert not papers["SPEC1234"].local_path
    assert papers["TOPL0004"].title.lower().startswith("pasa") and papers["TOPL0004"].local_path
    assert papers["QWER7890"].local_path  # the item keeps its library metadata and gets its PDF
    assert not report.rejected
