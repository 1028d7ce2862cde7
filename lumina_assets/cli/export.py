"""`lumina export`: a search's results as a citation file (BibTeX, RIS or CSV), as `GET /api/export` gives it."""

from __future__ import annotations

import sys
from pathlib import Path

from lumina_assets.cli.messages import fail
from lumina_assets.core.hygiene import terminal_safe


def add_commands(commands, bench_commands) -> None:
    export = commands.add_parser(
        "export",
        help="a search's results as BibTeX, RIS or CSV (to stdout, or a file with -o)",
        description="Runs the search as `lumina search` does (same filters and limits) and writes its result "
        "list as a citation file: BibTeX or RIS for a reference manager, CSV for a spreadsheet.",
    )
    export.add_argument("query", help="the question or keywords")
    export.add_argument(
        "--format", choices=("bibtex", "ris", "csv"), default="bibtex", help="file format (default bibtex)"
    )
    export.add_argument("-o", "--output", default=None, help="write to this file (default: standard output)")
    export.add_argument("-k", type=int, default=10, help="number of papers (1-50, default 10)")
    export.add_argument("--page", type=int, default=1, help="which page of k papers (default 1)")
    export.add_argument(
        "--sort", choices=("relevance", "date"), default="relevance", help="order (default relevance)"
    )
    export.add_argument("--year-min", type=int, default=None, help="only papers from this year on")
    export.add_argument("--year-max", type=int, default=None, help="only papers up to this year")
    export.add_argument("--author", default=None, help="only papers with an author of this name")
    export.add_argument("--venue", default=None, help="only papers from a venue containing this")
    export.add_argument("--tag", default=None, help="only papers with this tag in your imported library")
    export.add_argument("--collection", default=None, help="only papers in this collection of your library")
    export.add_argument("--db", default=None, help="LanceDB URI (default: settings.lancedb_uri())")
    export.add_argument(
        "--all", action="store_true", help="also the results below the relevance line (less related)"
    )
    export.set_defaults(handler=_export)


def _export(args) -> int:
    from lumina_assets.core import settings
    from lumina_assets.search.citation_export import export
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.request import BadRequest, SearchRequest
    from lumina_assets.search.rerank import configured_search_config
    from lumina_assets.search.results import SearchService
    from lumina_assets.search.stores import IndexModelMismatch, IndexNotBuilt

    fields = {"query": args.query, "k": args.k, "page": args.page, "sort": args.sort, "overview": False}
    fields |= {name: getattr(args, name) for name in ("year_min", "year_max", "author", "venue")}
    fields |= {name: getattr(args, name) for name in ("tag", "collection") if getattr(args, name)}
    try:
        request = SearchRequest.from_mapping(fields)
    except BadRequest as error:
        return fail(f"Cannot export: {error}.")
    uri = args.db or settings.lancedb_uri()
    try:
        config = configured_search_config()
        engine = SearchEngine(uri, config=config, background_loading=False)
        answer = SearchService(lambda: engine, pool_size=1).search(request, use_llm=False)
    except IndexNotBuilt as error:
        return fail(f"No search index yet ({error}): build one with `make demo` first.")
    except (IndexModelMismatch, ValueError) as error:
        return fail(f"Cannot search this index: {error}.")
    from lumina_assets.search.relevance import exported

    answer["results"] = exported(answer["results"], args.all)
    text = export(answer["results"], args.format)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as error:
            return fail(f"Cannot write {args.output}: {error.strerror or error}.", 1)
        print(f"{len(answer['results'])} results written to {args.output} ({args.format})", file=sys.stderr)
    else:
        sys.stdout.write(terminal_safe(text))
    if not answer["results"]:
        print(f"No results ({answer.get('message') or 'nothing matched'}).", file=sys.stderr)
    return 0
