"""A Zotero data folder read without Zotero: a consistent private copy of `zotero.sqlite` (`consistent_copy`), items
joined from its entity-attribute-value tables, attachments from `storage/<attachment key>/<file>`. Trash, notes,
annotations and feed libraries are not papers; a stored attachment must resolve inside its own storage folder."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from lumina_assets.core.hygiene import display_name
from lumina_assets.core.ids import normalize_doi, normalize_pages
from lumina_assets.corpus.zotero_export import (
    ExportRead,
    LibraryItem,
    Refused,
    arxiv_in,
    pdfs_first,
    unique,
    year_in,
)

DATABASE = "zotero.sqlite"
NOT_PAPERS = ("attachment", "note", "annotation")
VENUE_FIELDS = (
    "publicationTitle",
    "proceedingsTitle",
    "conferenceName",
    "bookTitle",
    "university",
    "publisher",
)
LINKED_FILE = 2  # itemAttachments.linkMode: 0 imported file, 1 imported URL, 2 linked file, 3 linked URL
ATTACHMENT_KEY = re.compile(r"^[A-Za-z0-9]{1,32}$")  # Zotero's keys are 8 letters and digits
MAX_COLLECTION_DEPTH = 16  # "A/B/.../P": deeper nesting keeps its first 16 levels
SIDE_FILES = ("-journal", "-wal")  # what SQLite keeps beside a database mid-transaction
SNAPSHOT_TRIES = 5
SNAPSHOT_WAIT_S = 1.0
LOCK_WAIT_S = 2.0


class UnreadableLibrary(ValueError):
    """A data folder whose database cannot be read at all; the message names the problem and what to do."""


def is_data_folder(path: Path) -> bool:
    return path.is_dir() and (path / DATABASE).is_file()


def _open(path: Path, *, read_only: bool, timeout: float = 0.0) -> sqlite3.Connection:
    mode = "?mode=ro" if read_only else ""
    db = sqlite3.connect(f"file:{quote(str(path.resolve()))}{mode}", uri=True, timeout=timeout)
    db.text_factory = lambda raw: raw.decode(
        "utf-8", errors="replace"
    )  # not UTF-8: U+FFFD, not a failed query
    return db


def _fingerprint(database: Path) -> tuple:
    """Size and modification time of the database and its side files: a copy taken while they changed is torn."""
    marks = []
    for suffix in ("", *SIDE_FILES):
        try:
            stat = os.stat(f"{database}{suffix}")
        except FileNotFoundError:
            marks.append(None)
            continue
        marks.append((stat.st_size, stat.st_mtime_ns))
    return tuple(marks)


def _backup(database: Path, target: Path) -> bool:
    """SQLite's online backup under a shared lock (a consistent copy); False when a writer holds the lock (a
    running Zotero keeps an exclusive lock for as long as it runs) or a crashed writer left a journal to roll
    back (which only the snapshot's writable copy can)."""
    try:
        with contextlib.closing(_open(database, read_only=True, timeout=LOCK_WAIT_S)) as source:
            # the shared lock first, waiting at most LOCK_WAIT_S: the backup itself retries a busy step forever
            source.execute("BEGIN")
            source.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            with contextlib.closing(sqlite3.connect(target)) as destination:
                source.backup(destination)
    except sqlite3.OperationalError:  # locked, or a hot journal a read-only reader may not roll back
        target.unlink(missing_ok=True)
        return False
    return True


def _snapshot(database: Path, target: Path) -> None:
    """The database file with its rollback journal or WAL, copied together while neither changed; the copy
    opened read-write rolls a hot journal back (or replays committed WAL frames), leaving the last committed
    state, which `PRAGMA quick_check` confirms. Retried a few times while the writer keeps writing."""
    problem = "the database kept changing while it was copied"
    for attempt in range(SNAPSHOT_TRIES):
        if attempt:
            time.sleep(SNAPSHOT_WAIT_S)
        for suffix in ("", *SIDE_FILES):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        before = _fingerprint(database)
        for suffix in ("", *SIDE_FILES):
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(f"{database}{suffix}", f"{target}{suffix}")
        if _fingerprint(database) != before:
            continue
        with contextlib.closing(_open(target, read_only=False)) as copy:
            try:
                verdict = copy.execute("PRAGMA quick_check").fetchone()[0]
            except sqlite3.DatabaseError as error:
                problem = str(error)
                continue
        if verdict == "ok":
            return
        problem = f"integrity check: {verdict}"
    raise sqlite3.DatabaseError(problem)


@contextlib.contextmanager
def consistent_copy(database: Path) -> Iterator[tuple[sqlite3.Connection, str]]:
    """(a connection to a private copy of the database in its last committed state, "backup" or "snapshot"): the
    backup API when the lock can be had within LOCK_WAIT_S, else `_snapshot` while a writer (Zotero) holds it."""
    with tempfile.TemporaryDirectory(prefix="lumina-zotero-") as folder:
        target = Path(folder) / DATABASE
        how = "backup" if _backup(database, target) else "snapshot"
        if how == "snapshot":
            _snapshot(database, target)
        with contextlib.closing(_open(target, read_only=False)) as db:
            yield db, how


def _tables(db: sqlite3.Connection) -> dict[str, set[str]]:
    """table name -> its columns."""
    names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    return {name: {row[1] for row in db.execute(f'PRAGMA table_info("{name}")')} for name in names}


def _collection_paths(db: sqlite3.Connection) -> dict[int, str]:
    """collectionID -> "Parent/Child" (the path a user sees in Zotero's left pane), at most MAX_COLLECTION_DEPTH
    levels from the top."""
    rows = {
        cid: (name, parent)
        for cid, name, parent in db.execute(
            "SELECT collectionID, collectionName, parentCollectionID FROM collections"
        )
    }
    top: dict[int, list[str]] = {}  # collectionID -> its first levels from the top, each parent walked once
    for cid in rows:
        chain, seen, current = [], set(), cid
        while current in rows and current not in top and current not in seen:  # a parent loop ends the walk
            seen.add(current)
            chain.append(current)
            current = rows[current][1]
        for node in reversed(chain):
            above = top.get(rows[node][1], []) if rows[node][1] not in seen or rows[node][1] in top else []
            name = str(rows[node][0] or "")
            top[node] = above if len(above) >= MAX_COLLECTION_DEPTH else [*above, name]
    return {cid: "/".join(levels) for cid, levels in top.items()}


def read_data_folder(folder: Path) -> ExportRead:
    """Every regular item of the library (trash and feed libraries excluded) with its fields, authors, tags,
    collections and PDFs; top-level PDF attachments as items of their own. UnreadableLibrary when the database
    cannot be read (not SQLite, damaged, no items table)."""
    database = folder / DATABASE
    try:
        with consistent_copy(database) as (db, how):
            read = _read_items(folder, db)
    except sqlite3.DatabaseError as error:
        raise UnreadableLibrary(
            f"{display_name(database)}: not a readable Zotero database ({error})"
        ) from None
    read.notes.insert(0, f"{DATABASE} read from a {how} copy")
    return read


# Grade E: one pass over Zotero's tables, each optional table a guarded branch, so an item's rows join in one read.
def _read_items(folder: Path, db: sqlite3.Connection) -> ExportRead:
    read = ExportRead()
    tables = _tables(db)
    missing = {"items", "itemTypes"} - set(tables)
    if missing:
        raise UnreadableLibrary(
            f"{display_name(folder / DATABASE)}: not a Zotero database (no {', '.join(sorted(missing))} table)"
        )
    fields_table = "fieldsCombined" if "fieldsCombined" in tables else "fields"
    trash = "AND i.itemID NOT IN (SELECT itemID FROM deletedItems)" if "deletedItems" in tables else ""
    feeds = ""
    if "type" in tables.get("libraries", set()) and "libraryID" in tables["items"]:
        feeds = "AND i.libraryID NOT IN (SELECT libraryID FROM libraries WHERE type = 'feed')"
        [(feed_items,)] = db.execute(
            "SELECT COUNT(*) FROM items WHERE libraryID IN (SELECT libraryID FROM libraries WHERE type = 'feed')"
        )
        if feed_items:
            read.notes.append(
                f"{feed_items} item(s) of Zotero feed libraries (RSS subscriptions) left out: they are not "
                "papers of your library"
            )
    items = {
        item_id: str(key)
        for item_id, key in db.execute(
            "SELECT i.itemID, i.key FROM items i JOIN itemTypes t ON t.itemTypeID = i.itemTypeID "
            f"WHERE t.typeName NOT IN ({','.join('?' * len(NOT_PAPERS))}) {trash} {feeds}",
            NOT_PAPERS,
        )
    }
    values: dict[int, dict[str, str]] = defaultdict(dict)
    if {"itemData", fields_table, "itemDataValues"} <= set(tables):
        for item_id, name, value in db.execute(
            f"SELECT d.itemID, f.fieldName, v.value FROM itemData d JOIN {fields_table} f ON f.fieldID = d.fieldID "
            "JOIN itemDataValues v ON v.valueID = d.valueID"
        ):
            values[item_id][str(name)] = str(value) if value is not None else ""
    authors: dict[int, list[str]] = defaultdict(list)
    if {"itemCreators", "creators"} <= set(tables):
        author_type = (
            "AND ic.creatorTypeID = (SELECT creatorTypeID FROM creatorTypes WHERE creatorType = 'author')"
        )
        for item_id, first, last in db.execute(
            "SELECT ic.itemID, c.firstName, c.lastName FROM itemCreators ic "
            "JOIN creators c ON c.creatorID = ic.creatorID "
            f"WHERE 1 = 1 {author_type if 'creatorTypes' in tables else ''} ORDER BY ic.itemID, ic.orderIndex"
        ):
            authors[item_id].append(" ".join(str(p) for p in (first, last) if p))
    tags: dict[int, list[str]] = defaultdict(list)
    if {"itemTags", "tags"} <= set(tables):
        for item_id, name in db.execute(
            "SELECT it.itemID, t.name FROM itemTags it JOIN tags t ON t.tagID = it.tagID ORDER BY t.name"
        ):
            tags[item_id].append(str(name))
    collections: dict[int, list[str]] = defaultdict(list)
    if {"collections", "collectionItems"} <= set(tables):
        paths = _collection_paths(db)
        for item_id, cid in db.execute("SELECT itemID, collectionID FROM collectionItems"):
            collections[item_id].append(paths.get(cid, ""))
    files: dict[int, list[Path]] = defaultdict(list)
    standalone: list[LibraryItem] = []
    if "itemAttachments" in tables:
        others = 0
        for parent, key, link_mode, content_type, path in db.execute(
            "SELECT a.parentItemID, i.key, a.linkMode, a.contentType, a.path FROM itemAttachments a "
            f"JOIN items i ON i.itemID = a.itemID WHERE a.parentItemID IS NOT NULL OR (1 = 1 {trash} {feeds})"
        ):
            key = str(key)
            owner = items.get(parent) if parent is not None else key
            if owner is None:
                continue  # the parent is in the trash, a feed, or not a paper
            is_pdf = content_type == "application/pdf" or str(path or "").lower().endswith(".pdf")
            if not is_pdf:
                others += parent is None
                continue
            located, reason, message = _attachment_path(folder, key, link_mode, path)
            if reason:
                read.refused.append(Refused(owner, key, reason, f"{owner}: attachment {key}: {message}"))
            if parent is None:
                # a PDF dropped into the library without a parent item: a paper of its own, described by the PDF
                standalone.append(LibraryItem(key=key, files=[located] if located else []))
            elif located is not None:
                files[parent].append(located)
        if others:
            read.notes.append(f"{others} top-level attachment(s) that are not PDFs left out")
    for item_id, key in items.items():
        fields = values.get(item_id, {})
        venue = next((fields[name] for name in VENUE_FIELDS if fields.get(name)), None)
        read.items.append(
            LibraryItem(
                key=key,
                title=fields.get("title", "").strip(),
                authors=unique(authors.get(item_id, [])),
                year=year_in(fields.get("date")),  # Zotero stores "2020-05-00 May 2020": the SQL form first
                venue=venue,
                doi=normalize_doi(fields.get("DOI")) or normalize_doi(_doi_in_extra(fields.get("extra"))),
                arxiv_id=arxiv_in(fields.get("archiveID"), fields.get("extra"), fields.get("url")),
                abstract=fields.get("abstractNote", "").strip() or None,
                url=fields.get("url") or None,
                pages=normalize_pages(fields.get("pages")),
                tags=unique(tags.get(item_id, [])),
                collections=unique(collections.get(item_id, [])),
                files=pdfs_first(files.get(item_id, [])),
            )
        )
    read.standalone = standalone
    return read


def _doi_in_extra(extra: str | None) -> str | None:
    """Item types without a DOI field keep it in Extra as `DOI: 10....`."""
    for line in (extra or "").splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "doi":
            return value.strip()
    return None


def _attachment_path(folder: Path, key: str, link_mode, path) -> tuple[Path | None, str | None, str]:
    """(where the file is, refusal reason, message). `storage:<name>` must resolve inside storage/<attachment key>/
    (no `../`, no link out of it); a linked file's absolute path is taken as it is; `attachments:` (relative to
    Zotero's base folder, which only its preferences know) cannot be resolved."""
    if not path:
        return None, None, ""
    path = str(path)
    if path.startswith("storage:"):
        if not ATTACHMENT_KEY.match(key):
            return None, "attachment_outside_storage", f"key {key!r} is not a Zotero key"
        root = (folder / "storage").resolve()
        own = root / key
        try:
            located = (own / path.removeprefix("storage:")).resolve()
        except (OSError, RuntimeError):  # a symbolic link loop
            return None, "attachment_symlink_loop", f"{display_name(path)}: symbolic link loop"
        except ValueError:  # a NUL byte in the name
            return None, "attachment_outside_storage", f"{display_name(path)!r} is not a usable file name"
        if not located.is_relative_to(own):
            return (
                None,
                "attachment_outside_storage",
                f"{display_name(path)} resolves outside storage/{key}/ ({display_name(located)})",
            )
        return located, None, ""
    if link_mode == LINKED_FILE and Path(path).is_absolute():
        return Path(path), None, ""
    if path.startswith("attachments:"):
        return (
            None,
            "attachment_base_folder",
            f"{display_name(path)} is relative to Zotero's linked-attachment base folder, which only Zotero knows",
        )
    return None, None, ""
