"""Hostile alert data and terminal output (issue 40 items 3, 4, 5, 6, 10): feeds stay well-formed XML with control
characters in titles and snippets and never link to `javascript:` / `data:`; a damaged store is a clear JSON 503
and one CLI line; `lumina alerts hits`, `lumina search --color never` and `lumina export` to stdout print no raw
ESC / BEL / C1 control."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import feedparser
import pytest
from starlette.testclient import TestClient

from lumina_assets.cli.main import main
from lumina_assets.search import saved_searches
from lumina_assets.search.alerts import atom_feed
from lumina_assets.search.api import create_app

BASE = "http://127.0.0.1:8765"
HOSTILE = "Title \x1b]0;owned\x07 \x1b[2J\x01\x08\ufffe\uffff\x9b31m end"
CONTROLS = [b"\x1b", b"\x07", b"\x01", b"\x08"] + [bytes([0xC2, c]) for c in range(0x80, 0xA0)]


def _hit(search, number: int, **fields) -> dict:
    return {
        "search_id": search.id,
        "search": search.name,
        "paper_id": f"p{number}",
        "title": f"Paper {number}",
        "snippet": "A passage.",
        "url": None,
        "rank": 1,
        "ingest_batch": "batch-1",
        "found_at": saved_searches.now(),
        **fields,
    }


def _store_hits(search, hits) -> None:
    with saved_searches.updating_hits() as state:
        state["hits"] += hits


def test_a_feed_with_control_characters_and_script_links_stays_valid(data_dir):
    search = saved_searches.add(saved_searches.validate("watch", "graphs", {}, 10))
    _store_hits(
        search,
        [
            _hit(search, 1, title=HOSTILE, snippet=HOSTILE, url="javascript:alert(1)"),
            _hit(search, 2, url="data:text/html,<script>alert(1)</script>"),
            _hit(search, 3, url=" JavaScript:alert(1)"),
            _hit(search, 4, url="https://example.org/paper.pdf"),
        ],
    )
    body = TestClient(create_app(service=None), base_url=BASE).get("/feeds/watch.xml").content
    root = ET.fromstring(body)  # a strict XML parser: before, "not well-formed (invalid token)"
    assert root.tag.endswith("feed")
    feed = feedparser.parse(body)
    assert not feed.bozo, feed.get("bozo_exception")
    links = sorted(entry.link for entry in feed.entries)
    assert links.count(f"{BASE}/?q=graphs") == 3 and "https://example.org/paper.pdf" in links
    [hostile] = [entry for entry in feed.entries if "owned" in entry.title]
    assert "\x1b" not in hostile.title and "\ufffd" in hostile.title and "end" in hostile.summary


def test_feed_builder_output_parses_for_every_control_character():
    search = saved_searches.SavedSearch(name="s", query="q", id="x", created_at=saved_searches.now())
    for code in [*range(0x20), 0x7F, 0xFFFE, 0xFFFF, 0xD800]:
        character = chr(code)
        ET.fromstring(atom_feed(search, [_hit(search, 1, title=f"a{character}b", snippet=character)], BASE))


@pytest.mark.parametrize("damage", [b"not a database at all" * 100, b"SQLite format 3\x00" + b"\x00" * 200])
def test_a_damaged_database_is_a_clear_503_and_one_cli_line(damage, data_dir, capsys):
    saved_searches.alerts_dir().mkdir(parents=True)
    saved_searches.database_path().write_bytes(damage)
    client = TestClient(create_app(service=None), base_url=BASE, raise_server_exceptions=False)
    for response in (
        client.get("/api/alerts"),
        client.get("/feeds/x.xml"),
        client.delete("/api/alerts/x"),
        client.post("/api/alerts", content=b'{"query": "q"}', headers={"content-type": "application/json"}),
    ):
        assert response.status_code == 503 and "move it away" in response.json()["error"]
    assert client.get("/api/health").status_code != 500  # the rest of the server still answers
    assert main(["alerts", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the alerts store") and "Traceback" not in err and err.count("\n") == 1


def _printed_bytes(capsys) -> bytes:
    return capsys.readouterr().out.encode("utf-8")


def test_alerts_hits_and_list_print_no_terminal_controls(data_dir, capsys):
    search = saved_searches.add(saved_searches.validate("watch", "graphs", {}, 10))
    _store_hits(search, [_hit(search, 1, title=HOSTILE, ingest_batch="b\x1b[2J")])
    assert main(["alerts", "hits", "watch"]) == 0
    out = _printed_bytes(capsys)
    assert b"owned" in out and not any(control in out for control in CONTROLS)
    assert main(["alerts", "list"]) == 0
    assert b"watch" in _printed_bytes(capsys)


def _hostile_answer() -> dict:
    return {
        "constraints": [],
        "results": [
            {
                "rank": 1,
                "paper_id": "doi:10.1/x",
                "title": HOSTILE,
                "authors": ["Eve \x1b]0;title\x07Hacker", "Mallory\x9b2J"],
                "year": 2020,
                "venue": "Venue \x1b[2J",
                "doi": "10.1/x",
                "url": None,
                "score": 0.5,
                "explanation": {
                    "found_by": [],
                    "fusion": "weighted",
                    "boosts": [],
                    "best_evidence_score": 0.5,
                },
                "passages": [
                    {
                        "number": 1,
                        "kind": "text",
                        "section_number": "1",
                        "section_title": "Intro\x07",
                        "page_start": 1,
                        "page_end": 1,
                        "text": "A passage \x1b]0;x\x07 with \x1b[2J escapes.",
                        "highlights": [],
                    }
                ],
            }
        ],
    }


@pytest.fixture
def hostile_search(monkeypatch):
    """The search service answers with hostile metadata and passages (as a library import can bring)."""
    from lumina_assets.search import engine, results

    class Engine:
        def __init__(self, *args, **kwargs):
            self.last_trace = type("Trace", (), {"message": ""})()

    class Service:
        def __init__(self, *args, **kwargs):
            pass

        def search(self, *args, **kwargs):
            return _hostile_answer()

    monkeypatch.setattr(engine, "SearchEngine", Engine)
    monkeypatch.setattr(results, "SearchService", Service)


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "graphs", "--color", "never"],
        ["export", "graphs", "--format", "bibtex"],
        ["export", "graphs", "--format", "ris"],
        ["export", "graphs", "--format", "csv"],
    ],
)
def test_search_and_export_to_a_terminal_print_no_controls(argv, hostile_search, data_dir, capsys):
    assert main(argv) == 0
    out = _printed_bytes(capsys)
    # the title is shown (export files drop a whole escape sequence, the window-title payload with it)
    assert b"Title" in out and b"end" in out
    assert not any(control in out for control in CONTROLS), out


def test_terminal_safe_keeps_colours_only_when_asked():
    from lumina_assets.core.hygiene import terminal_safe

    coloured = "\x1b[1mTitle\x1b[0m \x1b]0;owned\x07 \x1b[2J\x9b2J line\r\nnext\rover\ttab"
    plain = terminal_safe(coloured)
    assert "\x1b" not in plain and "\x07" not in plain and "\x9b" not in plain
    assert "\r\nnext" in plain and "\rover" not in plain and "\ttab" in plain
    kept = terminal_safe(coloured, keep_colors=True)
    assert kept.startswith("\x1b[1mTitle\x1b[0m ") and kept.count("\x1b") == 2 and "\x07" not in kept


def test_the_alerts_sensor_skips_with_the_reason_when_the_store_is_damaged(data_dir):
    import dagster as dg

    from sensors.alerts import alert_request

    saved_searches.alerts_dir().mkdir(parents=True)
    saved_searches.database_path().write_bytes(b"garbage" * 100)
    decision = alert_request(None, None)  # the store is read before the index event is looked at
    assert isinstance(decision, dg.SkipReason) and "move it away" in decision.skip_message


@pytest.mark.parametrize("shape", ["other_columns", "newer_version"])
def test_a_store_of_another_shape_is_a_clear_503(shape, data_dir):
    import sqlite3

    saved_searches.alerts_dir().mkdir(parents=True)
    db = sqlite3.connect(saved_searches.database_path())
    if shape == "other_columns":
        db.execute("CREATE TABLE searches (id TEXT, something_else TEXT)")
        db.execute("PRAGMA user_version = 1")
    else:
        db.execute("PRAGMA user_version = 7")
    db.commit()
    db.close()
    client = TestClient(create_app(service=None), base_url=BASE, raise_server_exceptions=False)
    response = client.get("/api/alerts")
    assert response.status_code == 503 and "cannot be read" in response.json()["error"]
    if shape == "newer_version":
        assert "newer Lumina" in response.json()["error"]
        assert sqlite3.connect(saved_searches.database_path()).execute("PRAGMA user_version").fetchone() == (
            7,
        )


def test_lumina_alerts_hits_bytes_on_a_real_stdout(data_dir):
    """The command in its own process, stdout read back byte for byte (no capture layer in between)."""
    import subprocess
    import sys

    search = saved_searches.add(saved_searches.validate("watch", "graphs", {}, 10))
    _store_hits(search, [_hit(search, 1, title=HOSTILE)])
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lumina_assets.cli.main import main; raise SystemExit(main())",
            "alerts",
            "hits",
            "watch",
        ],
        capture_output=True,
        timeout=120,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    assert b"owned" in done.stdout and not any(control in done.stdout for control in CONTROLS)


ADDER = """
import sys
from lumina_assets.search import saved_searches
for number in range(10):
    name = f"w{sys.argv[1]}-{number}"
    saved_searches.add(saved_searches.validate(name, f"query {name}", {}, 10))
"""


def test_sixty_concurrent_saves_from_six_processes_on_a_fresh_store(data_dir):
    """Six processes race to make the store (and migrate nothing) and save ten searches each."""
    import subprocess
    import sys

    writers = [
        subprocess.Popen(
            [sys.executable, "-c", ADDER, str(number)],
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for number in range(6)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()
    names = {search.name for search in saved_searches.load()}
    assert names == {f"w{p}-{n}" for p in range(6) for n in range(10)}
