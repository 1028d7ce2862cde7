"""`lumina search` asks a running `lumina serve` when it serves the same index (a real uvicorn server on
127.0.0.1), prints the server's answer as it prints its own, passes the server's refusals on, and searches in
process when no server, another index's server or no Lumina server answers; the command parses its arguments
without importing the other commands' modules."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from bench.serve_load import serve_in_thread
from lumina_assets.cli.search import _print_answer, ask_server
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.api import create_app
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.results import SearchService

PAPERS = {
    "doi:10.1/a": (
        "Citation graphs for document embeddings",
        "Citations train scientific document embeddings.",
    ),
    "doi:10.1/b": ("Protein folding with attention", "Attention layers predict residue contacts."),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("via-server") / "lancedb")
    rows = [
        p.to_row()
        for paper_id, (title, abstract) in PAPERS.items()
        for p in passages_for_paper(paper_id, title=title, abstract=abstract)
    ]
    papers = [{"paper_id": p, "title": t, "abstract": a, "source": "test"} for p, (t, a) in PAPERS.items()]
    embedder = HashingEmbedder()
    indexing.index_corpus(
        connect_lancedb(uri),
        pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)),
        pl.DataFrame(papers),
        embedder,
    )
    service = SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=1)
    running, thread, port = serve_in_thread(create_app(service))
    yield uri, f"http://127.0.0.1:{port}"
    running.should_exit = True
    thread.join(timeout=10)


def test_the_server_of_the_same_index_answers(server, capsys):
    uri, base = server
    answer = ask_server(base, uri, "citation graph embeddings", 2)
    assert isinstance(answer, dict) and answer["results"][0]["paper_id"] == "doi:10.1/a"
    assert _print_answer(answer, SimpleNamespace(json=False, color="never", explain=False)) == 0
    assert "Citation graphs for document embeddings" in capsys.readouterr().out
    assert _print_answer(answer, SimpleNamespace(json=True, color="never", explain=False)) == 0
    contexts = json.loads(capsys.readouterr().out)
    assert contexts[0]["paper_id"] == "doi:10.1/a" and contexts[0]["chunks"]


def test_another_index_or_no_server_means_searching_in_process(server, tmp_path):
    uri, base = server
    assert ask_server(base, str(tmp_path / "other"), "citation graph", 2) is None
    assert ask_server("http://127.0.0.1:9", uri, "citation graph", 2) is None  # nothing listens on port 9
    assert ask_server("http://example.org", uri, "citation graph", 2) is None  # never another machine


def test_a_refusal_by_the_server_is_passed_on(server):
    uri, base = server
    refused = ask_server(base, uri, "x" * 1001, 2)
    assert isinstance(refused, str) and "too long" in refused


def test_lumina_search_parses_without_the_other_commands_modules(tmp_path):
    """The other commands' modules (the benchmark's registry, the collection fetcher) are not imported."""
    code = (
        "import sys\n"
        "from lumina_assets.cli.main import build_parser, LIGHT_COMMANDS\n"
        "args = build_parser(LIGHT_COMMANDS['search']).parse_args(['search', '-k', '3', 'a question'])\n"
        "print(args.query, args.k, 'evals.registry' in sys.modules, 'lumina_assets.corpus.fetch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["a", "question", "3", "False", "False"]
