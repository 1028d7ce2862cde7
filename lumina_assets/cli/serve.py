"""`lumina serve`: the search API and web page."""

from __future__ import annotations

import sys
import threading

from lumina_assets.cli.messages import BUILD_INDEX, fail


def add_commands(commands, bench_commands) -> None:
    serve = commands.add_parser(
        "serve", help="the search API and web page (http://127.0.0.1:8765 by default)"
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)"
    )
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name requests may carry besides the loopback names and the bound address (repeatable; "
        "e.g. the machine's name when listening on 0.0.0.0; `*` turns the check off, only behind a proxy that "
        "checks it)",
    )
    serve.add_argument("--db", default=None, help="LanceDB URI (default: settings.lancedb_uri())")
    serve.add_argument("--engines", type=int, default=4, help="concurrent searches (engine pool size)")
    serve.add_argument(
        "--no-llm", action="store_true", help="extractive overview even when an LLM is configured"
    )
    serve.add_argument(
        "--no-sentence-backfill",
        action="store_true",
        help="do not store missing sentence vectors in the background (evidence is then encoded per request)",
    )
    serve.set_defaults(handler=_serve_then_exit)


def build_service(uri: str, *, engines: int, use_llm: bool):
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.rerank import configured_search_config
    from lumina_assets.search.results import SearchService

    embedder = Embedder()
    llm = None
    if use_llm:
        try:
            from lumina_assets.cli.llm_client import env_llm_client

            client = env_llm_client("question_llm")
            llm = None if client.is_offline else client
        except Exception as error:  # no LLM: the extractive overview, labelled
            print(f"overview LLM unavailable ({error}): extractive overviews", file=sys.stderr)
    config = configured_search_config()  # the reranker LUMINA_RERANK_MODEL names, as `lumina search` uses it
    return SearchService(
        lambda: SearchEngine(uri, embedder, config, reload_in_background=True),
        pool_size=engines,
        llm_client=llm,
    )


def _store_missing_sentence_vectors(uri: str) -> None:
    """Stores the sentence vectors the index lacks while the server answers (until then evidence sentences are
    encoded per request); an index that has them all costs one hash check."""
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.indexing.sentence_vectors import backfill_from_index

    def say(line: str) -> None:
        print(f"[sentence vectors] {line}", file=sys.stderr, flush=True)

    try:
        found = backfill_from_index(connect_lancedb(uri), Embedder(), log_fn=say)
    except (OSError, RuntimeError, ValueError) as error:  # the server keeps answering, encoding per request
        say(f"not stored ({type(error).__name__}: {error}); evidence sentences stay encoded per request")
        return
    if found["encoded_passages"]:
        say(f"stored for {found['encoded_passages']} passages in {found['seconds']} s")


def _serve(args) -> int:
    import uvicorn

    from lumina_assets.core import settings
    from lumina_assets.search.api import LOOPBACK_HOSTS, create_app
    from lumina_assets.search.memory_store import empty_index_message
    from lumina_assets.search.stores import IndexModelMismatch, IndexNotBuilt

    unavailable = unavailable_address(args.host, args.port)
    if unavailable:
        return fail(f"Cannot listen on {args.host}:{args.port}: {unavailable}.")
    uri = args.db or settings.lancedb_uri()
    service = build_service(uri, engines=args.engines, use_llm=not args.no_llm)
    try:
        service.warm_up()
    except IndexNotBuilt as error:
        return fail(f"No search index yet ({error}): {BUILD_INDEX}.")
    except IndexModelMismatch as error:
        return fail(f"Cannot serve this index: {error}")
    if service.store().empty():
        print(f"warning: {empty_index_message()}", file=sys.stderr)
    hosts = allowed_hosts(args.host, args.allow_host)
    if args.host not in LOOPBACK_HOSTS:
        print(
            f"warning: listening on {args.host}: reachable from other machines; requests must name one of "
            f"{', '.join(hosts)} (--allow-host adds one)",
            file=sys.stderr,
        )
    if not args.no_sentence_backfill:
        threading.Thread(
            target=_store_missing_sentence_vectors, args=(uri,), name="lumina-sentence-backfill", daemon=True
        ).start()
    elif service.scorer.stored is None or service.scorer.stored.lookup_table() is None:
        print("no stored sentence vectors: evidence sentences are encoded per request", file=sys.stderr)
    print(f"Lumina search on http://{args.host}:{args.port}/  (index {uri}; Ctrl-C stops)", flush=True)
    uvicorn.run(
        create_app(service, allowed_hosts=hosts),
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    return 0


GRACE_SECONDS = 1  # after Ctrl-C, open requests get this long before their connections are closed


def _serve_then_exit(args) -> int:
    """`lumina serve`, then exit at once: a search still running in a worker thread is abandoned rather than
    joined, so Ctrl-C ends the server within GRACE_SECONDS (a background sentence-vector store is cut between
    commits)."""
    import os

    code = _serve(args)
    if code:  # refused before serving: nothing to abandon
        return code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def unavailable_address(host: str, port: int) -> str | None:
    """Why the server could not listen on host:port and what to change, or None (checked before anything loads)."""
    import errno
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((host, port))
    except OverflowError:
        return "no such port; `--port` takes 1-65535"
    except OSError as error:
        reason = error.strerror or str(error)
        if error.errno == errno.EADDRINUSE:
            return f"{reason}; `--port` picks another"
        return f"{reason}; `--host` takes an address of this machine"
    return None


def allowed_hosts(bound: str, extra: list[str]) -> list[str]:
    """The names a request's Host header may carry: the loopback names, the bound address unless a wildcard, and
    every `--allow-host`."""
    from lumina_assets.search.api import LOOPBACK_HOSTS

    names = [*LOOPBACK_HOSTS]
    if bound not in ("0.0.0.0", "::", ""):
        names.append(bound)
    return list(dict.fromkeys([*names, *extra]))
