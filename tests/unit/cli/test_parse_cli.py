"""`lumina parse` prints what it claims, on the real files."""

from __future__ import annotations

import json

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
