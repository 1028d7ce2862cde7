"""The default pipeline against its own parts, on a fixed SciFact subset: it must beat every single retriever and
plain reciprocal rank fusion by a stated margin, so a pipeline collapsed to one retriever, or with its weighted
fusion replaced by RRF, fails here. Nothing is pinned to a number the code produced: each assertion compares two
rankings of the same queries by SciFact's own relevance judgments.

The subset (fixed) reads the tuning half of SciFact train only (`lumina_assets.corpus.splits.tuning_ids`; the
held-out half is the benchmark's): the relevant abstracts of the first tuning claims, in qrels order, while they add
up to at most 300 abstracts, plus other abstracts drawn with a seeded shuffle of the rest of the corpus up to 600
(random distractors, so neither retriever's own false positives are favoured). Indexed like `passage_index` keeps an
index (with the paper neighbour graph), so the default includes corpus-graph smoothing. The figures measured on it,
and what it does not catch, are in docs/search-quality.md ("The margin tests")."""

from __future__ import annotations

import random

import polars as pl
import pytest
from tuning_split import tuning_qrels, tuning_queries

from evals.ablation import BASELINE, COMPARISONS
from evals.collection_eval import evaluate_run, query_vector_cache, run_queries
from lumina_assets.corpus.collections import Collection, collection_tables
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.search import neighbour_graph
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine

pytestmark = pytest.mark.slow

RELEVANT_DOCS = 300
N_DOCS = 600
SEED = 7

# Each margin is about half the smallest gap measured above, so run-to-run or machine-to-machine float noise (a few
# ten-thousandths of nDCG) never fails a sound pipeline, and a collapse (gap ~0) always does.
SINGLE_RETRIEVER_MARGIN = (
    0.02  # smallest measured gap 0.0310 (int8) / 0.0320 (fp32), vs passage vectors alone
)
BOOST_MARGIN = 0.02  # measured gaps 0.079 (author cue) and 0.058 (year cue)
# measured gaps 0.0135 / 0.0125 (vs plain RRF) and 0.0113 / 0.0130 (the same retrievers under RRF), int8 / fp32
PLAIN_RRF_MARGIN = 0.0075

RETRIEVERS = ["passage_vectors", "passage_fulltext", "paper_fulltext"]


def _only(*kept: str) -> dict:
    """These retrievers and no other, without corpus-graph smoothing."""
    return {
        "neighbour_smoothing": 0.0,
        **{name: name in kept for name in RETRIEVERS},
    }


SINGLE_RETRIEVERS = {
    "BM25 alone (passage full text)": _only("passage_fulltext"),
    "BM25 alone (paper full text)": _only("paper_fulltext"),
    "passage vectors alone": _only("passage_vectors"),
}


FIRST_NAMES = ["Ada", "Alan", "Grace", "Claude", "Edsger", "Barbara", "Donald", "Frances", "John", "Karen"]
LAST_NAMES = ["Lovelace", "Turing", "Hopper", "Shannon", "Dijkstra", "Liskov", "Knuth", "Allen", "Backus"]


def _author(position: int) -> str:
    """90 distinct names: each shared by 6-7 of the 600 papers, so a cue lifts a handful, not one."""
    return f"{FIRST_NAMES[position % 10]} {LAST_NAMES[position // 10 % 9]}"


def _year(position: int) -> int:
    return 1995 + position * 7 % 30  # 1995..2024, ~20 papers a year


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(batch_size=32)


def scifact_subset_of(root) -> Collection:
    """The fixed subset above, from a SciFact BEIR folder: tuning-half claims only."""
    from lumina_assets.corpus.collections import iter_corpus_records

    corpus = {
        record["_id"]: {"title": record["title"], "text": record["text"]}
        for _, record, _ in iter_corpus_records(root)
        if record is not None
    }
    queries = tuning_queries(root)
    qrels = tuning_qrels(root)
    chosen: list[str] = []
    kept: dict[str, str] = {}
    for qid, docs in qrels.items():
        new = [doc for doc in docs if doc not in chosen]
        if len(chosen) + len(new) > RELEVANT_DOCS:
            break
        chosen += new
        kept[qid] = queries[qid]
    others = sorted(set(corpus) - set(chosen))
    random.Random(SEED).shuffle(others)
    chosen += others[: N_DOCS - len(chosen)]
    return Collection("scifact", {d: corpus[d] for d in chosen}, kept, {q: qrels[q] for q in kept})


@pytest.fixture(scope="module")
def scifact_subset(shared_data) -> Collection:
    return scifact_subset_of(shared_data / "scifact")


