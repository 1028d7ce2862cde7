"""Corpus-adapted embeddings (opt-in): training pairs come from the corpus alone, the adapted encoder is a new model
with its own fingerprint, an index built with it is searched with it by a search process started with the bundled
model, the base model's index refuses it, and passage_index adapts once and keeps the adapted model as the corpus
grows."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
from fresh_process import run_snippet

from lumina_assets.core import tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.corpus.collections import collection_tables, load_collection
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing import model_adaptation, model_identity
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder, default_model_path
from lumina_assets.indexing.pseudo_queries import CITATION, INVERSE_CLOZE, TITLE, PseudoQuery
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.stores import IndexModelMismatch
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

# one optimizer step of eight pairs: what the tests need is a model with other weights, not a better one
ONE_STEP = {"budget_seconds": 0.0, "batch_size": 8}


@pytest.fixture(scope="module")
def cisi_tables(shared_data):
    collection = load_collection(shared_data / "cisi")
    papers, passages = collection_tables(collection)
    return papers, passages


def _pairs(cisi_tables, documents: int, **config) -> list[model_adaptation.TrainingPair]:
    papers, passages = cisi_tables
    papers = papers.head(documents)
    passages = passages.filter(pl.col("paper_id").is_in(papers["paper_id"].implode()))
    return model_adaptation.pairs_from_tables(
        passages, papers, config=model_adaptation.AdaptationConfig(**config)
    )


def test_pairs_come_from_the_corpus_with_the_query_left_out_of_its_positive(cisi_tables):
    papers, passages = cisi_tables
    papers = papers.head(400)
    passages = passages.filter(pl.col("paper_id").is_in(papers["paper_id"].implode()))
    cited = papers["paper_id"][3]
    citing = PseudoQuery(
        "Retrieval systems rank documents by estimated relevance to a request.", cited, CITATION
    )
    pairs = model_adaptation.pairs_from_tables(
        passages, papers, citations=[citing], config=model_adaptation.AdaptationConfig()
    )
    kinds = {pair.kind for pair in pairs}
    assert kinds == {INVERSE_CLOZE, TITLE, CITATION}
    titles = dict(zip(papers["paper_id"], papers["title"], strict=True))
    for pair in pairs:
        assert pair.query and pair.positive
        if pair.kind == INVERSE_CLOZE:
            assert pair.query not in pair.positive  # the sentence is withheld from its passage
            assert pair.positive.startswith(titles[pair.paper_id].strip())  # formatted as the index embeds it
        if pair.kind == TITLE:
            assert titles[pair.paper_id].strip() not in pair.positive
    (citation,) = [pair for pair in pairs if pair.kind == CITATION]
    assert citation.paper_id == cited and citation.positive.startswith(titles[cited].strip())
    # more than one sentence a paper where its passages allow (tuning takes one)
    per_paper = {}
    for pair in pairs:
        per_paper[pair.paper_id] = per_paper.get(pair.paper_id, 0) + (pair.kind == INVERSE_CLOZE)
    assert max(per_paper.values()) == 2
    # the same corpus and seed give the same pairs
    again = model_adaptation.pairs_from_tables(
        passages, papers, citations=[citing], config=model_adaptation.AdaptationConfig()
    )
    assert again == pairs


def test_no_batch_holds_two_pairs_of_one_paper(cisi_tables):
    pairs = _pairs(cisi_tables, 300)
    batches = model_adaptation._batches(pairs, 32, random.Random(0))
    for batch in batches:
        papers = [pair.paper_id for pair in batch]
        assert len(papers) == len(set(papers)) and 2 <= len(batch) <= 32
    assert sum(len(batch) for batch in batches) >= len(pairs) - 2  # at most one paper's tail is left out


def test_a_corpus_with_too_few_pairs_is_not_adapted(cisi_tables):
    pairs = _pairs(cisi_tables, 40)
    assert len(pairs) < model_adaptation.MIN_PAIRS
    with pytest.raises(model_adaptation.AdaptationError, match="training pairs, fewer than"):
        model_adaptation.adapt(default_model_path(), pairs)


def test_pairs_of_a_single_paper_are_refused_before_any_training(data_dir):
    # one paper cited by 250 sentences: every other pair in a batch would be a false negative
    pairs = [
        model_adaptation.TrainingPair(
            f"citing sentence {i} about retrieval", "the cited abstract", "p1", CITATION
        )
        for i in range(250)
    ]
    with pytest.raises(model_adaptation.AdaptationError, match="come from a single paper"):
        model_adaptation.adapt(default_model_path(), pairs)
    assert not (data_dir / "models" / "adapted").exists()


TOPICS = [
    ("Vitamin D and bone density", "Vitamin D supplements raise bone density in older adults."),
    ("Aspirin and stroke", "Daily aspirin lowers the risk of a second stroke."),
    ("Citation graphs for recommendation", "A graph neural network over citations recommends references."),
]


def _build(uri: str, embedder) -> None:
    papers = [
        {"paper_id": f"p{i}", "title": title, "abstract": abstract}
        for i, (title, abstract) in enumerate(TOPICS)
    ]
    passages = [
        p.to_row()
        for row in papers
        for p in passages_for_paper(row["paper_id"], title=row["title"], abstract=row["abstract"])
    ]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder)


def test_the_adapted_model_is_a_new_model_that_search_follows_and_the_base_index_refuses(
    data_dir, cisi_tables, tmp_path
):
    pairs = _pairs(cisi_tables, 300)
    config = model_adaptation.AdaptationConfig(**ONE_STEP)
    adaptation = model_adaptation.adapt(default_model_path(), pairs, config)
    assert adaptation.steps == 1 and adaptation.pairs_seen == 8 and adaptation.stopped_by_budget
    assert sum(adaptation.pairs.values()) == len(pairs)
    folder = Path(adaptation.path)
    assert folder.parent == data_dir / "models" / "adapted"
    assert model_adaptation.record_of(adaptation.path) == adaptation
    # the same pairs and config: the saved model, not a second training
    assert model_adaptation.adapt(default_model_path(), pairs, config).seconds == adaptation.seconds

    base = Embedder(query_backend="torch")
    adapted = base.with_model(adaptation.path)
    assert adapted.query_backend == "torch" and adapted.model_name_or_path == adaptation.path
    assert adaptation.base_fingerprint == base.fingerprint != adapted.fingerprint != ""

    adapted_uri = str(tmp_path / "adapted")
    _build(adapted_uri, adapted)
    recorded = model_identity.of_schema(
        indexing.open_table(connect_lancedb(adapted_uri), indexing.PASSAGES_TABLE).schema
    )
    assert recorded.fingerprint == adapted.fingerprint
    # a search started with the bundled model encodes queries with the index's adapted model
    searcher = Embedder(query_backend="torch")
    found = SearchEngine(adapted_uri, searcher).search("does vitamin d raise bone density", k=3)
    assert found[0].title == "Vitamin D and bone density"
    assert searcher.model_name_or_path == adaptation.path
    query = "aspirin after a stroke"
    followed, own, bundled = (e.encode_queries([query]) for e in (searcher, adapted, base))
    assert np.array_equal(followed, own)
    assert (
        np.abs(followed - bundled).max() > 1e-5
    )  # one small step moves the weights a little, but not nothing

    # the base model's index refuses the adapted model: its base is not followed the other way
    base_uri = str(tmp_path / "base")
    _build(base_uri, base)
    with pytest.raises(IndexModelMismatch, match="rebuild the index"):
        SearchEngine(base_uri, Embedder(adaptation.path, query_backend="torch")).search("aspirin", k=3)
    # and another model's adaptation is not followed: a model with other weights stays refused
    other_base = Embedder(adaptation.path)  # its own adaptation's base is not itself
    assert model_adaptation.follow_index(adaptation.path, other_base) is None
    assert model_adaptation.follow_index(adaptation.path, Embedder()) == adaptation.path
    assert (
        json.loads((folder / model_adaptation.RECORD_FILE).read_text())["base_fingerprint"]
        == base.fingerprint
    )


def _write_corpus(cisi_tables, documents: int) -> None:
    papers, passages = cisi_tables
    papers = papers.head(documents)
    tables.write(tables.PAPERS, papers)
    tables.write(
        tables.PASSAGES, passages.filter(pl.col("paper_id").is_in(papers["paper_id"].implode())), "batch-1"
    )


def _materialize():
    from lumina_assets.defs.indexing import passage_index

    result = dg.materialize(
        [passage_index],
        resources={"lancedb": LanceDBResource(), "embedder": EmbedderResource(query_backend="torch")},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    return result.asset_materializations_for_node("passage_index")[0].metadata


FRESH_SEARCH = """
import json, sys
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.search.engine import SearchEngine
embedder = Embedder(query_backend="torch")
found = SearchEngine(sys.argv[1], embedder).search("computer indexing of library catalogues", k=3)
print(json.dumps({"model": embedder.model_name_or_path, "found": len(found)}))
"""


def test_passage_index_adapts_once_and_keeps_the_adapted_model_as_the_corpus_grows(
    data_dir, cisi_tables, monkeypatch
):
    monkeypatch.setenv("LUMINA_ADAPT_EMBEDDINGS", "1")
    monkeypatch.setenv("LUMINA_SENTENCE_VECTORS", "0")
    monkeypatch.setattr(
        model_adaptation, "AdaptationConfig", functools.partial(model_adaptation.AdaptationConfig, **ONE_STEP)
    )
    _write_corpus(cisi_tables, 40)  # too few pairs: the bundled model, and the metadata says why
    small = _materialize()
    assert small["embedding_adapted"].value.startswith("no: the corpus gives")
    assert small["embedding_model"].value == Path(default_model_path()).name

    _write_corpus(cisi_tables, 130)  # ~250 pairs
    first = _materialize()
    assert first["embedding_adapted"].value.startswith("adapted now: ")
    assert first["adaptation_steps"].value == 1 and first["adaptation_stopped_by_budget"].value is True
    assert first["passages_embedded"].value == first["passages"].value  # a new model re-embeds everything
    adapted_name = first["embedding_adapted"].value.removeprefix("adapted now: ")
    assert first["embedding_model"].value == adapted_name

    _write_corpus(cisi_tables, 150)
    grown = _materialize()
    assert grown["embedding_adapted"].value == f"kept: {adapted_name}"
    assert 0 < grown["passages_embedded"].value < grown["passages"].value  # only the new papers' passages
    assert grown["embedding_model"].value == adapted_name

    # the embedding fan-out's parts embed with the kept adapted model (with the base model every passage would
    # look new), through a new embedder: the resource's own is not changed under passage_index
    from lumina_assets.defs import indexing as index_stage
    from lumina_assets.indexing import staged_vectors

    db = connect_lancedb(str(data_dir / "lancedb"))
    base = Embedder(query_backend="torch")
    fanout = index_stage.fanout_embedder(db, base)
    assert fanout.model_name_or_path == str(data_dir / "models" / "adapted" / adapted_name)
    assert base.model_name_or_path == default_model_path()
    upstream_passages, upstream_papers = index_stage._upstream()
    assert staged_vectors.texts_to_embed(db, upstream_passages, upstream_papers, fanout) == []
    assert (
        len(staged_vectors.texts_to_embed(db, upstream_passages, upstream_papers, base))
        == grown["passages"].value
    )

    from lumina_assets.cli.ops import index_status

    assert f"encoder adapted to this corpus (8 pairs, 1 steps: {fanout.model_name_or_path})" in index_status()

    # `lumina serve`'s sentence backfill, started with the bundled model, stores the sentences with the adapted one,
    # and the evidence scorer of a server started with the bundled model finds them
    from lumina_assets.indexing.sentence_vectors import backfill_from_index
    from lumina_assets.search.results import stored_sentences

    backfiller = Embedder(query_backend="torch")
    assert backfill_from_index(db, backfiller)["encoded_passages"] == grown["passages"].value
    assert backfiller.model_name_or_path == fanout.model_name_or_path
    assert backfill_from_index(db, Embedder(query_backend="torch"))["encoded_passages"] == 0  # nothing owed
    stored = stored_sentences(SearchEngine(str(data_dir / "lancedb"), Embedder(query_backend="torch")))
    some = dict(list(zip(upstream_passages["passage_id"], upstream_passages["text"], strict=True))[:5])
    assert stored.lookup(some)  # found under the adapted model's hashes

    # a fresh search process started with the bundled model searches with the adapted one
    seen = run_snippet(FRESH_SEARCH, str(data_dir / "lancedb"), data_dir=data_dir)
    assert seen == {"model": str(data_dir / "models" / "adapted" / adapted_name), "found": 3}

    # switched off again: the bundled model re-embeds the whole index, and the fan-out plans with it
    monkeypatch.setenv("LUMINA_ADAPT_EMBEDDINGS", "0")
    assert index_stage.fanout_embedder(db, base) is base
    off = _materialize()
    assert off["embedding_adapted"].value.startswith("off")
    assert off["passages_embedded"].value == off["passages"].value
