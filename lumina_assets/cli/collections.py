"""`lumina fetch-collection NAME`: a public BEIR collection, downloaded and checked, ready for `LUMINA_CORPUS`."""

from __future__ import annotations

from pathlib import Path

from lumina_assets.cli.messages import fail
from lumina_assets.core import settings
from lumina_assets.corpus import fetch


def _shown(path: Path) -> str:
    """The path as a user would type it from here: relative under the current folder, absolute elsewhere."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def _fetch_collection(args) -> int:
    try:
        if args.url or args.sha256:
            if not (args.url and args.sha256):
                return fail("--url and --sha256 go together: an archive is never unpacked unchecked")
            collection = fetch.KnownCollection(args.name, args.url, sha256=args.sha256)
        else:
            collection = fetch.known_collection(args.name)
    except fetch.FetchError as exc:
        return fail(f"error: {exc}")
    dest = Path(args.dest) if args.dest else settings.data_dir() / "collections"
    target = dest / collection.name
    if target.exists() and not args.replace:
        print(f"{collection.name} is already in {_shown(target)} (--replace to fetch it again)")
    else:
        print(f"Fetching {collection.name} from {fetch.shown_url(collection.url)} ...", flush=True)
        try:
            target = fetch.fetch_collection(collection, dest, replace=args.replace)
        except fetch.FetchError as exc:
            return fail(f"error: {exc}", 1)
        print(f"{collection.name}: {fetch.describe(target)}, checked and unpacked into {_shown(target)}")
    print("Index it and run the pipeline on it:")
    print(f"  LUMINA_CORPUS={_shown(target)} make demo")
    return 0


def add_commands(commands, bench_commands) -> None:
    known = ", ".join(
        f"{c.name} ({c.about})" for c in sorted(fetch.KNOWN_COLLECTIONS.values(), key=lambda c: c.name)
    )
    parser = commands.add_parser(
        "fetch-collection",
        help="download a public BEIR collection (checksum checked) to use as LUMINA_CORPUS",
        description=f"Known collections: {known}.",
    )
    parser.add_argument(
        "name", help=f"one of {', '.join(sorted(fetch.KNOWN_COLLECTIONS))}, or a name for --url"
    )
    parser.add_argument("--dest", default=None, help="parent folder (default: $LUMINA_DATA_DIR/collections)")
    parser.add_argument("--url", default=None, help="another BEIR zip archive (needs --sha256)")
    parser.add_argument("--sha256", default=None, help="the SHA-256 that archive must match")
    parser.add_argument("--replace", action="store_true", help="fetch again over an existing folder")
    parser.set_defaults(handler=_fetch_collection)
