"""Corpus-graph smoothing: exact nearest papers from the index's own vectors, kept with the index at tuning time
(also for papers added later), and used by search by default (`neighbour_smoothing`); an index without the graph
(a corpus above `MAX_GRAPH_PAPERS`) is searched by fusion alone."""

from __future__ import annotations

import numpy as np
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.corpus.collections import Collection, collection_tables, load_beir
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.search import neighbour_graph
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.fusion import fuse, ranked
from lumina_assets.search.neighbour_graph import GraphCache, NeighbourGraph, nearest, paper_matrix


def test_nearest_is_the_exact_neighbour_list_without_the_paper_itself():
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(37, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids, sims = nearest(matrix, k=4, block=5)  # blocks smaller than the matrix: the block edges are crossed
    full = matrix @ matrix.T
    np.fill_diagonal(full, -np.inf)
    for row in range(len(matrix)):
        expected = np.argsort(-full[row], kind="stable")[:4]
        assert set(ids[row]) == set(expected) and row not in ids[row]
        assert np.allclose(sims[row], full[row, ids[row]]) and list(sims[row]) == sorted(
            sims[row], reverse=True
        )


def test_a_paper_vector_is_the_mean_of_its_passages():
    vectors = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
    papers, matrix = paper_matrix(vectors, ["a", "a", "b"])
    assert papers == ["a", "b"]
    assert np.allclose(matrix, [[2**-0.5, 2**-0.5], [1, 0]])


def _graph(neighbours: dict[str, tuple[list[str], list[float]]]) -> NeighbourGraph:
    """A graph from paper id -> (neighbour ids, similarities); a neighbour that is not a paper of it: -1."""
    papers = list(neighbours)
    width = max(len(ids) for ids, _ in neighbours.values())
    rows = np.full((len(papers), width), -1, dtype=np.int64)
    sims = np.zeros((len(papers), width), dtype=np.float32)
    for i, (ids, values) in enumerate(neighbours.values()):
        rows[i, : len(ids)] = [papers.index(n) if n in papers else -1 for n in ids]
        sims[i, : len(values)] = values
    return NeighbourGraph(papers, rows, sims)


def test_smoothing_lifts_a_paper_whose_neighbours_scored_over_an_equal_one_whose_did_not():
    graph = _graph(
        {
            "lonely": (["x", "y"], [0.9, 0.8]),
            "clustered": (["friend", "y"], [0.9, 0.8]),
            "friend": (["clustered", "x"], [0.9, 0.1]),
        }
    )
    scores = {"lonely": 1.0, "clustered": 1.0, "friend": 0.5}
    smoothed = graph.smooth(scores, alpha=0.5, k=2)
    assert smoothed["clustered"] > smoothed["lonely"] == 1.0  # unseen neighbours count 0
    assert smoothed["friend"] > 0.5
    assert graph.smooth(scores, alpha=0.5, k=1)["clustered"] == 1.0 + 0.5 * 0.5
    assert graph.smooth(scores, alpha=0.0, k=2) is scores
    assert graph.smooth(scores, alpha=0.5, k=2, depth=2)["friend"] == 0.5  # below the smoothed head: kept


def _index(tmp_path, shared_data, documents: int):
    from lumina_assets.indexing import lancedb_tables as indexing

    corpus = dict(list(load_beir(shared_data / "scifact", "train").corpus.items())[:documents])
    papers, passages = collection_tables(Collection("scifact", corpus, {}, {}))
    db = connect_lancedb(str(tmp_path / "db"))
    indexing.index_corpus(db, passages, papers, HashingEmbedder())
    return db, papers, passages


def test_the_graph_is_kept_with_the_index_and_search_smooths_with_it(tmp_path, shared_data):
    from lumina_assets.search.engine import SearchEngine

    db, papers, _ = _index(tmp_path, shared_data, 60)
    assert neighbour_graph.read_graph(db) is None
    assert neighbour_graph.keep_graph(db)
    graph = neighbour_graph.read_graph(db)
    assert graph is not None and len(graph.papers) == papers.height
    some_paper = next(iter(graph.neighbours))
    neighbours, sims = graph.neighbours[some_paper]
    assert len(neighbours) == neighbour_graph.STORED_NEIGHBOURS and some_paper not in neighbours
    assert sims == sorted(sims, reverse=True)
    assert not neighbour_graph.keep_graph(db)  # every paper covered: not rewritten

    uri = str(tmp_path / "db")
    query = "cells in the immune system"
    unsmoothed = SearchEngine(uri, HashingEmbedder(), SearchConfig(neighbour_smoothing=0))
    plain = unsmoothed.rank_documents(query, 10)
    assert unsmoothed.graph is None  # smoothing off: the graph is not even read
    engine = SearchEngine(uri, HashingEmbedder(), SearchConfig())  # the default smooths
    smoothed = engine.rank_documents(query, 10)
    assert engine.graph is not None and smoothed != plain
    cfg = engine.config
    assert cfg.neighbour_smoothing > 0
    fused = fuse(
        engine.last_trace.runs,
        cfg.weights,
        method=cfg.fusion,
        candidates=cfg.candidates,
        rrf_k=cfg.rrf_k,
    )
    expected = ranked(engine.graph.smooth(fused, cfg.neighbour_smoothing, cfg.smoothing_neighbours), 10)
    assert smoothed == expected

    # RRF's flat scores are not smoothed (its constants were chosen for weighted fusion)
    rrf = SearchEngine(uri, HashingEmbedder(), SearchConfig(fusion="rrf"))
    rrf_off = SearchEngine(uri, HashingEmbedder(), SearchConfig(fusion="rrf", neighbour_smoothing=0))
    assert rrf.rank_documents(query, 10) == rrf_off.rank_documents(query, 10) and rrf.graph is None


def test_papers_added_later_get_neighbours_and_the_cache_sees_the_new_graph(tmp_path, shared_data):
    from lumina_assets.indexing import lancedb_tables as indexing

    db, _, _ = _index(tmp_path, shared_data, 40)
    neighbour_graph.keep_graph(db)
    cache = GraphCache()
    assert len(cache.get(db).papers) == 40
    corpus = dict(list(load_beir(shared_data / "scifact", "train").corpus.items())[:45])  # the 40 and 5 more
    papers, passages = collection_tables(Collection("scifact", corpus, {}, {}))
    indexing.index_corpus(db, passages, papers, HashingEmbedder())
    assert neighbour_graph.keep_graph(db)  # the 5 new papers are not covered: rewritten
    assert len(cache.get(db).papers) == 45


def test_a_corpus_too_large_for_an_exact_graph_gets_none(tmp_path, shared_data, monkeypatch):
    db, _, _ = _index(tmp_path, shared_data, 20)
    monkeypatch.setattr(neighbour_graph, "MAX_GRAPH_PAPERS", 19)
    assert not neighbour_graph.keep_graph(db) and neighbour_graph.read_graph(db) is None


def test_a_corpus_grown_past_the_graph_size_loses_its_old_graph(tmp_path, shared_data, monkeypatch):
    """A graph of the earlier papers only would lift them (their neighbours score) and never the new ones."""
    db, _, _ = _index(tmp_path, shared_data, 20)
    assert neighbour_graph.keep_graph(db) and len(neighbour_graph.read_graph(db).papers) == 20
    monkeypatch.setattr(neighbour_graph, "MAX_GRAPH_PAPERS", 19)  # as if the corpus had grown past the limit
    assert not neighbour_graph.keep_graph(db) and neighbour_graph.read_graph(db) is None
    assert neighbour_graph.graph_rows(db) == 0


def test_an_index_without_a_graph_is_searched_by_fusion_alone(tmp_path, shared_data):
    """A corpus too large for an exact graph keeps no `paper_neighbours` table: the
    default then ranks exactly as with smoothing off."""
    from lumina_assets.search.engine import SearchEngine

    db, _, _ = _index(tmp_path, shared_data, 30)
    assert neighbour_graph.read_graph(db) is None
    uri, query = str(tmp_path / "db"), "cells in the immune system"
    default = SearchEngine(uri, HashingEmbedder(), SearchConfig())
    off = SearchEngine(uri, HashingEmbedder(), SearchConfig(neighbour_smoothing=0))
    ranked_default, ranked_off = default.rank_documents(query, 10), off.rank_documents(query, 10)
    assert [p for p, _ in ranked_default] == [p for p, _ in ranked_off]
    assert [s for _, s in ranked_default] == pytest.approx([s for _, s in ranked_off], rel=1e-6)
    assert default.graph is None and default.config.neighbour_smoothing > 0


def test_the_graph_reads_back_as_written_and_skips_a_neighbour_since_removed(tmp_path):
    """Stored ids come back as row numbers; a stored neighbour that is no longer a paper of the graph (removed since
    the graph was written) is skipped, by the reader as by the constructor."""
    import pyarrow as pa

    full = NeighbourGraph(["a", "b", "c"], np.array([[1, 2], [0, 2], [0, 1]]), np.ones((3, 2)))
    db = connect_lancedb(str(tmp_path / "db"))
    neighbour_graph.write_graph(db, full)
    assert neighbour_graph.read_graph(db).neighbours == full.neighbours
    scores = {"a": 1.0, "b": 0.5}
    assert neighbour_graph.read_graph(db).smooth(scores, 0.2, 2) == {
        "a": 1.0 + 0.2 * 0.25,
        "b": 0.5 + 0.2 * 0.5,
    }

    stale = {"paper_id": ["a", "b"], "neighbours": [["gone", "b"], ["a"]]}
    similarities = pa.array([[0.9, 0.8], [0.9]], pa.list_(pa.float32()))
    db.create_table(
        neighbour_graph.GRAPH_TABLE, data=pa.table({**stale, "similarities": similarities}), mode="overwrite"
    )
    read = neighbour_graph.read_graph(db)
    built = _graph({"a": (["gone", "b"], [0.9, 0.8]), "b": (["a"], [0.9])})
    assert (
        read.neighbours
        == built.neighbours
        == {"a": (["b"], [0.800000011920929]), "b": (["a"], [0.8999999761581421])}
    )
    assert read.smooth(scores, 0.2, 2)["a"] == 1.0 + 0.2 * 0.5  # "gone" weighs nothing
