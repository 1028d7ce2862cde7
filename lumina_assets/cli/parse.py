"""`lumina parse PDF`: parse one file, in a limited child process as the pipeline does, and show its structure."""

from __future__ import annotations

from pathlib import Path

from lumina_assets.cli.messages import fail
from lumina_assets.core.sandbox import DEFAULT_MEMORY_MB, DEFAULT_WALL_SECONDS

PARSER_CHOICES = ("pymupdf", "grobid", "unstructured", "combined")


def make_parser(name: str, grobid_url: str | None):
    from lumina_assets.parsing.parsers import get_parser

    if name == "grobid":
        return get_parser("grobid", grobid_url=grobid_url)
    if name == "combined":
        return get_parser("combined", parser_options={"grobid": {"grobid_url": grobid_url}})
    return get_parser(name)


def parse_command(args) -> int:
    """Parse in a limited child process, as the pipeline does: a decompression bomb ends as a reason
    (`stream_too_large`, `memory_limit`, `time_limit`) instead of taking the machine's memory."""
    from lumina_assets.core.sandbox import Limits
    from lumina_assets.parsing.batch import limited_parse, timed_parse

    path = Path(args.pdf).resolve()
    parser = make_parser(args.parser, args.grobid_url)
    if args.max_stream_mb is not None and hasattr(parser, "max_stream_bytes"):
        parser.max_stream_bytes = int(args.max_stream_mb * 1024 * 1024)
    paper_id = args.paper_id or path.stem
    peaks: list[float] = []
    if args.no_limits:
        paper, reason, detail, elapsed = timed_parse(parser, str(path), paper_id)
    else:
        limits = Limits(wall_seconds=args.timeout, memory_mb=args.max_memory_mb)
        paper, reason, detail, elapsed = limited_parse(parser, str(path), paper_id, limits, peaks)
    worker = f", worker peak {peaks[0]:.0f} MB" if peaks else ""
    if paper is None:
        return fail(f"{path.name}: not parsed ({reason}) {detail or ''} [{elapsed:.2f}s{worker}]", 1)
    if args.json:
        print(paper.to_json())
        return 0
    print(f"{paper.title or path.name}")
    print(f"  parser {paper.parser}, {paper.page_count} pages in {elapsed:.2f}s{worker}")
    if paper.abstract:
        print(f"  abstract: {paper.abstract[:200]}{'…' if len(paper.abstract) > 200 else ''}")
    print(f"  {len(paper.sections)} sections:")
    for section in paper.sections:
        pages = f"p{section.page_start}-{section.page_end}" if section.page_start else ""
        print(f"    {section.number:>6}  {section.title[:70]:70}  {pages:>7}  {len(section.text):>6} chars")
    resolved = sum(1 for c in paper.citations if c.ref_id)
    print(
        f"  {len(paper.references)} references, {len(paper.citations)} in-text citations ({resolved} resolved)"
    )
    for element in paper.elements:
        text = (element.caption or element.content).replace("\n", " / ")
        print(f"    {element.kind:8} {element.label or '':10} p{element.page}  {text[:80]}")
    return 0


def add_commands(commands, bench_commands) -> None:
    parse = commands.add_parser("parse", help="parse one PDF and print its sections, references and elements")
    parse.add_argument("pdf", help="path of a PDF file")
    parse.add_argument("--parser", choices=PARSER_CHOICES, default="pymupdf")
    parse.add_argument(
        "--grobid-url", default=None, help="GROBID server (default $GROBID_URL or localhost:8070)"
    )
    parse.add_argument("--paper-id", default=None)
    parse.add_argument("--json", action="store_true", help="print the ParsedPaper as JSON")
    parse.add_argument(
        "--timeout", type=float, default=DEFAULT_WALL_SECONDS, help="wall seconds for the file"
    )
    parse.add_argument(
        "--max-memory-mb", type=int, default=DEFAULT_MEMORY_MB, help="memory the file may take (0 = no limit)"
    )
    parse.add_argument(
        "--max-stream-mb", type=float, default=None, help="decoded size a PDF stream may reach (default 32)"
    )
    parse.add_argument("--no-limits", action="store_true", help="parse in this process, without limits")
    parse.set_defaults(handler=parse_command)
