"""`lumina bench alerts`: the alerts store timed at its caps (saved searches x hits) in a scratch data folder."""

from __future__ import annotations

from pathlib import Path

from lumina_assets.search import saved_searches


def add_commands(commands, bench_commands) -> None:
    bench = bench_commands.add_parser(
        "alerts",
        help="time the alerts store at its caps (saved searches x hits): page load, list, feed, an alert run",
    )
    bench.add_argument("--searches", type=int, default=saved_searches.MAX_SEARCHES)
    bench.add_argument("--hits", type=int, default=saved_searches.MAX_HITS_PER_SEARCH, help="per search")
    bench.add_argument("--known", type=int, default=2000, help="papers each search has already shown")
    bench.add_argument("--repeat", type=int, default=20)
    bench.set_defaults(handler=_bench)


def _bench(args) -> int:
    """Fills a fresh store under a temporary data folder and prints milliseconds per operation."""
    import os
    import tempfile
    import time
    from unittest import mock

    from starlette.testclient import TestClient

    from lumina_assets.cli import alerts as alerts_cli
    from lumina_assets.search.api import create_app

    def timed(label: str, action, repeat: int) -> None:
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            action()
            samples.append((time.perf_counter() - start) * 1000)
        samples.sort()
        print(f"| {label} | {samples[len(samples) // 2]:.1f} | {samples[-1]:.1f} |")

    with (
        tempfile.TemporaryDirectory(prefix="lumina-alerts-bench-") as folder,
        mock.patch.object(saved_searches, "alerts_dir", lambda: Path(folder) / "alerts"),
    ):
        alerts = saved_searches.alerts_dir()
        alerts.mkdir(parents=True)
        stamp = "2026-01-01T00:00:00.000000+00:00"
        searches = [
            saved_searches.SavedSearch(
                f"s{n:03d}", f"query {n}", id=f"id{n:03d}", created_at=stamp, seen_at=stamp
            )
            for n in range(args.searches)
        ]
        hits = [
            {
                "search_id": f"id{n:03d}",
                "search": f"s{n:03d}",
                "paper_id": f"p{n}-{h}",
                "title": f"A paper title number {h} " + "t" * 80,
                "snippet": "s" * 400,
                "rank": 1 + h % 10,
                "ingest_batch": "b",
                "index_run": "r",
                "found_at": f"2026-02-01T00:00:{h % 60:02d}.{h:06d}+00:00",
            }
            for n in range(args.searches)
            for h in range(args.hits)
        ]
        known = {
            f"id{n:03d}": {"known": [f"k{n}-{i}" for i in range(args.known)]} for n in range(args.searches)
        }

        def fill():
            with saved_searches.connect(write=True) as db:
                for search in searches:
                    saved_searches.insert_search(db, search)
                for search_id, entry in known.items():
                    saved_searches.put_state(db, search_id, entry)
                saved_searches.insert_hits(db, hits)

        print(f"{args.searches} saved searches x {args.hits} hits ({len(hits):,} hits)")
        print("| operation | median ms | max ms |")
        print("|---|---|---|")
        timed("fill the store (once)", fill, 1)
        client = TestClient(create_app(service=None), base_url="http://127.0.0.1:8765")
        timed(
            "GET /api/alerts (page load)", lambda: client.get("/api/alerts").raise_for_status(), args.repeat
        )
        timed("GET /feeds/<name>.xml", lambda: client.get("/feeds/s100.xml").raise_for_status(), args.repeat)
        with open(os.devnull, "w") as sink:
            import contextlib

            def listing():
                with contextlib.redirect_stdout(sink):
                    alerts_cli._list(args)

            timed("lumina alerts list (in process)", listing, args.repeat)

        def alert_run():
            with saved_searches.updating_hits() as state:
                for n in range(args.searches):
                    state["hits"].append(
                        dict(hits[n * args.hits], found_at=saved_searches.now(), paper_id="new")
                    )

        timed("an alert run's write (one new hit per search)", alert_run, 3)
    return 0
