"""`lumina search` (its benches are `bench/search.py`)."""

from __future__ import annotations

import json
import sys
import textwrap

from lumina_assets.cli.messages import BUILD_INDEX, fail, lumina_command
from lumina_assets.core.hygiene import terminal_safe


def add_commands(commands, bench_commands) -> None:
    search = commands.add_parser(
        "search", help="search the passage index: ranked papers with pinpointed passages"
    )
    search.add_argument(
        "query", help="the question or keywords (authors / years understood: 'by Smith after 2019')"
    )
    search.add_argument(
        "-k",
        type=int,
        default=10,
        help="how many papers to show, each with its best passages (default 10, at most 50)",
    )
    search.add_argument(
        "--json", action="store_true", help="print the papers (passages, scores) as one JSON array"
    )
    search.add_argument("--db", default=None, help="LanceDB URI (default: settings.lancedb_uri())")
    search.add_argument(
        "--explain",
        action="store_true",
        help="also print the configuration the search ran with and what of it was set explicitly",
    )
    search.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="evidence in bold (ANSI) on a terminal (auto), or [[marked]] in plain text (never)",
    )
    search.add_argument(
        "--server",
        default="http://127.0.0.1:8765",
        help="a running `lumina serve` to ask first (default http://127.0.0.1:8765); used only when it serves the "
        "same index, otherwise the search runs in this process",
    )
    search.add_argument(
        "--in-process", action="store_true", help="always search in this process (never ask a server)"
    )
    search.set_defaults(handler=_search)


def _search(args) -> int:
    from lumina_assets.core import settings
    from lumina_assets.search.request import MAX_K

    if not args.query.strip():
        return fail(f'Nothing to search for: give a query, e.g. {lumina_command()} search "your question"')
    if not 1 <= args.k <= MAX_K:
        return fail(f"-k counts papers: give 1 to {MAX_K} (got {args.k})")
    uri = args.db or settings.lancedb_uri()
    if not args.in_process:
        asked = ask_server(args.server, uri, args.query, args.k)
        if isinstance(asked, str):
            return fail(f"Cannot search: {asked}.")
        if asked is not None:
            return _print_answer(asked, args)
    from lumina_assets.search.engine import SearchEngine  # the model and index load only from here on
    from lumina_assets.search.request import BadRequest, SearchRequest
    from lumina_assets.search.rerank import configured_search_config
    from lumina_assets.search.results import SearchService
    from lumina_assets.search.stores import IndexModelMismatch, IndexNotBuilt

    config = configured_search_config()
    answer = None
    try:
        engine = SearchEngine(uri, config=config, background_loading=False)
        if args.json:  # the engine's contexts, those above the relevance line first
            from lumina_assets.search.relevance import line_for, partition, relevance_scores

            contexts = engine.search(args.query, k=args.k)
            contexts = sum(
                partition(contexts, relevance_scores(engine, contexts), line_for(engine.embedder)), []
            )
        else:  # the API's view of the search: metadata, sections, pages, highlighted evidence, explained scores
            service = SearchService(lambda: engine, pool_size=1)
            answer = service.search(
                SearchRequest.from_mapping({"query": args.query, "k": args.k, "overview": False})
            )
            contexts = answer["results"]
    except BadRequest as error:
        return fail(f"Cannot search: {error}.")
    except IndexModelMismatch as error:
        return fail(f"Cannot search this index: {error}.")
    except IndexNotBuilt as error:
        return fail(f"No search index yet ({error}): {BUILD_INDEX}.")
    message = engine.last_trace.message
    explain = engine.config.explain() if args.explain else None
    found = [c.to_dict() for c in contexts] if args.json else contexts
    return _print(args, found, answer, message, explain)


def _print_answer(answer: dict, args) -> int:
    """A running server's answer as `lumina search` prints it (text, or with --json the contexts format)."""
    found = answer["results"]
    if args.json:
        found = [
            {
                "title": r["title"],
                "chunks": [p["text"] for p in r["passages"]],
                "doi": r.get("doi"),
                "url": r.get("url"),
                "paper_id": r["paper_id"],
                "score": r["score"],
                "passage_ids": [p["passage_id"] for p in r["passages"]],
            }
            for r in found
        ]
    return _print(args, found, answer, answer.get("message"), answer.get("explain") if args.explain else None)


def _print(args, found: list, answer: dict | None, message: str | None, explain: dict | None) -> int:
    """The results (with --json, `found` as JSON), or why there are none; then the effective configuration."""
    if args.json:
        body = {"results": found, "explain": explain} if explain else found
        print(terminal_safe(json.dumps(body, ensure_ascii=False)))
        return 0
    if not found:
        print(terminal_safe(f"No results ({message or 'nothing matched'})."))
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        print(terminal_safe(render_results(answer, color=color), keep_colors=color))
    if explain:
        print(terminal_safe(render_explain(explain)))
    return 0


def render_explain(explain: dict) -> str:
    """The configuration a search ran with, in lines: what was set explicitly, then every field."""
    config, explicit = explain["config"], explain.get("explicit") or []
    lines = ["Search configuration:", f"  set explicitly: {', '.join(explicit) or 'nothing (the defaults)'}"]
    fields = ", ".join(f"{k}={v}" for k, v in config.items())
    lines.append(textwrap.fill(fields, 110, initial_indent="  fields: ", subsequent_indent="    "))
    return "\n".join(lines)


