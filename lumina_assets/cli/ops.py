"""`lumina demo`: the main job end to end, and `lumina status`: what the tables hold."""

import re
import time

from lumina_assets.cli.messages import fail, lumina_command
from lumina_assets.core import settings, tables
from lumina_assets.core.hygiene import display_name, path_text

SUMMARY_KEYS = (
    "papers", "new_papers", "rejected", "failures", "pdfs", "parsed", "passages", "rows", "questions",
    "skipped", "http_cache_hits", "http_requests", "new_hits",
)  # fmt: skip
DETAIL_KEYS = ("failure_details", "failed_files")


def _print_start(assets: list[str], partition: str | None, job: str | None) -> None:
    where = f" [{partition}]" if partition else ""
    print(f"  ...    {job or 'run'}{where}: {', '.join(assets)}", flush=True)


def _print_step(report) -> None:
    where = f" [{report.partition}]" if report.partition else ""
    status = "ok" if report.success else "FAILED"
    job = f"{report.job}: " if report.job else ""
    print(f"  {status:6} {job}{', '.join(report.assets)}{where}  ({report.seconds:.1f}s)")
    for asset, metadata in report.metadata.items():
        shown = {k: v for k, v in metadata.items() if k in SUMMARY_KEYS}
        if shown:
            print(f"         {asset}: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
        for key in DETAIL_KEYS:
            _print_details(metadata.get(key))
    for check in report.failed_checks:
        print(f"         check failed: {check}")
    if report.error:
        print(f"         error: {report.error}")


def _print_details(value, limit: int = 8) -> None:
    """The first lines of a markdown list of failed items (which file, which reason)."""
    if not isinstance(value, str):
        return
    lines = [line.strip() for line in value.splitlines() if line.strip().startswith("- ")]
    for line in lines[:limit]:
        print(f"           {line[:160]}")
    if len(lines) > limit:
        print(f"           ... {len(lines) - limit} more (see the asset metadata)")


def run_demo(args) -> int:
    from lumina_assets.cli.runner import instance as project_instance
    from lumina_assets.cli.runner import network_available, run_graph

    corpus = settings.get().paths.corpus
    if corpus is not None and not corpus.exists():
        return fail(
            f"LUMINA_CORPUS={display_name(corpus)} does not exist: point it at a folder of PDFs or a BEIR directory."
        )
    if corpus is None:
        if not network_available():
            return fail(
                "Offline and LUMINA_CORPUS is not set: the demo crawls OpenAlex and arXiv by default.\n"
                "Run it offline on a local corpus instead, e.g.\n"
                "  LUMINA_CORPUS=/path/to/your/pdfs make demo       (a folder of PDFs)\n"
                "  .venv/bin/lumina fetch-collection scifact        (then the LUMINA_CORPUS line it prints)"
            )
        print(f"Crawling the seeds in {settings.get().paths.seeds} (OpenAlex needs OPENALEX_API_KEY).")
    else:
        print(f"Offline corpus: {display_name(corpus)}")  # a path that is not UTF-8 cannot be printed as is

    from lumina_assets.definitions import defs

    instance = project_instance()
    started = time.perf_counter()
    groups = args.groups.split(",") if args.groups else None
    reports = run_graph(
        defs, instance, groups=groups, on_step=_print_step, on_start=_print_start, terminal=True
    )
    elapsed = time.perf_counter() - started
    failed = [r for r in reports if not r.success]
    print()
    print(f"Done in {elapsed:.0f}s: {len(reports) - len(failed)} of {len(reports)} runs succeeded.")
    _print_status()
    print(f"Data: {settings.data_dir()}   Dagster home: {instance.root_directory}")
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True, exist_ok=True)
    print(
        f"New papers: drop PDFs into {inbox} while `make ui` runs; the inbox sensor and the automation index them."
    )
    print()
    print(next_steps())
    return 1 if failed else 0


