"""`lumina bench parse [DIR]`: parser throughput in pages/s against raw PyMuPDF text extraction, and structure
quality against the GROBID TEI of the same papers (a developer bench, kept in the checkout)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lumina_assets.cli.parse import make_parser
from lumina_assets.parsing.parsers import get_parser


def _parser(name: str, tables: str, grobid_url: str | None):
    """A parser to time; PyMuPDF's table modes are built directly (the combined parser uses the finder)."""
    return get_parser("pymupdf", tables=tables) if name == "pymupdf" else make_parser(name, grobid_url)


def _raw_pages_per_second(files: list[Path], repeat: int) -> tuple[float, int]:
    import pymupdf

    best = float("inf")
    pages = 0
    for _ in range(repeat):
        pages = 0
        started = time.process_time()
        for path in files:
            with pymupdf.open(path) as doc:
                for page in doc:
                    page.get_text()
                    pages += 1
        best = min(best, time.process_time() - started)
    return pages / best, pages


def _parser_pages_per_second(parser, files: list[Path], repeat: int, clock=time.process_time):
    """Best pages/s over `repeat` runs; CPU time for in-process parsers (stable on a shared machine), wall
    time for a parser whose work happens in a server."""
    from lumina_assets.parsing.base import ParseFailure

    best = float("inf")
    pages = 0
    failures: list[str] = []
    for _ in range(repeat):
        pages = 0
        failures = []
        started = clock()
        for path in files:
            try:
                pages += parser.parse(path, path.stem).page_count or 0
            except ParseFailure as failure:
                failures.append(f"{path.name}: {failure.reason}")
                if failure.reason == "parser_unavailable":
                    raise
        best = min(best, clock() - started)
    return pages / best, pages, failures


def bench_parse_command(args) -> int:
    import pymupdf  # noqa: F401  (loads PyMuPDF's layout model once, outside the timings)

    from bench.parse_quality import compare_structure
    from lumina_assets.core import settings
    from lumina_assets.parsing.base import ParserUnavailable
    from lumina_assets.parsing.tei import parse_tei

    folder = Path(args.dir) if args.dir else settings.shared_data_dir() / "pdfs"
    files = sorted(folder.glob("*.pdf"))
    if not files:
        print(f"No PDFs in {folder}: give a folder of PDFs with --dir.", file=sys.stderr)
        return 2
    repeat = max(1, args.repeat)
    variants = [
        ("pymupdf (tables=fast, default)", "pymupdf", "fast"),
        ("pymupdf (tables=finder)", "pymupdf", "finder"),
        ("grobid", "grobid", "fast"),
        ("unstructured", "unstructured", "fast"),
    ]
    if args.variants:
        wanted = {v.strip() for v in args.variants.split(",")}
        variants = [v for v in variants if f"{v[1]}-{v[2]}" in wanted or v[1] in wanted]
    # The in-process PyMuPDF variants are timed interleaved with raw extraction, run after run, so both
    # see the same machine load; the slow ones (table finder, a server, unstructured) run once.
    repeated = [
        (label, _parser(name, tables, None))
        for label, name, tables in variants
        if name == "pymupdf" and tables != "finder"
    ]
    best: dict[str, float] = {label: 0.0 for label, _ in repeated}
    failures: dict[str, list[str]] = {}
    raw_rate = 0.0
    raw_pages = 0
    for _ in range(repeat):
        rate, raw_pages = _raw_pages_per_second(files, 1)
        raw_rate = max(raw_rate, rate)
        for label, parser in repeated:
            rate, _, failed = _parser_pages_per_second(parser, files, 1)
            best[label] = max(best[label], rate)
            failures[label] = failed
    print(f"Parse throughput on {len(files)} PDFs / {raw_pages} pages in {folder}")
    print(f"(pages per CPU second, best of {repeat} interleaved runs; finder / GROBID / unstructured: 1 run,")
    print(" GROBID in wall-clock seconds since its work happens in the server)")
    print(f"  {'extractor':34} {'pages/s':>9} {'vs raw':>8}")
    print(f"  {'raw page.get_text() (reference)':34} {raw_rate:9.1f} {1:8.0%}")
    parsers = dict(repeated)
    for label, name, tables in variants:
        if label in best:
            rate, failed = best[label], failures[label]
        else:
            parser = _parser(name, tables, args.grobid_url)
            clock = time.perf_counter if name == "grobid" else time.process_time
            try:
                rate, _, failed = _parser_pages_per_second(parser, files, 1, clock)
            except ParserUnavailable as exc:
                print(f"  {label:34} {'skipped':>9}  ({exc.detail})")
                continue
            parsers[label] = parser
        note = f"  failures: {', '.join(failed)}" if failed else ""
        print(f"  {label:34} {rate:9.1f} {rate / raw_rate:8.0%}{note}")

    tei_dir = Path(args.tei_dir) if args.tei_dir else settings.shared_data_dir() / "grobid_tei"
    paired = [
        (pdf, tei_dir / f"{pdf.stem}.tei.xml") for pdf in files if (tei_dir / f"{pdf.stem}.tei.xml").exists()
    ]
    if not paired:
        return 0
    print()
    print(f"Structure vs GROBID TEI ({tei_dir}), PyMuPDF parser (default settings):")
    print(f"  {'paper':42} {'titles found':>13} {'share':>7} {'refs found / TEI':>17}")
    parser = parsers.get("pymupdf (tables=fast, default)") or get_parser("pymupdf")
    found = total = refs_found = refs_total = 0
    for pdf, tei in paired:
        reference = parse_tei(tei.read_bytes(), pdf.stem)
        score = compare_structure(parser.parse(pdf, pdf.stem), reference)
        found, total = found + score.titles_found, total + score.reference_titles
        refs_found, refs_total = refs_found + score.entries_found, refs_total + score.reference_entries
        print(
            f"  {pdf.stem[:42]:42} {score.titles_found:>6} / {score.reference_titles:<4} {score.title_recall:7.0%}"
            f" {score.entries_found:>8} / {score.reference_entries:<6}"
        )
    print(
        f"  {'all':42} {found:>6} / {total:<4} {found / total if total else 0:7.0%} {refs_found:>8} / {refs_total:<6}"
    )
    if args.json:
        print(json.dumps({"raw_pages_per_second": raw_rate, "pages": raw_pages}))
    return 0


def add_commands(commands, bench_commands) -> None:
    bench = bench_commands.add_parser(
        "parse", help="parser pages/s vs raw PyMuPDF text, structure vs GROBID TEI"
    )
    bench.add_argument("dir", nargs="?", default=None, help="folder of PDFs (default ../shared/data/pdfs)")
    bench.add_argument(
        "--tei-dir", default=None, help="GROBID TEI of the same papers (default ../shared/data/grobid_tei)"
    )
    bench.add_argument("--repeat", type=int, default=5, help="timed runs per extractor; the best one counts")
    bench.add_argument("--grobid-url", default=None)
    bench.add_argument(
        "--variants", default=None, help="comma list, e.g. pymupdf-fast,pymupdf-finder,grobid (default: all)"
    )
    bench.add_argument("--json", action="store_true")
    bench.set_defaults(handler=bench_parse_command)
