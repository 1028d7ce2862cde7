"""A Zotero data folder read without Zotero: `zotero.sqlite` opened read-only and immutable (a running Zotero's lock
does not matter, and nothing is ever written), attachments from `storage/<attachment key>/<file>`.

Zotero keeps fields as entity-attribute-value rows (items -> itemData -> fields / itemDataValues), people in
creators / itemCreators, tags in tags / itemTags and collections (nested through parentCollectionID) in
collections / collectionItems; an attachment is an item of its own whose itemAttachments row names its parent
item and its path (`storage:<file name>` for a stored file, an absolute path for a linked one). Items in the trash
(deletedItems), notes, attachments and annotations are not papers."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

from lumina_assets.core.ids import normalize_doi
from lumina_assets.corpus.zotero_export import ExportRead, LibraryItem, arxiv_in, pdfs_first, unique, year_in

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


def is_data_folder(path: Path) -> bool:
    return path.is_dir() and (path / DATABASE).is_file()


def connect_read_only(database: Path) -> sqlite3.Connection:
    """`mode=ro&immutable=1`: SQLite neither writes nor takes a lock, so Zotero may be running."""
    uri = f"file:{quote(str(database.resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _collection_paths(db: sqlite3.Connection) -> dict[int, str]:
    """collectionID -> "Parent/Child" (the path a user sees in Zotero's left pane)."""
    rows = {
        cid: (name, parent)
        for cid, name, parent in db.execute(
            "SELECT collectionID, collectionName, parentCollectionID FROM collections"
        )
    }
    paths: dict[int, str] = {}
    for cid in rows:
        names, seen, current = [], set(), cid
        while current in rows and current not in seen:  # a broken parent loop ends instead of spinning
            seen.add(current)
            names.append(rows[current][0])
            current = rows[current][1]
        paths[cid] = "/".join(reversed(names))
    return paths


def read_data_folder(folder: Path) -> ExportRead:
    """Every regular item of the library (trash excluded) with its fields, authors, tags, collections and PDFs."""
    read = ExportRead()
    db = connect_read_only(folder / DATABASE)
    try:
        tables = _tables(db)
        fields_table = "fieldsCombined" if "fieldsCombined" in tables else "fields"
        trash = "AND i.itemID NOT IN (SELECT itemID FROM deletedItems)" if "deletedItems" in tables else ""
        items = {
            item_id: key
            for item_id, key in db.execute(
                "SELECT i.itemID, i.key FROM items i JOIN itemTypes t ON t.itemTypeID = i.itemTypeID "
                f"WHERE t.typeName NOT IN ({','.join('?' * len(NOT_PAPERS))}) {trash}",
                NOT_PAPERS,
            )
        }
        values: dict[int, dict[str, str]] = defaultdict(dict)
        for item_id, name, value in db.execute(
            f"SELECT d.itemID, f.fieldName, v.value FROM itemData d JOIN {fields_table} f ON f.fieldID = d.fieldID "
            "JOIN itemDataValues v ON v.valueID = d.valueID"
        ):
            values[item_id][name] = str(value) if value is not None else ""
        authors: dict[int, list[str]] = defaultdict(list)
        author_type = (
            "AND ic.creatorTypeID = (SELECT creatorTypeID FROM creatorTypes WHERE creatorType = 'author')"
        )
        for item_id, first, last in db.execute(
            "SELECT ic.itemID, c.firstName, c.lastName FROM itemCreators ic "
            "JOIN creators c ON c.creatorID = ic.creatorID "
            f"WHERE 1 = 1 {author_type if 'creatorTypes' in tables else ''} ORDER BY ic.itemID, ic.orderIndex"
        ):
            authors[item_id].append(" ".join(p for p in (first, last) if p))
        tags: dict[int, list[str]] = defaultdict(list)
        for item_id, name in db.execute(
            "SELECT it.itemID, t.name FROM itemTags it JOIN tags t ON t.tagID = it.tagID ORDER BY t.name"
        ):
            tags[item_id].append(name)
        paths = _collection_paths(db)
        collections: dict[int, list[str]] = defaultdict(list)
        for item_id, cid in db.execute("SELECT itemID, collectionID FROM collectionItems"):
            collections[item_id].append(paths.get(cid, ""))
        files: dict[int, list[Path]] = defaultdict(list)
        for parent, key, link_mode, content_type, path in db.execute(
            "SELECT a.parentItemID, i.key, a.linkMode, a.contentType, a.path FROM itemAttachments a "
            "JOIN items i ON i.itemID = a.itemID WHERE a.parentItemID IS NOT NULL"
        ):
            located = _attachment_path(folder, key, link_mode, path)
            if located is not None and (
                content_type == "application/pdf" or located.suffix.lower() == ".pdf"
            ):
                files[parent].append(located)
    finally:
        db.close()
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
                tags=unique(tags.get(item_id, [])),
                collections=unique(collections.get(item_id, [])),
                files=pdfs_first(files.get(item_id, [])),
            )
        )
    return read


def _doi_in_extra(extra: str | None) -> str | None:
    """Item types without a DOI field keep it in Extra as `DOI: 10....`."""
    for line in (extra or "").splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "doi":
            return value.strip()
    return None


def _attachment_path(folder: Path, key: str, link_mode, path: str | None) -> Path | None:
    """`storage:<name>` -> storage/<attachment key>/<name>; a linked file's absolute path as it is; a path relative
    to Zotero's base folder (`attachments:`) cannot be resolved without Zotero's preferences and is skipped."""
    if not path:
        return None
    if path.startswith("storage:"):
        storage = (folder / "storage" / key).resolve()
        located = (storage / path.removeprefix("storage:")).resolve()
        return located if located.is_relative_to(storage) else None  # "storage:../../x" stays out
    if link_mode == LINKED_FILE and Path(path).is_absolute():
        return Path(path)
    return None
