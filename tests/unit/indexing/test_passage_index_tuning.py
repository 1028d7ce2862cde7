"""`passage_index` tunes search to its corpus and records the choice with the index: the metadata shows the setting
and its pseudo-query score, a small corpus keeps the defaults and says so, and a fresh search process applies the
recorded setting (while an explicit setting still wins)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from fresh_process import run_snippet
from hashing_embedder import HashingEmbedder

from lumina_assets.core import tables
from lumina_assets.corpus.collections import load_beir
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search import tuned_settings, tuning
from lumina_assets.search.config import SearchConfig
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

SUPPORT = Path(__file__).resolve().parents[2] / "support"


class HashingEmbedderResource(EmbedderResource):
    """The pipeline's embedder resource with the fast hashing embedder inside (index mechanics, not quality)."""

    def get_embedder(self):
        return HashingEmbedder()

    def setup_for_execution(self, context) -> None:
        return None


def write_corpus(shared_data: Path, documents: int) -> None:
    corpus = load_beir(shared_data / "scifact", "train").corpus
    papers, passages = [], []
    for doc_id, doc in list(corpus.items())[:documents]:
        paper_id = f"beir-scifact:{doc_id}"
        papers.append({"paper_id": paper_id, "title": doc["title"], "doi": None, "abstract": doc["text"]})
        passages += [
            p.to_row() for p in passages_for_paper(paper_id, title=doc["title"], abstract=doc["text"])
        ]
    tables.write(tables.PAPERS, pl.DataFrame(papers))
    tables.write(tables.PASSAGES, pl.DataFrame(passages), "batch-1")


def materialize_index():
    from lumina_assets.defs.indexing import passage_index

    result = dg.materialize(
        [passage_index],
        resources={"lancedb": LanceDBResource(), "embedder": HashingEmbedderResource()},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    return result.asset_materializations_for_node("passage_index")[0].metadata


def test_a_small_corpus_keeps_the_defaults_and_the_metadata_says_so(data_dir, shared_data):
    write_corpus(shared_data, 30)
    metadata = materialize_index()
    assert "too small" in metadata["search_setting"].value
    assert metadata["search_setting"].value.startswith("defaults")
    record = tuned_settings.read_record(connect_lancedb(str(data_dir / "lancedb")))
    assert record is not None and not record.adopted and record.queries < 100


FRESH_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[2])
from hashing_embedder import HashingEmbedder
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
explicit = SearchConfig(weights={"passage_vectors": 0.9})
out = {}
for name, config in (("default", None), ("explicit", explicit), ("untuned", SearchConfig(index_tuning=False))):
    engine = SearchEngine(sys.argv[1], HashingEmbedder(), config)
    found = engine.search("tumour growth in mice", k=3)
    out[name] = {"weights": engine.config.weights, "found": len(found)}
