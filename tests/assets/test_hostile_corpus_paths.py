"""A `LUMINA_CORPUS` whose path is not UTF-8 (a folder of PDFs, a BEIR folder, a single file): `local_papers`
takes its papers with valid UTF-8 ids, origins and metadata, and the inbox papers of the same run come in too.
Before: UnicodeEncodeError in the Parquet writer, and the run lost the inbox papers with it."""

from __future__ import annotations

import contextlib
import io
import os
import shutil

import dagster as dg
import pytest
from dagster import DagsterInstance

from lumina_assets.core import settings, tables
from lumina_assets.defs import corpus
from resources.arxiv import ArxivResource
from resources.corpus import CorpusResource
from resources.openalex import OpenAlexResource
from resources.parsing import ParsingConfig


def _materialize(corpus_path: str):
    return dg.materialize(
        [corpus.local_papers],
        resources={
            "corpus": CorpusResource(corpus_path=corpus_path),
            "parsing": ParsingConfig(),
            "openalex": OpenAlexResource(),
            "arxiv": ArxivResource(),
        },
        instance=DagsterInstance.ephemeral(),
    )


@pytest.mark.parametrize("kind", ["pdf_folder", "beir", "single_pdf"])
def test_a_corpus_path_that_is_not_utf8_is_taken_with_the_inbox(kind, data_dir, tmp_path, shared_data):
    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/corpus-\xff\xe9")
    os.mkdir(folder)
    if kind == "beir":
        with open(os.path.join(folder, "corpus.jsonl"), "w", encoding="utf-8") as handle:
            handle.write('{"_id": "d1", "title": "Citation graphs", "text": "Graphs of citations."}\n')
        corpus_path = folder
    else:
        shutil.copy(shared_data / "pdfs" / "N18-3011.pdf", os.path.join(folder, "literature graph.pdf"))
        corpus_path = folder if kind == "pdf_folder" else os.path.join(folder, "literature graph.pdf")
    settings.inbox_dir().mkdir(parents=True)
    shutil.copy(shared_data / "pdfs" / "pasa.pdf", settings.inbox_dir() / "pasa.pdf")

    result = _materialize(corpus_path)
    assert result.success
    local = tables.read(tables.LOCAL_PAPERS)
    assert set(local["origin"]) == {
        "inbox",
        f"corpus:{tmp_path}/corpus-\\xff\\xe9" + ("" if kind != "single_pdf" else "/literature graph.pdf"),
    }
    assert "pasa.pdf" in set(local["source_id"]) and len(local) == 2
    for column in ("paper_id", "origin", "local_path", "source_id"):
        for value in local[column].drop_nulls():
            value.encode("utf-8")  # valid UTF-8 throughout
    metadata = result.asset_materializations_for_node("local_papers")[0].metadata
    assert "corpus-\ufffd\ufffd" in metadata["corpus_path"].value


def test_a_corpus_that_cannot_be_read_keeps_the_inbox(data_dir, tmp_path, shared_data):
    settings.inbox_dir().mkdir(parents=True)
    shutil.copy(shared_data / "pdfs" / "pasa.pdf", settings.inbox_dir() / "pasa.pdf")
    missing = os.fsdecode(os.fsencode(str(tmp_path)) + b"/gone-\xff")
    result = _materialize(missing)
    assert result.success
    assert list(tables.read(tables.LOCAL_PAPERS)["source_id"]) == ["pasa.pdf"]
    rejected = tables.read(tables.LOCAL_REJECTED)
    assert list(rejected["reason"]) == ["unreadable_corpus"]


def test_the_demo_names_a_corpus_path_that_is_not_utf8(data_dir, tmp_path, monkeypatch):
    """Before: printing the path raised UnicodeEncodeError (a UTF-8 terminal) before the run started."""
    from lumina_assets.cli import ops, runner

    class Args:
        groups = None

    def run_demo() -> tuple[int, str]:
        terminal = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # strict, as a UTF-8 terminal is
        with contextlib.redirect_stdout(terminal), contextlib.redirect_stderr(terminal):
            code = ops.run_demo(Args())
        terminal.flush()
        return code, terminal.buffer.getvalue().decode("utf-8")

    missing = os.fsdecode(os.fsencode(str(tmp_path)) + b"/gone-\xff")
    monkeypatch.setenv("LUMINA_CORPUS", missing)
    code, printed = run_demo()
    assert code == 2 and "gone-\ufffd does not exist" in printed
    present = os.fsdecode(os.fsencode(str(tmp_path)) + b"/here-\xff")
    os.mkdir(present)
    monkeypatch.setenv("LUMINA_CORPUS", present)
    monkeypatch.setattr(runner, "run_graph", lambda *args, **kwargs: [])
    code, printed = run_demo()
    assert code == 0 and "Offline corpus: " in printed and "here-\ufffd" in printed
