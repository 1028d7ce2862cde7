"""A library that cannot be read, in a real `local_papers` run: the inbox PDF of the same run still comes in, and the
library is named with its reason and advice in `local_rejected` and in the run's log (issue 40 item 1)."""

from __future__ import annotations

import os
import shutil

import dagster as dg
from dagster import DagsterInstance

from lumina_assets.core import settings, tables
from lumina_assets.defs import corpus
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from resources.parsing import ParsingConfig


def test_a_damaged_zotero_database_keeps_the_inbox_and_is_named_in_the_log(data_dir, tmp_path, shared_data):
    folder = tmp_path / "Zotero"
    folder.mkdir()
    (folder / "zotero.sqlite").write_bytes(b"SQLite format 3\x00" + os.urandom(8192))  # header, then garbage
    settings.inbox_dir().mkdir(parents=True)
    shutil.copy(shared_data / "pdfs" / "pasa.pdf", settings.inbox_dir() / "pasa.pdf")
    instance = DagsterInstance.ephemeral()
    result = dg.materialize(
        [corpus.local_papers],
        resources={
            "corpus": CorpusResource(corpus_path=str(folder)),
            "parsing": ParsingConfig(),
            "openalex": OpenAlexResource(),
            "arxiv": ArxivResource(),
        },
        instance=instance,
    )
    assert result.success  # before: "sqlite3.DatabaseError: file is not a database", the inbox lost with it
    assert list(tables.read(tables.LOCAL_PAPERS)["source_id"]) == ["pasa.pdf"]
    rejected = tables.read(tables.LOCAL_REJECTED)
    assert list(rejected["reason"]) == ["unreadable_corpus"] and list(rejected["source"]) == ["zotero"]
    warnings = [
        entry.user_message
        for entry in instance.all_logs(result.run_id)
        if entry.level == 30 and "zotero.sqlite" in entry.user_message
    ]
    assert len(warnings) == 1 and "not a readable Zotero database" in warnings[0]
    assert "What to do:" in warnings[0]
