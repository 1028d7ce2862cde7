"""The configuration a search ran with, and what of it the caller set, comes back with every search: in the API
answer, `lumina search --explain` and `lumina status`; a value set explicitly is marked so even when it equals the
default."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from starlette.testclient import TestClient

from lumina_assets.cli import ops
from lumina_assets.cli.evaluation import _parse_overrides
from lumina_assets.cli.main import main
from lumina_assets.search.config import SearchConfig


def test_a_value_set_explicitly_is_marked_even_when_it_equals_the_default():
    default = SearchConfig()
    explicit = SearchConfig(candidates=default.candidates, weights={"passage_vectors": 1.0})
    assert explicit == default  # same values: only the explicit marks differ
    assert default.explicit == frozenset()
    assert explicit.explicit == {"candidates", "weights", "weights.passage_vectors"}
    assert explicit.weights == default.weights  # weights given in part are merged over the defaults


def test_set_on_the_command_line_counts_as_explicit():
    config = SearchConfig(**_parse_overrides(["candidates=200", 'weights={"paper_fulltext": 0.5}']))
    assert {"candidates", "weights.paper_fulltext"} <= config.explicit
    assert "weights.passage_vectors" not in config.explicit
    assert config.weights == {"passage_vectors": 1.0, "passage_fulltext": 1.0, "paper_fulltext": 0.5}


def test_replace_marks_its_changes_and_modes_are_checked():
    config = SearchConfig().replace(rrf_k=60)
    assert config.explicit == {"rrf_k"}
    with pytest.raises(ValueError, match="fusion"):
        SearchConfig(fusion="zscore")
    with pytest.raises(ValueError, match="year_mode"):
        SearchConfig().replace(year_mode="sometimes")
    with pytest.raises(TypeError, match="expansion_weight"):
        SearchConfig(expansion_weight=0.5)
    with pytest.raises(TypeError, match="index_tuning"):
        SearchConfig(index_tuning=False)  # per-corpus tuning was removed


def test_explain_gives_every_field_and_the_explicit_ones():
    explain = SearchConfig(candidates=50, fusion="rrf").explain()
    assert explain["explicit"] == ["candidates", "fusion"]
    assert explain["config"]["candidates"] == 50 and explain["config"]["fusion"] == "rrf"
    assert explain["config"]["rrf_k"] == SearchConfig().rrf_k
    json.dumps(explain)  # JSON-ready


@pytest.fixture
def small_index(data_dir, monkeypatch):
    """A small index at the default URI; searches embed with the hashing embedder that built it."""
    from lumina_assets.core import settings
    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
    from lumina_assets.indexing import embedding
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.parsing.chunking import passages_for_paper

    papers, passages = [], []
    for i, (title, abstract) in enumerate(
        [
            ("Aspirin and stroke", "Aspirin lowers the risk of stroke in older adults."),
            ("Protein folding", "Residue contacts predict how proteins fold."),
            ("Citation graphs", "Citation graphs train document encoders for search."),
        ]
    ):
        paper_id = f"doi:10.1/t{i}"
        papers.append(
            {"paper_id": paper_id, "title": title, "abstract": abstract, "year": 2020, "source": "t"}
        )
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    db = connect_lancedb(settings.lancedb_uri())
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    indexing.index_corpus(db, frame, pl.DataFrame(papers), HashingEmbedder())
    monkeypatch.setattr(embedding, "Embedder", lambda *args, **kwargs: HashingEmbedder())
    return settings.lancedb_uri()


def test_every_search_answer_carries_the_configuration_it_ran_with(small_index):
    from lumina_assets.search.api import create_app
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.results import SearchService

    service = SearchService(
        lambda: SearchEngine(small_index, HashingEmbedder(), SearchConfig(candidates=200, fusion="rrf")),
        pool_size=1,
    )
    http = TestClient(create_app(service), base_url="http://127.0.0.1:8765")
    response = http.post("/api/search", json={"query": "aspirin stroke", "k": 2})
    assert response.status_code == 200, response.text
    answer = response.json()
    explain = answer["explain"]
    assert explain["config"]["candidates"] == 200 and explain["explicit"] == ["candidates", "fusion"]
    # the per-result explanation names the fusion the search really used
    assert answer["results"] and answer["results"][0]["explanation"]["fusion"] == "rrf"


def test_lumina_search_explain_and_status_show_it(small_index, capsys):
    assert main(["search", "aspirin stroke", "-k", "1", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "Search configuration:" in out and "set explicitly: nothing (the defaults)" in out
    assert "fusion=weighted" in out and "candidates=200" in out

    assert main(["search", "aspirin stroke", "-k", "1", "--json", "--explain"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["results"] and answer["explain"]["config"]["fusion"] == "weighted"

    assert main(["search", "aspirin stroke", "-k", "1", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)  # without --explain: the array as before

    status = ops.search_config_status()
    assert "Search configuration:" in status and "neighbour_smoothing=0.2" in status


def test_lumina_status_prints_the_search_configuration_and_the_environments_settings(
    small_index, capsys, monkeypatch
):
    monkeypatch.setattr(ops.tables, "read_all", lambda spec: pl.DataFrame({"row": [1, 2]}))
    monkeypatch.setenv("LUMINA_INDEX_CACHE_MB", "512")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "Search configuration:" in out and "candidates=200" in out
    assert "settings from the environment:" in out and "LUMINA_INDEX_CACHE_MB=512" in out
