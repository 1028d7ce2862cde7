"""`lumina alerts add | list | remove | hits`: saved searches whose new results are recorded after every index update
(the `alert_hits` asset, started by the alerts sensor) and served as Atom feeds by `lumina serve`."""

from __future__ import annotations

import sys

from lumina_assets.core.hygiene import terminal_safe
from lumina_assets.search import saved_searches
from lumina_assets.search.request import BadRequest

INTEGER_FILTERS = ("year_min", "year_max")


def parse_filters(pairs: list[str]) -> dict:
    """`tag=reading year_min=2020` -> {"tag": "reading", "year_min": 2020}; BadRequest for a malformed pair."""
    filters: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadRequest(f"--filters takes NAME=VALUE pairs (got {pair!r})")
        if key in INTEGER_FILTERS:
            if not value.strip().lstrip("-").isdigit():
                raise BadRequest(f"{key} must be a year (got {value!r})")
            filters[key] = int(value)
        else:
            filters[key] = value
    return filters


def _print(text: str, **kwargs) -> None:
    """Titles and queries come from papers and users: never a raw escape sequence on the terminal."""
    print(terminal_safe(text), **kwargs)


def _store_guard(handler):
    """An alerts store that cannot be read, or a search it does not hold, is one line saying what to do."""

    def guarded(args) -> int:
        try:
            return handler(args)
        except saved_searches.StoreUnreadable as error:
            _print(f"error: {error}", file=sys.stderr)
        except saved_searches.UnknownSearch:
            _print(f"error: no saved search named {args.name!r} (lumina alerts list)", file=sys.stderr)
        return 1

    return guarded


def _add(args) -> int:
    try:
        filters = parse_filters(args.filters or [])
        name = args.name or saved_searches.name_from_query(args.query)
        search = saved_searches.validate(name, args.query, filters, args.k)
        saved_searches.add(search)
    except BadRequest as error:
        _print(f"error: {error}", file=sys.stderr)
        return 2
    except saved_searches.DuplicateName:
        _print(
            f"error: a saved search named {name!r} exists already (--name to choose another)", file=sys.stderr
        )
        return 1
    print(
        f"saved {search.name!r}: papers that newly enter its top {search.k} are recorded after each index run"
    )
    print(f"  feed: {search.feed_path()} on `lumina serve`; new hits: lumina alerts hits {search.name}")
    return 0


def _list(args) -> int:
    rows = saved_searches.summaries()
    if not rows:
        print('no saved searches (lumina alerts add "QUERY")')
        return 0
    for row in rows:
        filters = " ".join(f"{k}={v}" for k, v in sorted(row["filters"].items()))
        _print(
            f"{row['name']}\tk={row['k']}\tnew={row['new_count']}\t{row['query']!r}"
            + (f"\t{filters}" if filters else "")
        )
    return 0


def _remove(args) -> int:
    saved_searches.remove(args.name)
    _print(f"removed {args.name!r}")
    return 0


def _hits(args) -> int:
    search = saved_searches.get(args.name)
    hits = saved_searches.hits_for(search)
    if not hits:
        _print(f"{search.name}: no hits yet (they are recorded after each index run)")
    for hit in hits[: args.limit]:
        new = "new " if not search.seen_at or hit["found_at"] > search.seen_at else "    "
        title = str(hit.get("title") or hit.get("paper_id") or "?")[:80]
        _print(f"{new}{str(hit.get('found_at'))[:19]}  {hit.get('ingest_batch') or '?'}  {title}")
    if not args.keep_new:
        saved_searches.mark_seen(search.name)
    return 0


def add_commands(commands, bench_commands) -> None:
    alerts = commands.add_parser(
        "alerts", help="saved searches: new papers in their top k after each index run"
    )
    actions = alerts.add_subparsers(dest="alerts_command", required=True)
    add = actions.add_parser("add", help="save a search")
    add.add_argument("query")
    add.add_argument("--name", default=None, help="letters, digits, . _ - (default: from the query)")
    add.add_argument(
        "--filters",
        nargs="*",
        metavar="NAME=VALUE",
        help="year_min=2020 year_max=2024 author=NAME venue=NAME tag=NAME collection=NAME",
    )
    add.add_argument("-k", type=int, default=10, help="how many top papers to watch (1-50, default 10)")
    add.set_defaults(handler=_store_guard(_add))
    listing = actions.add_parser("list", help="saved searches and their new-hit counts")
    listing.set_defaults(handler=_store_guard(_list))
    remove = actions.add_parser("remove", help="forget a saved search and its hits")
    remove.add_argument("name")
    remove.set_defaults(handler=_store_guard(_remove))
    hits = actions.add_parser("hits", help="a saved search's hits, newest first (marks them seen)")
    hits.add_argument("name")
    hits.add_argument("--limit", type=int, default=30)
    hits.add_argument("--keep-new", action="store_true", help="do not mark the hits seen")
    hits.set_defaults(handler=_store_guard(_hits))
