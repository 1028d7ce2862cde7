"""A zotero.sqlite built the way Zotero 7 builds one (its own schema, EAV item data, creators, tags, nested
collections, libraries), for the tests of the Zotero reader."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# The tables Zotero 7 creates (resource/schema/userdata.sql and system.sql), the columns this reader touches and
# the ones around them, so the queries run against Zotero's real shape.
ZOTERO_SCHEMA = """
CREATE TABLE libraries (libraryID INTEGER PRIMARY KEY, type TEXT NOT NULL, editable INT NOT NULL,
    filesEditable INT NOT NULL, version INT NOT NULL DEFAULT 0, storageVersion INT NOT NULL DEFAULT 0,
    lastSync INT NOT NULL DEFAULT 0, archived INT NOT NULL DEFAULT 0);
CREATE TABLE itemTypes (itemTypeID INTEGER PRIMARY KEY, typeName TEXT, templateItemTypeID INT, display INT DEFAULT 1);
CREATE TABLE fields (fieldID INTEGER PRIMARY KEY, fieldName TEXT, fieldFormatID INT);
CREATE TABLE creatorTypes (creatorTypeID INTEGER PRIMARY KEY, creatorType TEXT);
CREATE TABLE items (itemID INTEGER PRIMARY KEY, itemTypeID INT NOT NULL,
    dateAdded TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, dateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, libraryID INT NOT NULL, key TEXT NOT NULL,
    version INT NOT NULL DEFAULT 0, synced INT NOT NULL DEFAULT 0, UNIQUE (libraryID, key));
CREATE TABLE itemDataValues (valueID INTEGER PRIMARY KEY, value UNIQUE);
CREATE TABLE itemData (itemID INT, fieldID INT, valueID, PRIMARY KEY (itemID, fieldID));
CREATE TABLE itemNotes (itemID INTEGER PRIMARY KEY, parentItemID INT, note TEXT, title TEXT);
CREATE TABLE itemAttachments (itemID INTEGER PRIMARY KEY, parentItemID INT, linkMode INT, contentType TEXT,
    charsetID INT, path TEXT, syncState INT DEFAULT 0, storageModTime INT, storageHash TEXT);
CREATE TABLE tags (tagID INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE itemTags (itemID INT NOT NULL, tagID INT NOT NULL, type INT NOT NULL, PRIMARY KEY (itemID, tagID));
CREATE TABLE creators (creatorID INTEGER PRIMARY KEY, firstName TEXT, lastName TEXT, fieldMode INT,
    UNIQUE (lastName, firstName, fieldMode));
CREATE TABLE itemCreators (itemID INT NOT NULL, creatorID INT NOT NULL, creatorTypeID INT NOT NULL DEFAULT 1,
    orderIndex INT NOT NULL DEFAULT 0, PRIMARY KEY (itemID, creatorID, creatorTypeID, orderIndex));
CREATE TABLE collections (collectionID INTEGER PRIMARY KEY, collectionName TEXT NOT NULL,
    parentCollectionID INT DEFAULT NULL, clientDateModified TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    libraryID INT NOT NULL, key TEXT NOT NULL, version INT NOT NULL DEFAULT 0, synced INT NOT NULL DEFAULT 0);
CREATE TABLE collectionItems (collectionID INT NOT NULL, itemID INT NOT NULL, orderIndex INT NOT NULL DEFAULT 0,
    PRIMARY KEY (collectionID, itemID));
CREATE TABLE deletedItems (itemID INTEGER PRIMARY KEY, dateDeleted DEFAULT CURRENT_TIMESTAMP NOT NULL);
"""
ITEM_TYPES = {1: "note", 3: "attachment", 11: "journalArticle", 13: "conferencePaper", 14: "preprint"}
FIELDS = {
    1: "title",
    2: "abstractNote",
    6: "date",
    8: "url",
    16: "extra",
    26: "DOI",
    32: "pages",
    38: "publicationTitle",
    39: "proceedingsTitle",
}


class ZoteroDatabase:
    """Builds a zotero.sqlite the way Zotero stores things (EAV item data, creators, tags, nested collections)."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path)
        self.db.executescript(ZOTERO_SCHEMA)
        self.db.executemany("INSERT INTO itemTypes (itemTypeID, typeName) VALUES (?, ?)", ITEM_TYPES.items())
        self.db.executemany("INSERT INTO fields (fieldID, fieldName) VALUES (?, ?)", FIELDS.items())
        self.db.executemany(
            "INSERT INTO creatorTypes VALUES (?, ?)", [(1, "author"), (2, "contributor"), (3, "editor")]
        )
        self.db.execute(
            "INSERT INTO libraries (libraryID, type, editable, filesEditable) VALUES (1, 'user', 1, 1)"
        )
        self.next_id = 1

    def feed_library(self) -> int:
        """A feed library, as Zotero makes one for each RSS subscription."""
        cursor = self.db.execute(
            "INSERT INTO libraries (type, editable, filesEditable) VALUES ('feed', 0, 0)"
        )
        return cursor.lastrowid

    def item(self, type_name: str, key: str, library: int = 1, **fields) -> int:
        item_id = self.next_id
        self.next_id += 1
        type_id = next(i for i, name in ITEM_TYPES.items() if name == type_name)
        self.db.execute(
            "INSERT INTO items (itemID, itemTypeID, libraryID, key) VALUES (?, ?, ?, ?)",
            (item_id, type_id, library, key),
        )
        for name, value in fields.items():
            field_id = next(i for i, f in FIELDS.items() if f == name)
            self.db.execute("INSERT OR IGNORE INTO itemDataValues (value) VALUES (?)", (value,))
            [(value_id,)] = self.db.execute("SELECT valueID FROM itemDataValues WHERE value = ?", (value,))
            self.db.execute("INSERT INTO itemData VALUES (?, ?, ?)", (item_id, field_id, value_id))
        return item_id

    def creators(self, item_id: int, *names: tuple[str, str], creator_type: int = 1) -> None:
        for order, (first, last) in enumerate(names):
            self.db.execute(
                "INSERT OR IGNORE INTO creators (firstName, lastName, fieldMode) VALUES (?, ?, 0)",
                (first, last),
            )
            [(creator_id,)] = self.db.execute(
                "SELECT creatorID FROM creators WHERE firstName = ? AND lastName = ?", (first, last)
            )
            self.db.execute(
                "INSERT INTO itemCreators VALUES (?, ?, ?, ?)",
                (item_id, creator_id, creator_type, order + 10 * creator_type),
            )

    def tag(self, item_id: int, name: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO tags (name) VALUES (?)", (name,))
        [(tag_id,)] = self.db.execute("SELECT tagID FROM tags WHERE name = ?", (name,))
        self.db.execute("INSERT INTO itemTags VALUES (?, ?, 0)", (item_id, tag_id))

    def collection(self, name: str, parent: int | None = None) -> int:
        cursor = self.db.execute(
            "INSERT INTO collections (collectionName, parentCollectionID, libraryID, key) VALUES (?, ?, 1, ?)",
            (name, parent, name.upper()[:8]),
        )
        return cursor.lastrowid

    def attach(
        self,
        parent: int | None,
        key: str,
        path: str,
        content_type: str = "application/pdf",
        link_mode: int = 0,
    ) -> None:
        attachment = self.item("attachment", key)
        self.db.execute(
            "INSERT INTO itemAttachments (itemID, parentItemID, linkMode, contentType, path) VALUES (?, ?, ?, ?, ?)",
            (attachment, parent, link_mode, content_type, path),
        )

    def close(self) -> None:
        self.db.commit()
        self.db.close()