def ask_server(base: str, uri: str, query: str, k: int, timeout: float = 60.0) -> dict | str | None:
    """The answer of a running `lumina serve` on the same index, its refusal as a message, or None when no such
    server answers (search in process). A GET: the server never calls an LLM for one."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from lumina_assets.search.request import index_key

    base = base.rstrip("/")
    if not base.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]")):
        return None  # only a server on this machine: the query stays here
    try:
        with urllib.request.urlopen(f"{base}/api/health", timeout=0.5) as response:
            health = json.loads(response.read())
        if health.get("index_key") != index_key(uri) or health.get("index") != "ready":
            return None
        fields = urllib.parse.urlencode({"q": query, "k": k, "overview": "false"})
        with urllib.request.urlopen(f"{base}/api/search?{fields}", timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        if 400 <= error.code < 500:
            try:
                return str(json.loads(error.read()).get("error") or error)
            except (ValueError, AttributeError):
                return str(error)
        return None
    except (OSError, ValueError):  # nothing listening, too slow, or not a Lumina server
        return None


def render_results(answer: dict, *, color: bool = False, width: int = 400) -> str:
    """`lumina search`'s text: per result its metadata, the score explained, and per passage where it is (kind,
    section, pages) with its evidence sentences in bold (`color`) or [[marked]]."""
    bold, dim, off = ("\x1b[1m", "\x1b[2m", "\x1b[0m") if color else ("", "", "")
    lines = _understood(answer)
    divided = False
    for result in answer["results"]:
        if result.get("matching") is False and not divided:
            divided = True
            lines.append(f"{dim}── less related (below the relevance line) ──{off}")
        lines.append(f"{result['rank']:>2}. {bold}{result['title']}{off}")
        lines.append(f"    {' · '.join(_meta(result))}")
        lines.append(f"    {dim}{_explain(result)}{off}")
        for passage in result["passages"]:
            lines.append(f"    [{passage['number']}] {' · '.join(_where(passage))}")
            text = _marked(passage["text"], passage["highlights"], bold, off, color)
            if len(passage["text"]) > width and not passage["highlights"]:
                text = passage["text"][: width - 1] + "…"
            lines.append(f"    > {text}")
    scored = "meaning (MiniLM cosine), query-word coverage and role (findings over background and methods)"
    lines.append(
        f"{dim}score: the fused retriever score (comparable within this search only); "
        f"evidence: sentences ranked by {scored}, shown {'in bold' if color else 'in [[ ]]'}{off}"
    )
    return "\n".join(lines)


def _understood(answer: dict) -> list[str]:
    """What the query parser understood (each constraint, a filter or a boost) and how many papers match."""
    lines = []
    for item in answer.get("constraints", []):
        value = item["value"]
        if isinstance(value, dict):
            value = f"{value.get('min') or '…'}–{value.get('max') or '…'}"
        how = "filter (strict)" if item["mode"] == "filter" else f"boost only; `{item['as_filter']}` filters"
        lines.append(f"understood: {item['kind']} {value}: {how}")
    if answer.get("relevance_line") is not None:
        count = answer.get("matching", 0)
        more = "" if answer.get("matching_complete", True) else "+"
        lines.append(f"{count}{more} {'paper matches' if count == 1 else 'papers match'}")
    return lines


def _meta(result: dict) -> list[str]:
    """Authors (three, then et al.), year, venue and a link: the DOI, else the URL, else the paper id."""
    meta = []
    if result.get("authors"):
        names = result["authors"]
        meta.append(", ".join(names[:3]) + (" et al." if len(names) > 3 else ""))
    meta += [str(v) for v in (result.get("year"), result.get("venue")) if v]
    link = result.get("doi") and f"doi:{result['doi']}" or result.get("url") or result["paper_id"]
    return [*meta, link]


def _where(passage: dict) -> list[str]:
    where = [passage.get("kind") or "text"]
    number, title = passage.get("section_number") or "", passage.get("section_title") or ""
    if number.lower() == title.lower() or number.lower() == where[0].lower():
        number = ""  # e.g. an abstract: "§ Abstract", not "§ abstract Abstract"
    if number or title:
        where.append(f"§ {number} {title}".replace("  ", " ").strip())
    start, end = passage.get("page_start"), passage.get("page_end")
    if start is not None:
        where.append(f"p. {start}" if end in (None, start) else f"pp. {start}–{end}")
    return where


def _explain(result: dict) -> str:
    explanation = result["explanation"]
    found = ", ".join(f["label"] for f in explanation["found_by"]) or "—"
    parts = [f"score {result['score']:.3f} ({explanation['fusion']} fusion) · found by {found}"]
    if result.get("relevance") is not None:
        parts.append(f"relevance {result['relevance']:.2f}")
    if explanation["boosts"]:
        parts.append("boosts: " + ", ".join(explanation["boosts"]))
    if explanation.get("best_evidence_score") is not None:
        parts.append(f"best evidence {explanation['best_evidence_score']:.2f}")
    return " · ".join(parts)


def _marked(text: str, highlights: list[dict], bold: str, off: str, color: bool) -> str:
    opening, closing = (bold, off) if color else ("[[", "]]")
    out, cursor = [], 0
    for mark in sorted(highlights, key=lambda h: h["start"]):
        out += [text[cursor : mark["start"]], opening, text[mark["start"] : mark["end"]], closing]
        cursor = mark["end"]
    out.append(text[cursor:])
    return "".join(out)
