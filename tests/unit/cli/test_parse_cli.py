"""`lumina parse` and `lumina bench parse` print what they claim, on the real files."""

from __future__ import annotations

import json
import shutil

from lumina_assets.cli.main import main


def test_parse_command_prints_structure_and_json(shared_data, capsys):
    pdf = shared_data / "pdfs" / "N18-3011.pdf"
    assert main(["parse", str(pdf)]) == 0
    out = capsys.readouterr().out
    assert "Construction of the Literature Graph in Semantic Scholar" in out
    assert "4.4  Entity Linking Models" in out and "27 references" in out
    assert main(["parse", str(pdf), "--json", "--paper-id", "pdf:n18"]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert (
        parsed["paper_id"] == "pdf:n18" and parsed["parser"] == "pymupdf" and len(parsed["references"]) == 27
    )


def test_parse_command_reports_bad_input(tmp_path, capsys):
    bad = tmp_path / "x.pdf"
    bad.write_text("hello")
    assert main(["parse", str(bad)]) == 1
    assert "not parsed (not_pdf)" in capsys.readouterr().err


def test_bench_parse_prints_throughput_and_structure(shared_data, tmp_path, capsys):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    shutil.copy(shared_data / "pdfs" / "N18-3011.pdf", folder)
    code = main(["bench", "parse", str(folder), "--repeat", "1", "--variants", "pymupdf-fast,grobid"])
    assert code == 0
    out = capsys.readouterr().out
    assert "raw page.get_text() (reference)" in out and "pymupdf (tables=fast, default)" in out
    assert "grobid" in out and "skipped" in out  # no GROBID server here: said, not faked
    assert "N18-3011" in out and "12 / 12" in out and "27 / 27" in out
