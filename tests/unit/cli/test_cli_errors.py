"""The CLI as a user meets it when something is wrong: every error exits non-zero with one line on stderr that
says why and what to do next (never a traceback); `-k` says it counts papers; a reader that closes the pipe early
(`lumina status | head -1`) ends the command quietly; and `make demo` ends with the exact commands that come next."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from lumina_assets.cli import ops
from lumina_assets.cli.main import main

LUMINA = str(Path(sys.executable).with_name("lumina"))
TOPICS = [
    (
        "Vitamin D and bone density in older adults",
        "Vitamin D supplements raise bone density in older adults.",
    ),
    ("Aspirin after a first stroke", "Daily aspirin lowers the risk of a second stroke."),
    ("Citation graphs for recommendation", "A graph neural network over citations recommends references."),
]


def _build_index(data_dir: Path) -> None:
    """Three papers indexed with the model `lumina search` loads, where settings.lancedb_uri() points."""
    from lumina_assets.core import settings
    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.parsing.chunking import passages_for_paper

    papers, passages = [], []
    for i, (title, abstract) in enumerate(TOPICS):
        paper_id = f"doi:10.1/cli{i}"
        papers.append(
            {"paper_id": paper_id, "title": title, "abstract": abstract, "year": 2020, "source": "t"}
        )
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    indexing.index_corpus(connect_lancedb(settings.lancedb_uri()), frame, pl.DataFrame(papers), Embedder())


def _one_line_error(capsys, code: int) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code != 0, captured.out + captured.err
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


# (arguments, what the one line must say) on an empty data folder: no catalogue, no index
EMPTY_DATA_ERRORS = [
    (["search", "vitamin d"], "make demo"),
    (["search", "vitamin d", "--json"], "make demo"),
    (["search", "vitamin d", "-k", "0"], "1 to 50"),
    (["search", "vitamin d", "-k", "51", "--json"], "1 to 50"),
    (["search", "   "], 'search "your question"'),
    (["status"], "make demo"),
    (["remove", "doi:10.1/none"], "lumina sources"),
    (["remove", "doi:10.1/none", "--dry-run"], "lumina sources"),
    (["prune", "--source", "nowhere"], "make demo"),
    (["restore"], "--source"),
    (["restore", "doi:10.1/none"], "lumina sources"),
    (["ui", "--workspace", "no-such-workspace.yaml"], "make ui"),
    # usage errors: the one line names the command's --help instead of printing the usage block
    (["no-such-command"], "`lumina --help`"),
    (["search"], "`lumina search --help`"),
    (["search", "vitamin d", "-k", "ten"], "`lumina search --help`"),
    (["bench", "no-such-bench"], "`lumina bench --help`"),
    # an error no command catches: named with its subcommand, as a user typed it
    (["bench", "search", "--dir", "/no/such/collection"], "lumina bench search: /no/such/collection"),
]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stopped:  # argparse ends a usage error this way
        return stopped.code


@pytest.mark.parametrize(
    ("argv", "next_step"), EMPTY_DATA_ERRORS, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_every_error_is_one_line_with_the_next_step(argv, next_step, capsys):
    line = _one_line_error(capsys, _run(argv))
    assert next_step in line
    assert "dagster asset" not in line  # the next step is `make demo`, not a Dagster command line


@pytest.mark.slow
def test_serve_without_an_index_says_make_demo(capsys):
    line = _one_line_error(capsys, main(["serve", "--port", "0"]))
    assert line.startswith("No search index yet") and "make demo" in line


def test_serve_and_ui_on_an_address_they_cannot_have_say_so_at_once(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _one_line_error(capsys, main(["serve", "--port", str(port)]))
        assert line.startswith(f"Cannot listen on 127.0.0.1:{port}") and "`--port` picks another" in line
        line = _one_line_error(capsys, main(["ui", "--port", str(port)]))
    assert line.startswith(f"Cannot open the UI on 127.0.0.1:{port}") and "LUMINA_UI_PORT" in line
    assert "`--port` takes 1-65535" in _one_line_error(capsys, main(["serve", "--port", "70000"]))
    line = _one_line_error(capsys, main(["serve", "--host", "192.0.2.1"]))  # TEST-NET-1: no machine has it
    assert "`--host` takes an address of this machine" in line


def test_an_unexpected_error_is_one_line_unless_debugging(monkeypatch, capsys):
    def broken(spec):
        raise RuntimeError("table unreadable\nsecond line of the reason")

    monkeypatch.setattr(ops.tables, "read_all", broken)
    line = _one_line_error(capsys, main(["status"]))
    assert line == (
        "lumina status failed: RuntimeError: table unreadable second line of the reason "
        "(LUMINA_DEBUG=1 shows where)"
    )
    monkeypatch.setenv("LUMINA_DEBUG", "1")
    with pytest.raises(RuntimeError, match="table unreadable"):
        main(["status"])


def test_k_help_says_it_counts_papers():
    from lumina_assets.cli.main import build_parser

    search = build_parser()._subparsers._group_actions[0].choices["search"]
    k_help = next(a.help for a in search._actions if a.dest == "k")
    assert "papers" in k_help and "context" not in k_help and "50" in k_help


def _closed_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    """`lumina ARGV | head -0`, deterministically: the reader's end is closed before the command writes a byte."""
    process = subprocess.Popen(
        [LUMINA, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ)
    )
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(argv, process.returncode, "", err.decode())


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly(data_dir):
    from lumina_assets.core import tables

    tables.write(tables.PAPERS, pl.DataFrame({"paper_id": ["doi:10.1/p"], "title": ["A paper"]}).to_arrow())
    _build_index(data_dir)
    for argv in (
        ["--help"],
        ["status"],
        ["search", "vitamin d bone density"],
        ["search", "aspirin", "--json"],
    ):
        done = _closed_pipe(argv)
        assert done.stderr == "", (argv, done.stderr)
        # 128 + SIGPIPE, as `yes | head` ends; argparse's help swallows the error itself and exits 0
        assert done.returncode == (0 if argv == ["--help"] else 141), (argv, done.returncode)