def next_steps() -> str:
    """The commands to use the demo's result: search in the terminal, the web page, the Dagster UI."""

    lumina = lumina_command()
    ui = (
        "make ui",
        f"the Dagster UI: runs, lineage, checks on http://127.0.0.1:{settings.get().orchestration.ui_port}/",
    )
    query = example_query()
    if query is None:
        return (
            "No search index yet (see the steps above): nothing to search. The runs are in the Dagster UI:\n  "
            + ui[0]
        )
    lines = [
        (f'{lumina} search "{query}"', "search from the terminal"),
        (f"{lumina} serve", "the search page on http://127.0.0.1:8765/"),
        ui,
    ]
    width = max(len(command) for command, _ in lines)
    return "\n".join(["Next:", *(f"  {command:{width}}   # {what}" for command, what in lines)])


def example_query(words: int = 6) -> str | None:
    """A query the index answers: the first words of an indexed title, letters and digits only (safe inside double
    quotes in any shell); None without an index."""
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.lancedb_tables import PAPERS_TABLE
    from lumina_assets.indexing.table_ops import open_table

    try:
        table = open_table(connect_lancedb(settings.lancedb_uri()), PAPERS_TABLE)
        rows = [] if table is None else table.search().select(["title"]).limit(20).to_list()
    except Exception:  # an index that cannot be read: no example to give
        return None
    titles = sorted(" ".join(re.findall(r"[^\W_][\w-]*", str(row.get("title") or ""))) for row in rows)
    titles = [t for t in titles if t]
    return " ".join(titles[0].split()[:words]) if titles else None


def index_status() -> str:
    """The index's passage and paper counts and when it last changed."""
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.lancedb_tables import PAPERS_TABLE, PASSAGES_TABLE
    from lumina_assets.indexing.table_ops import open_table

    try:
        db = connect_lancedb(settings.lancedb_uri())
        passages, papers = open_table(db, PASSAGES_TABLE), open_table(db, PAPERS_TABLE)
        if passages is None or papers is None:
            return "search index: not built yet (passage_index builds it)"
        changed = passages.list_versions()[-1]["timestamp"]
        return (
            f"search index: {passages.count_rows()} passages of {papers.count_rows()} papers, "
            f"last changed {changed:%Y-%m-%d %H:%M:%S}"
        )
    except Exception as error:  # noqa: BLE001 - status reports, never fails on an unreadable index
        return f"search index: unreadable ({type(error).__name__}: {str(error)[:120]})"


def search_config_status() -> str:
    """The configuration a search process runs with by default."""
    from lumina_assets.cli.search import render_explain
    from lumina_assets.search.config import SearchConfig

    explain = SearchConfig().explain()
    return "\n".join(f"  {line}" for line in render_explain(explain).splitlines())


def _print_status() -> None:
    for spec in (
        tables.PAPERS,
        tables.REJECTED_PAPERS,
        tables.CITATION_EDGES,
        tables.PDF_FILES,
        tables.PARSED_PAPERS,
        tables.PASSAGES,
    ):
        frame = tables.read_all(spec)
        if frame is not None:
            print(f"  {spec.name}: {frame.height} rows")
    print(f"  {index_status()}")
    print(search_config_status())
    chosen = settings.from_environment()
    shown = ", ".join(f"{k}={path_text(str(v))}" for k, v in chosen.items())  # a path may not be UTF-8
    print(f"  settings from the environment: {shown or 'none'}")
    reports = sorted(settings.reports_dir().glob("*.md")) if settings.reports_dir().exists() else []
    for report in reports[-3:]:
        print(f"  report: {report}")


def run_status(args) -> int:
    if tables.read_all(tables.PAPERS) is None:
        return fail(
            f"No corpus tables yet in {settings.data_dir()}: `make demo` builds them "
            "(offline, on your papers: `LUMINA_CORPUS=/path/to/pdfs make demo`).",
            1,
        )
    _print_status()
    return 0


def add_commands(commands, bench_commands) -> None:
    demo = commands.add_parser(
        "demo", help="run the whole asset graph (live crawl, or LUMINA_CORPUS offline)"
    )
    demo.add_argument("--groups", default="", help="comma-separated asset groups (default: all)")
    demo.set_defaults(handler=run_demo)
    status = commands.add_parser("status", help="row counts of the corpus tables")
    status.set_defaults(handler=run_status)
