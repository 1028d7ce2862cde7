"""`lumina bench parse` prints throughput and structure against GROBID TEI, on the real files."""

from __future__ import annotations

import shutil

from lumina_assets.cli.main import main


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