@pytest.mark.slow
def test_make_demo_ends_with_the_commands_to_search_and_open_the_ui(data_dir, capsys):
    without_index = ops.next_steps()
    assert "No search index yet" in without_index and "make ui" in without_index

    _build_index(data_dir)
    lines = ops.next_steps().splitlines()
    assert lines[0] == "Next:"
    search, serve, ui = (line.strip() for line in lines[1:])
    # `lumina` is not on PATH after `make demo`: the command names the script this very environment installed
    command = search.split(" search ")[0]
    assert Path(shutil.which(command)).resolve() == Path(LUMINA).resolve()
    assert search.startswith(f'{command} search "') and serve.startswith(f"{command} serve ")
    assert "http://127.0.0.1:8765/" in serve and ui.startswith("make ui ") and "http://127.0.0.1:3000/" in ui
    # the printed search, run as printed, finds the paper whose title it quotes
    query = search.split('"')[1]
    assert main(["search", query, "-k", "1", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)[0]["title"]
    assert top.startswith(query) and top in [title for title, _ in TOPICS]


def test_readme_quickstart_stays_two_commands_and_shows_the_demo_ending():
    from lumina_assets.core import settings

    readme = (settings.PROJECT_ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in quickstart.strip().splitlines()] == [
        "make demo",
        "make test",
    ]
    ending = readme.split("Next:\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split('"')[0].split("  #")[0].strip() for line in ending] == [
        ".venv/bin/lumina search",
        ".venv/bin/lumina serve",
        "make ui",
    ]


def test_status_says_what_the_search_index_holds(tmp_path, monkeypatch):
    """The corpus tables fill before the index: `lumina status` says whether search has the papers yet."""
    import lancedb

    monkeypatch.setenv("LUMINA_DATA_DIR", str(tmp_path))
    assert ops.index_status() == "search index: not built yet (passage_index builds it)"
    db = lancedb.connect(str(tmp_path / "lancedb"))
    db.create_table("passages", data=[{"passage_id": f"p{i}", "paper_id": f"a{i % 2}"} for i in range(3)])
    db.create_table("papers", data=[{"paper_id": "a0"}, {"paper_id": "a1"}])
    line = ops.index_status()
    assert line.startswith("search index: 3 passages of 2 papers, last changed 20"), line
