"""One-line hostile records in a BEIR corpus.jsonl: a line far over the record cap (rejected while it is read,
never held whole), a record nested deeper than the parser goes, and a repeated `_id` (the first record kept, the
rest rejected): each one rejected row with its reason while every other record is kept. Scaled down: a 12 MB
line under a 1 MB cap shows the rule the default 4 MB cap applies to a 500 MB line."""

from __future__ import annotations

import json
import tracemalloc

from lumina_assets.corpus.collections import (
    MAX_RECORD_BYTES,
    MAX_RECORD_DEPTH,
    iter_corpus_records,
    read_corpus,
)
from lumina_assets.corpus.local import load_beir_papers

GOOD = [
    {"_id": "a", "title": "Citation graphs", "text": "Graphs of citations train embeddings."},
    {"_id": "b", "title": "Protein folding", "text": "Attention predicts contacts."},
]
MB = 1024 * 1024


def _corpus(tmp_path, lines: list[bytes]):
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder


def _line(record: dict) -> bytes:
    return json.dumps(record).encode()


def test_a_line_over_the_record_cap_is_rejected_without_reading_it_whole(tmp_path):
    """Before: every line was read whole (one 500 MB line: 5.1 GB, then MemoryError and a pyo3 panic, the
    whole corpus lost)."""
    huge = b'{"_id": "huge", "title": "t", "text": "' + b"x" * (12 * MB) + b'"}'
    folder = _corpus(tmp_path, [_line(GOOD[0]), huge, _line(GOOD[1])])
    tracemalloc.start()
    try:
        found = list(iter_corpus_records(folder, max_record_bytes=1 * MB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(n, r["_id"] if r else None, p.reason if p else None) for n, r, p in found] == [
        (1, "a", None),
        (2, None, "record_too_large"),
        (3, "b", None),
    ]
    assert "12,582,9" in str(found[1][2]) and "1,048,576 byte record cap" in str(found[1][2])
    assert peak < 4 * MB  # one capped read and 1 MB steps, never the 12 MB line (read whole: 36 MB and more)


def test_the_default_cap_through_the_corpus_loader(tmp_path):
    huge = b'{"_id": "huge", "title": "t", "text": "' + b"y" * (MAX_RECORD_BYTES + 10) + b'"}'
    report = load_beir_papers(_corpus(tmp_path, [_line(GOOD[0]), huge, _line(GOOD[1])]))
    assert [p.source_id for p in report.papers] == ["a", "b"]
    assert [(r.paper_id, r.reason) for r in report.rejected] == [("beir-beir:line-2", "record_too_large")]


def test_a_record_nested_too_deep_is_rejected_and_the_rest_kept(tmp_path):
    """Before: json.loads raised RecursionError (only JSONDecodeError was caught): the whole corpus was lost."""
    abyss = b'{"_id": "abyss", "title": "t", "text": "x", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    deep = _line({"_id": "deep", "title": "t", "text": "x", "meta": json.loads("[" * 40 + "]" * 40)})
    shallow = _line({"_id": "ok", "title": "t", "text": "x", "meta": {"a": [{"b": 1}]}})
    report = load_beir_papers(_corpus(tmp_path, [_line(GOOD[0]), abyss, deep, shallow, _line(GOOD[1])]))
    assert [p.source_id for p in report.papers] == ["a", "ok", "b"]
    assert [r.reason for r in report.rejected] == ["too_deep", "too_deep"]
    assert f"deeper than {MAX_RECORD_DEPTH}" in report.errors[0]


def test_a_repeated_id_keeps_the_first_record_and_rejects_the_rest(tmp_path):
    """Before (a regression): the later record silently replaced the first, with no rejected_papers row."""
    first = {"_id": "a", "title": "The first record", "text": "kept"}
    again = {"_id": "a", "title": "A later record", "text": "rejected"}
    numeric = {"_id": 7, "title": "Seven", "text": "an integer id"}
    same_as_string = {"_id": "7", "title": "Seven again", "text": "the same id written as a string"}
    folder = _corpus(
        tmp_path, [_line(first), _line(GOOD[1]), _line(again), _line(numeric), _line(same_as_string)]
    )
    report = load_beir_papers(folder)
    assert [(p.source_id, p.title) for p in report.papers] == [
        ("a", "The first record"),
        ("b", "Protein folding"),
        ("7", "Seven"),
    ]
    assert [(r.paper_id, r.reason) for r in report.rejected] == [
        ("beir-beir:line-3", "duplicate_id"),
        ("beir-beir:line-5", "duplicate_id"),
    ]
    assert "first on line 1" in report.errors[0]
    corpus = read_corpus(folder)  # evaluation reads the same way: the first record of an id
    assert corpus["a"]["title"] == "The first record" and len(corpus) == 3
