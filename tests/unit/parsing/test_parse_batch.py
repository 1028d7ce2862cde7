"""The batch parse loop: a process pool gives the same papers as parsing in process, and a file that is not a PDF
is a recorded failure with its reason."""

from __future__ import annotations

from lumina_assets.parsing.batch import parse_all


def test_parse_in_worker_processes_matches_in_process(shared_data, tmp_path):
    from lumina_assets.parsing.parsers import get_parser

    not_pdf = tmp_path / "x.pdf"
    not_pdf.write_text("plain text")
    jobs = [(str(shared_data / "pdfs" / "N18-3011.pdf"), "n18"), (str(not_pdf), "bad")]
    parser = get_parser("pymupdf")
    pooled = parse_all(parser, jobs, workers=2)
    local = parse_all(parser, jobs, workers=1)
    assert pooled[0][0].to_json() == local[0][0].to_json()
    assert pooled[1][:2] == (None, "not_pdf")


def test_parse_progress_counts_every_document(shared_data, tmp_path):
    """The parse loop reports each finished document (pooled workers too), and the last line says all are done."""
    from lumina_assets.core.progress import Progress
    from lumina_assets.core.sandbox import Limits
    from lumina_assets.parsing.parsers import get_parser

    not_pdf = tmp_path / "x.pdf"
    not_pdf.write_text("plain text")
    jobs = [(str(shared_data / "pdfs" / "N18-3011.pdf"), "n18"), (str(not_pdf), "bad")]
    lines: list[str] = []
    progress = Progress("parsing", len(jobs), lines.append, unit="PDFs", every_s=0.0)
    parse_all(get_parser("pymupdf"), jobs, workers=2, limits=Limits(), progress=progress)
    progress.finish()
    assert progress.done == 2
    assert lines[0].startswith("parsing: 1/2 PDFs (50%)")
    assert lines[-1].startswith("parsing: 2/2 PDFs (100%)")