@pytest.fixture(scope="module")
def index_uri(tmp_path_factory, scifact_subset, embedder) -> str:
    uri = str(tmp_path_factory.mktemp("quality-lancedb") / "db")
    papers, passages = collection_tables(scifact_subset, embedder.token_counter())
    # an author and a year per paper (SciFact records have neither) for the boost tests: metadata only, neither
    # is embedded nor in the full-text column, so every other figure here is the same with or without them
    papers = papers.with_columns(
        pl.Series("authors", [[_author(i)] for i in range(papers.height)], dtype=pl.List(pl.String)),
        pl.Series("year", [_year(i) for i in range(papers.height)], dtype=pl.Int32),
    )
    config = indexing.IndexConfig(sentence_vectors=False)
    db = connect_lancedb(uri)
    indexing.index_corpus(db, passages, papers, embedder, config)
    assert neighbour_graph.keep_graph(
        db
    )  # the paper neighbour graph, as passage_index keeps it: the default smooths
    return uri


@pytest.fixture(scope="module")
def ndcg(index_uri, embedder, scifact_subset):
    """nDCG@10 of a configuration (changes to SearchConfig) over the subset's claims, query vectors shared."""
    vectors = query_vector_cache(SearchEngine(index_uri, embedder), scifact_subset)

    def measure(collection: Collection = scifact_subset, **changes) -> float:
        engine = SearchEngine(index_uri, embedder, SearchConfig(**changes))
        engine.embedding_cache = vectors if collection is scifact_subset else None
        run, _ = run_queries(engine, collection, k=100)
        return evaluate_run(run, collection.qrels)["ndcg@10"]

    return measure


def test_the_subset_is_the_fixed_one(scifact_subset):
    """The figures above belong to this subset: a change in how it is drawn must be seen, not silently re-measured."""
    assert len(scifact_subset.corpus) == N_DOCS
    assert len(scifact_subset.queries) == 344
    relevant = {doc for docs in scifact_subset.qrels.values() for doc in docs}
    assert len(relevant) <= RELEVANT_DOCS and relevant <= set(scifact_subset.corpus)


def test_default_beats_every_single_retriever_by_a_margin(ndcg):
    default = ndcg()
    gaps = {name: default - ndcg(**changes) for name, changes in SINGLE_RETRIEVERS.items()}
    short = {name: round(gap, 4) for name, gap in gaps.items() if gap < SINGLE_RETRIEVER_MARGIN}
    assert not short, f"default nDCG@10 {default:.4f}; gaps under {SINGLE_RETRIEVER_MARGIN}: {short}"


def test_default_beats_plain_rrf_by_a_margin(ndcg):
    """Plain RRF as `lumina eval beir --ablation` defines it (passage BM25 + passage vectors, k = 60), and the
    default's own retrievers fused by RRF (no smoothing, as plain RRF): the default must be worth the margin over
    both."""
    default = ndcg()
    plain = ndcg(**COMPARISONS[BASELINE])
    same_retrievers = ndcg(fusion="rrf", rrf_k=60, neighbour_smoothing=0.0)
    assert default - plain >= PLAIN_RRF_MARGIN, (default, plain)
    assert default - same_retrievers >= PLAIN_RRF_MARGIN, (default, same_retrievers)


def _cued(subset: Collection, cue) -> Collection:
    """The claims with a cue naming their first relevant paper's (synthetic) author or year, as a user who
    remembers it would add; the judgments are SciFact's."""
    position = {doc: i for i, doc in enumerate(subset.corpus)}
    queries = {
        qid: f"{text} {cue(position[next(iter(subset.qrels[qid]))])}" for qid, text in subset.queries.items()
    }
    return Collection(subset.name, subset.corpus, queries, subset.qrels)


def test_the_author_boost_lifts_the_named_authors_papers_by_a_margin(ndcg, scifact_subset):
    cued = _cued(scifact_subset, lambda i: f"by {_author(i)}")
    boosted, unboosted = ndcg(cued), ndcg(cued, author_boost=0.0)
    assert boosted - unboosted >= BOOST_MARGIN, (boosted, unboosted)


def test_the_year_boost_lifts_papers_of_the_named_years_by_a_margin(ndcg, scifact_subset):
    cued = _cued(scifact_subset, lambda i: f"published between {_year(i) - 1} and {_year(i) + 1}")
    boosted, unboosted = ndcg(cued), ndcg(cued, year_boost=0.0)
    assert boosted - unboosted >= BOOST_MARGIN, (boosted, unboosted)
