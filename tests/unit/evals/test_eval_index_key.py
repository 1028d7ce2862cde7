"""An evaluation index is reused only for the same weights: the folder's key holds the model's fingerprint, so new
weights under the same name or path (a model fine-tuned in place) build a new index instead of searching an index
whose vectors came from the old weights."""

from __future__ import annotations

from hashing_embedder import HashingEmbedder

from evals.collection_eval import eval_index_dir
from lumina_assets.corpus.collections import load_collection
from lumina_assets.indexing.lancedb_tables import IndexConfig


def test_other_weights_under_the_same_name_get_another_eval_index(shared_data):
    collection = load_collection(shared_data / "cisi")
    config = IndexConfig(sentence_vectors=False)
    before, after = HashingEmbedder(seed=0), HashingEmbedder(seed=1)  # one name, two sets of weights
    assert before.model_id == after.model_id and before.fingerprint != after.fingerprint
    assert eval_index_dir(collection, before, config) != eval_index_dir(collection, after, config)
    assert eval_index_dir(collection, before, config) == eval_index_dir(
        collection, HashingEmbedder(seed=0), config
    )