print(json.dumps(out))
"""


def test_the_recorded_setting_is_used_by_a_fresh_search_process(data_dir, shared_data, monkeypatch):
    write_corpus(shared_data, 260)
    # the hashing embedder embeds in no time, so the fifth-of-embedding budget would allow too few pseudo-queries
    monkeypatch.setattr(tuning, "query_budget", lambda *args, **kwargs: 200)
    metadata = materialize_index()
    assert metadata["search_tuned_now"].value is True
    queries = metadata["search_tuning_queries"].value
    assert queries["total"] >= 100 and queries["inverse_cloze"] == queries["total"]
    assert 0 < metadata["search_setting_pseudo_query_ndcg10"].value <= 1
    assert 0 < metadata["search_defaults_pseudo_query_ndcg10"].value <= 1
    assert metadata["search_tuning_seconds"].value > 0
    assert metadata["neighbour_smoothing"].value.startswith("on: paper neighbour graph of 260 papers")
    uri = str(data_dir / "lancedb")
    db = connect_lancedb(uri)
    record = tuned_settings.read_record(db)
    assert record is not None and record.queries == queries["total"]
    assert metadata["search_setting"].value == record.describe()

    # whatever tuning chose, a recorded adopted setting is what a new process searches with
    chosen = {"weights": {"passage_vectors": 0.5, "passage_fulltext": 1.0, "paper_fulltext": 1.0}}
    record.setting, record.adopted = chosen, True
    tuned_settings.write_record(db, record)
    seen = run_snippet(FRESH_PROCESS, uri, str(SUPPORT), data_dir=data_dir)
    defaults = SearchConfig().weights
    assert seen["default"]["weights"] == {**defaults, **chosen["weights"]}
    assert seen["default"]["found"] == 3
    # an explicit setting wins field by field; index_tuning=False searches with the global defaults
    assert seen["explicit"]["weights"]["passage_vectors"] == 0.9
    assert seen["explicit"]["weights"]["paper_fulltext"] == 1.0
    assert seen["untuned"]["weights"] == defaults


def test_the_tuning_budget_stays_under_a_fifth_of_the_embedding_time():
    # a pseudo-query costs ~1.65 passage embeddings: 10k passages embedded buy the maximum set
    assert tuning.query_budget(300.0, 10_000) == tuning.MAX_QUERIES
    # 1,583 passages (CISI): ~144 pseudo-queries, ~15 % of the embedding time
    budget = tuning.query_budget(394.0, 1_583)
    assert 130 <= budget <= 150
    assert budget * 1.65 * 394.0 / 1_583 <= 0.2 * 394.0
    # nothing embedded (an existing index tuned for the first time): the full set
    assert tuning.query_budget(0.0, 0) == tuning.MAX_QUERIES
    # an incremental run embedding a few hundred passages cannot buy a tuning set
    assert tuning.query_budget(10.0, 400) < tuning.MIN_QUERIES


def test_apply_leaves_a_record_not_adopted_alone():
    config = SearchConfig()
    record = tuned_settings.TuningRecord(setting={"weights": {"passage_vectors": 2.0}}, adopted=False)
    assert tuned_settings.apply(config, record) is config
    record.adopted = True
    assert tuned_settings.apply(config, record).weights["passage_vectors"] == 2.0
    # a field a record must not touch is ignored
    record.setting = {"store": "index"}
    assert tuned_settings.apply(config, record).store == config.store


@pytest.mark.parametrize("text", ["not json", json.dumps({"setting": {}, "adopted": True, "unknown": 1})])
def test_records_round_trip_and_tolerate_extra_fields(text):
    if text == "not json":
        with pytest.raises(ValueError):
            tuned_settings.TuningRecord.from_json(text)
    else:
        assert tuned_settings.TuningRecord.from_json(text).adopted is True


def test_a_run_that_cannot_afford_tuning_keeps_the_recorded_setting(tmp_path, shared_data):
    from lumina_assets.corpus.collections import Collection, collection_tables
    from lumina_assets.indexing import lancedb_tables as indexing

    corpus = dict(list(load_beir(shared_data / "scifact", "train").corpus.items())[:200])
    papers, passages = collection_tables(Collection("scifact", corpus, {}, {}))
    db = connect_lancedb(str(tmp_path / "db"))
    indexing.index_corpus(db, passages, papers, HashingEmbedder())
    # tuned when the index held half as many passages: it has grown enough to be tuned again
    earlier = tuned_settings.TuningRecord(
        setting={"weights": {"passage_vectors": 2.0}}, adopted=True, passages=passages.height // 2
    )
    tuned_settings.write_record(db, earlier)
    record, tuned_now = tuning.tune_index(db, HashingEmbedder(), limit=tuning.MIN_QUERIES - 1)
    assert not tuned_now and record.setting == earlier.setting and record.adopted
    assert tuned_settings.read_record(db).setting == earlier.setting
    record, tuned_now = tuning.tune_index(db, HashingEmbedder(), limit=150)
    assert tuned_now and record.passages == passages.height and record.queries >= tuning.MIN_QUERIES
    assert tuned_settings.read_record(db).tuned_at == record.tuned_at
    # tuned at this size: the next run leaves it alone
    assert tuning.tune_index(db, HashingEmbedder(), limit=150) == (tuned_settings.read_record(db), False)
