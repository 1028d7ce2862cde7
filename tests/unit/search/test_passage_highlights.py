"""Every passage shown in a result carries its own best sentence when that sentence is close to the result's best;
the result's first (best) highlight is the same as before."""

from __future__ import annotations

from hashing_embedder import HashingEmbedder

from lumina_assets.search.evidence import EvidenceScorer, first_highlight

QUERY = "citation triplet loss for document embeddings"
RESULT = [
    "SPECTER uses a citation triplet loss to train document embeddings. The model is a Transformer.",
    "We collected papers from many venues. A citation triplet loss shapes the document embeddings of SPECTER.",
    "The weather in Seattle was rainy during the whole project.",
]


def test_each_relevant_passage_gets_a_highlight_and_the_best_one_is_unchanged():
    embedder = HashingEmbedder()
    before = EvidenceScorer(embedder, max_highlights=1, passage_floor=2.0).highlight(QUERY, [RESULT])[0]
    after = EvidenceScorer(embedder, max_highlights=1).highlight(QUERY, [RESULT])[0]
    assert sum(1 for highlights in before if highlights) == 1  # one highlight per result left a passage bare
    assert bool(after[0]) and bool(after[1]) and not after[2]  # the unrelated passage stays unmarked
    assert first_highlight(after) == first_highlight(before)
