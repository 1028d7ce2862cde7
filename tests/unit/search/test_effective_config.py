"""Explicit settings win over the index's tuned record, even when equal to the default; the configuration a search
ran with (after that record) comes back with every search: in the API answer, `lumina search --explain` and
`lumina status`."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from starlette.testclient import TestClient

from lumina_assets.cli import ops
from lumina_assets.cli.evaluation import _parse_overrides
from lumina_assets.cli.main import main
from lumina_assets.search import tuned_settings
from lumina_assets.search.config import SearchConfig

# a record whose values all differ from the defaults, so where each value came from is visible
RECORD = tuned_settings.TuningRecord(
    setting={"candidates": 50, "fusion": "rrf", "weights": {"passage_vectors": 0.5, "paper_fulltext": 1.0}},
    adopted=True,
    reason="test record",
)


def test_a_value_set_explicitly_wins_even_when_it_equals_the_default():
    default = SearchConfig()
    explicit = SearchConfig(candidates=default.candidates, weights={"passage_vectors": 1.0})
    assert explicit == default  # same values: only the explicit marks differ
    tuned = tuned_settings.apply(default, RECORD)
    assert (tuned.candidates, tuned.fusion, tuned.weights["passage_vectors"]) == (50, "rrf", 0.5)
    kept = tuned_settings.apply(explicit, RECORD)
    assert kept.candidates == 200 and kept.weights["passage_vectors"] == 1.0
    # fields and retrievers the caller did not name still take the record
    assert kept.fusion == "rrf" and kept.weights["paper_fulltext"] == 1.0
    assert kept.explicit == explicit.explicit  # what the record filled is not marked as the caller's


def test_set_on_the_command_line_counts_as_explicit():
    config = SearchConfig(**_parse_overrides(["candidates=200", 'weights={"paper_fulltext": 0.5}']))
    assert {"candidates", "weights.paper_fulltext"} <= config.explicit
    assert "weights.passage_vectors" not in config.explicit
    tuned = tuned_settings.apply(config, RECORD)
    assert tuned.candidates == 200 and tuned.weights == {
        "passage_vectors": 0.5,
        "passage_fulltext": 1.0,
        "paper_fulltext": 0.5,
    }


def test_replace_marks_its_changes_and_modes_are_checked():
    config = SearchConfig().replace(rrf_k=60)
    assert config.explicit == {"rrf_k"}
    assert tuned_settings.apply(config, RECORD).rrf_k == 60
    with pytest.raises(ValueError, match="fusion"):
        SearchConfig(fusion="zscore")
    with pytest.raises(ValueError, match="year_mode"):
        SearchConfig().replace(year_mode="sometimes")
    with pytest.raises(TypeError, match="expansion_weight"):
        SearchConfig(expansion_weight=0.5)


def test_the_effective_configuration_says_where_each_tunable_value_came_from():
    given = SearchConfig(candidates=200)
    explain = tuned_settings.effective(tuned_settings.apply(given, RECORD), given, RECORD)
    assert explain["sources"]["candidates"] == "explicit"
    assert explain["sources"]["fusion"] == "tuned" and explain["config"]["fusion"] == "rrf"
    assert explain["sources"]["weights.passage_vectors"] == "tuned"
    assert explain["sources"]["weights.passage_fulltext"] == "default"
    assert explain["tuned_record"] == RECORD.describe()
    json.dumps(explain)  # JSON-ready


@pytest.fixture
def tuned_index(data_dir, monkeypatch):
    """A small index at the default URI with RECORD as its tuned setting; searches embed with the hashing
    embedder that built it."""
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
    tuned_settings.write_record(db, RECORD)
    monkeypatch.setattr(embedding, "Embedder", lambda *args, **kwargs: HashingEmbedder())
    return settings.lancedb_uri()


def test_every_search_answer_carries_the_effective_configuration(tuned_index):
    from lumina_assets.search.api import create_app
    from lumina_assets.search.engine import SearchEngine
    from lumina_assets.search.results import SearchService

    service = SearchService(
        lambda: SearchEngine(tuned_index, HashingEmbedder(), SearchConfig(candidates=200)), pool_size=1
    )
    http = TestClient(create_app(service), base_url="http://127.0.0.1:8765")
    response = http.post("/api/search", json={"query": "aspirin stroke", "k": 2})
    assert response.status_code == 200, response.text
    answer = response.json()
    explain = answer["explain"]
    assert explain["config"]["candidates"] == 200 and explain["sources"]["candidates"] == "explicit"
    assert explain["config"]["fusion"] == "rrf" and explain["sources"]["fusion"] == "tuned"
    # the per-result explanation names the fusion the search really used (the tuned one)
    assert answer["results"] and answer["results"][0]["explanation"]["fusion"] == "rrf"


def test_lumina_search_explain_and_status_show_it(tuned_index, capsys):
    assert main(["search", "aspirin stroke", "-k", "1", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "Search configuration (index tuning on)" in out
    assert "fusion = rrf (tuned)" in out and "candidates = 50 (tuned)" in out
    assert "weights.passage_fulltext = 1.0 (default)" in out

    assert main(["search", "aspirin stroke", "-k", "1", "--json", "--explain"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["results"] and answer["explain"]["sources"]["weights.passage_vectors"] == "tuned"

    assert main(["search", "aspirin stroke", "-k", "1", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)  # without --explain: the array as before

    status = ops.search_config_status()
    assert "tuned record: candidates=50, fusion=rrf" in status and "fusion = rrf (tuned)" in status


def test_lumina_status_prints_the_search_configuration_and_the_environments_settings(
    tuned_index, capsys, monkeypatch
):
    monkeypatch.setattr(ops.tables, "read_all", lambda spec: pl.DataFrame({"row": [1, 2]}))
    monkeypatch.setenv("LUMINA_INDEX_CACHE_MB", "512")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "candidates = 50 (tuned)" in out
    assert "settings from the environment:" in out and "LUMINA_INDEX_CACHE_MB=512" in out
