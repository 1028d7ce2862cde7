"""Hostile corpus inputs built in the test: strings that are not UTF-8, unusable ids and titles, ids YAML would
turn into numbers, symbolic links out of the corpus, file names that are not UTF-8, and a TEI with entities."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from lumina_assets.core.schemas import PAPER_FIELDS, rows_to_table
from lumina_assets.corpus.crawl import load_seeds
from lumina_assets.corpus.local import load_beir_papers, load_pdf_folder
from lumina_assets.parsing.base import ParseFailure
from lumina_assets.parsing.tei import parse_tei

NON_UTF8_NAME = os.fsdecode(b"r\xe9sum\xe9 \xff.pdf")  # Latin-1 bytes: not UTF-8, surrogate-escaped


def _write_jsonl(folder, lines: list[bytes]):
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder


def test_beir_records_are_repaired_or_rejected_with_a_reason(tmp_path):
    import pyarrow as pa

    folder = _write_jsonl(
        tmp_path / "beir",
        [
            b'{"_id": "ok-1", "title": "A good title", "text": "A good abstract."}',
            b'{"_id": "latin", "title": "caf\xe9 culture", "text": "Bytes that are not UTF-8."}',
            b'{"_id": "sur", "title": "lone \\ud800 surrogate", "text": "escaped \\udfff too"}',
            b'{"_id": null, "title": "no id", "text": "x"}',
            b'{"_id": "list-title", "title": ["a", "b"], "text": "x"}',
            b'{"_id": "nan-text", "title": "t", "text": NaN}',
            b'{"_id": 2501.10120, "title": "float id", "text": "x"}',
            b'{"_id": 17, "title": "integer id", "text": "x"}',
            b'{"_id": true, "title": "bool id", "text": "x"}',
        ],
    )
    report = load_beir_papers(folder)
    kept = {p.source_id: p for p in report.papers}
    assert set(kept) == {"ok-1", "latin", "sur", "17"}
    assert kept["latin"].title == "caf\ufffd culture"
    assert kept["sur"].title == "lone \ufffd surrogate" and kept["sur"].abstract == "escaped \ufffd too"
    reasons = [(r.paper_id, r.reason) for r in report.rejected]
    assert reasons == [
        ("beir-beir:line-4", "unusable_id"),
        ("beir-beir:line-5", "unusable_title"),
        ("beir-beir:line-6", "unusable_text"),
        ("beir-beir:line-7", "unusable_id"),
        ("beir-beir:line-9", "unusable_id"),
    ]
    assert any("line 2" in r and "not UTF-8" in r for r in report.repairs)
    assert any("line 3" in r and "surrogates" in r for r in report.repairs)
    rows_to_table([p.to_row() for p in report.papers], pa.schema(PAPER_FIELDS))  # Parquet-safe


def test_seed_ids_are_read_as_written(tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(
        "arxiv_ids:\n  - 2501.10120\n  - 2312.10997\n  - '1706.03762'\n"
        "dois:\n  - 10.1000/182\nopenalex_ids:\n  - W2741809807\ncrawl: {depth: 2, max_papers: 10}\n"
        "filters: {require_abstract: false}\n"
    )
    loaded = load_seeds(seeds)
    assert loaded.arxiv_ids == ["2501.10120", "2312.10997", "1706.03762"]  # not 2501.1012
    assert loaded.dois == ["10.1000/182"] and loaded.openalex_ids == ["W2741809807"]
    assert (loaded.depth, loaded.max_papers, loaded.require_abstract) == (2, 10, False)


def test_shipped_seeds_quote_their_ids():
    from lumina_assets.core import settings

    text = (settings.PROJECT_ROOT / "data" / "seeds.yaml").read_text()
    assert '"2501.10120"' in text
    assert "2501.10120" in load_seeds(settings.PROJECT_ROOT / "data" / "seeds.yaml").arxiv_ids


def test_symlinks_out_of_the_corpus_are_skipped_and_reported(tmp_path, shared_data):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(shared_data / "pdfs" / "N18-3011.pdf", outside / "secret.pdf")
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    shutil.copy(shared_data / "pdfs" / "pasa.pdf", corpus / "sub" / "pasa.pdf")
    (corpus / "leak.pdf").symlink_to(outside / "secret.pdf")
    (corpus / "outdir").symlink_to(outside, target_is_directory=True)
    (corpus / "inside.pdf").symlink_to(corpus / "sub" / "pasa.pdf")
    (corpus / "dangling.pdf").symlink_to(tmp_path / "gone.pdf")
    (corpus / "loop").symlink_to(corpus, target_is_directory=True)

    report = load_pdf_folder(corpus)
    assert sorted(p.source_id for p in report.papers) == ["inside.pdf", "pasa.pdf"]
    assert all(p.local_path.startswith(str(corpus.resolve())) for p in report.papers)
    rejected = sorted((r.title, r.reason) for r in report.rejected)
    assert rejected == [
        ("dangling.pdf", "broken_symlink"),
        ("leak.pdf", "symlink_outside_corpus"),
        ("outdir", "symlink_outside_corpus"),
    ]


def test_pdf_with_a_non_utf8_name_is_ingested(tmp_path, shared_data, data_dir):
    import pyarrow as pa

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(shared_data / "pdfs" / "N18-3011.pdf", corpus / NON_UTF8_NAME)
    report = load_pdf_folder(corpus, store_root=data_dir / "pdfs")
    [paper] = report.papers
    assert "Semantic Scholar" in paper.title
    assert paper.source_id == "r\ufffdsum\ufffd \ufffd.pdf"
    paper.local_path.encode("utf-8")  # a name a Parquet table can hold: the copy in the PDF store
    assert os.path.getsize(paper.local_path) == (corpus / NON_UTF8_NAME).stat().st_size
    assert any("not UTF-8" in r for r in report.repairs)
    rows_to_table([paper.to_row()], pa.schema(PAPER_FIELDS))


def test_inbox_sensor_takes_a_non_utf8_name_and_moves_its_cursor(tmp_path, shared_data):
    import dagster as dg

    from sensors.inbox import build_inbox_sensor, evaluate_inbox

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(shared_data / "pdfs" / "N18-3011.pdf", inbox / NON_UTF8_NAME)
    first = evaluate_inbox(inbox, None)
    assert len(first.run_requests) == 1
    assert NON_UTF8_NAME in json.loads(first.cursor)["seen"]
    second = evaluate_inbox(inbox, first.cursor)
    assert not second.run_requests  # taken once; the cursor moved
    # the real sensor definition too, through Dagster's context and cursor handling
    sensor = build_inbox_sensor(settle_seconds=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LUMINA_DATA_DIR", str(tmp_path))
        tick = sensor(dg.build_sensor_context(cursor=None))
        again = sensor(dg.build_sensor_context(cursor=tick.cursor))
    assert len(tick.run_requests) == 1 and not again.run_requests


def test_tei_with_entity_references_is_bad_tei():
    tei = (
        b'<?xml version="1.0"?><!DOCTYPE TEI [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        b'<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader><fileDesc><titleStmt><title>T &b;</title>'
        b"</titleStmt></fileDesc></teiHeader><text><body><div><head>1 Intro &a;</head><p>Para &b;</p></div>"
        b"</body></text></TEI>"
    )
    with pytest.raises(ParseFailure) as info:
        parse_tei(tei, "p")
    assert info.value.reason == "bad_tei"
    undefined = (
        b'<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader/><text><body><p>&nope;</p></body></text></TEI>'
    )
    with pytest.raises(ParseFailure) as info:
        parse_tei(undefined, "p")
    assert info.value.reason == "bad_tei"


def test_a_malformed_openalex_record_is_one_failure_not_a_crashed_crawl():
    from lumina_assets.corpus.crawl import Seeds, crawl_openalex

    class HostileOpenAlex:
        def work(self, identifier):
            if identifier == "10.1/bad":
                return {"id": "https://openalex.org/W1", "title": "t", "authorships": "not a list of dicts"}
            return {"id": "https://openalex.org/W2", "title": "A fine paper", "referenced_works": []}

        def iter_works(self, *args, **kwargs):
            return iter(())

    result = crawl_openalex(HostileOpenAlex(), Seeds(dois=["10.1/bad", "10.1/good"], depth=0))
    assert [p.openalex_id for p in result.papers] == ["W2"]
    assert len(result.failures) == 1 and "seed 10.1/bad: malformed record" in result.failures[0]
