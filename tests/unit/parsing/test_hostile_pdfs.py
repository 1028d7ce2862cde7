"""Hostile PDFs built in the test: a decompression bomb is refused by the decoded-stream limit, and with that
limit off the memory and wall-time limits still end it as one recorded failure, in parsing and in metadata
(local_papers), while the good paper beside it goes through."""

from __future__ import annotations

import time

import hostile
import pytest

from lumina_assets.core.sandbox import Limits
from lumina_assets.corpus.local import load_pdf_folder
from lumina_assets.parsing.batch import parse_all
from lumina_assets.parsing.parsers import get_parser
from lumina_assets.parsing.preflight import PdfLimits


@pytest.fixture
def bomb(tmp_path):
    """~150 KB on disk, 50 MB decoded: unlimited, PyMuPDF takes ~1.5 GB and ~10 s on its one page."""
    path = tmp_path / "bomb.pdf"
    path.write_bytes(hostile.bomb_pdf(50))
    assert path.stat().st_size < 300_000
    return path


def _parse(bomb, good, parser_options, limits):
    parser = get_parser("pymupdf", **parser_options)
    return parse_all(parser, [(str(bomb), "bomb"), (str(good), "good")], workers=1, limits=limits)


def test_decoded_stream_limit_refuses_the_bomb_and_parses_the_good_paper(bomb, shared_data):
    good = shared_data / "pdfs" / "N18-3011.pdf"
    started = time.monotonic()
    (paper, reason, detail, _), (good_paper, good_reason, _, _) = _parse(
        bomb, good, {"max_stream_bytes": 16 * 1024 * 1024}, Limits(wall_seconds=60, memory_mb=1024)
    )
    assert (paper, reason) == (None, "stream_too_large") and "16 MB" in detail
    assert good_reason is None and good_paper.sections
    assert time.monotonic() - started < 30


def test_memory_limit_ends_the_bomb_when_the_stream_check_is_off(bomb, shared_data):
    good = shared_data / "pdfs" / "N18-3011.pdf"
    (paper, reason, _, _), (good_paper, _, _, _) = _parse(
        bomb, good, {"max_stream_bytes": 0}, Limits(wall_seconds=120, memory_mb=300)
    )
    assert (paper, reason) == (None, "memory_limit")
    assert good_paper is not None


def test_wall_time_limit_ends_the_bomb(bomb, shared_data):
    good = shared_data / "pdfs" / "N18-3011.pdf"
    (paper, reason, detail, seconds), (good_paper, _, _, _) = _parse(
        bomb, good, {"max_stream_bytes": 0}, Limits(wall_seconds=1, memory_mb=0)
    )
    assert (paper, reason) == (None, "time_limit") and seconds < 10
    assert good_paper is not None


def test_metadata_of_a_folder_with_a_bomb_keeps_the_good_paper(bomb, shared_data, tmp_path):
    (tmp_path / "N18-3011.pdf").write_bytes((shared_data / "pdfs" / "N18-3011.pdf").read_bytes())
    report = load_pdf_folder(tmp_path, limits=PdfLimits(max_stream_bytes=16 * 1024 * 1024))
    assert [p.source_id for p in report.papers] == ["N18-3011.pdf"]
    assert [(r.title, r.reason) for r in report.rejected] == [("bomb.pdf", "stream_too_large")]
    # with the stream check off, the metadata read does not interpret the bomb's page (over the page content
    # budget, counted without inflating it whole), so it stays within 300 MB; parsing refuses it by its limits
    off = load_pdf_folder(tmp_path, limits=PdfLimits(max_stream_bytes=0, wall_seconds=60, memory_mb=300))
    assert off.rejected == [] and len(off.papers) == 2
    bomb_paper = next(p for p in off.papers if p.source_id == "bomb.pdf")
    assert "page_text:skipped" in bomb_paper.metadata_sources


def test_sparse_2gb_file_starting_with_pdf_is_refused_before_it_is_read(tmp_path):
    sparse = tmp_path / "huge.pdf"
    with sparse.open("wb") as handle:
        handle.write(b"%PDF-1.7\n")
        handle.truncate(2 * 1024**3)
    started = time.monotonic()
    report = load_pdf_folder(tmp_path)
    assert time.monotonic() - started < 5
    assert report.papers == []
    assert [(r.reason, r.title) for r in report.rejected] == [("too_large", "huge.pdf")]
    assert "2147483648 bytes" in report.errors[0]


def test_broken_utf16_title_is_repaired_at_the_edge(tmp_path):
    """PyMuPDF hands a /Title ending in an unpaired surrogate over as lone surrogates; the paper keeps its
    title with U+FFFD and the row can be written to Parquet."""
    import pyarrow as pa

    from lumina_assets.core.schemas import PAPER_FIELDS, rows_to_table

    (tmp_path / "surrogate.pdf").write_bytes(hostile.surrogate_title_pdf())
    report = load_pdf_folder(tmp_path)
    [paper] = report.papers
    assert paper.title.startswith("Broken Title Field") and "\ufffd" in paper.title
    assert rows_to_table([paper.to_row()], pa.schema(PAPER_FIELDS)).num_rows == 1
