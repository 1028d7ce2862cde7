"""A fast deterministic embedder for tests that exercise indexing and search plumbing, not model quality: each word
hashes to a signed coordinate (the hashing trick), so texts sharing words have a high cosine."""

from __future__ import annotations

import hashlib
import re

import numpy as np

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """`seed` picks another hash function: a different "model" of the same dimension and name, told apart only by
    its `fingerprint` (what the index records of a real model's weights)."""

    model_id = "test-hashing-embedder"
    model_name = model_id

    def __init__(self, dimension: int = 64, seed: int = 0):
        self.dimension = dimension
        self.seed = seed
        self._key = str(seed).encode() if seed else b""

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"hashing|blake2b|{self.dimension}|{self.seed}".encode()).hexdigest()[:24]

    def encode(self, texts, **_) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8, key=self._key).digest()
                index = int.from_bytes(digest[:4], "little") % self.dimension
                out[row, index] += 1.0 if digest[4] & 1 else -1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else out[row]
        return out

    def encode_queries(self, texts) -> np.ndarray:
        return self.encode(texts)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, recording every text it is asked to embed (what a run embedded again, or did not)."""

    def __init__(self, dimension: int = 64):
        super().__init__(dimension=dimension)
        self.texts: list[str] = []

    def encode(self, texts, **kwargs):
        self.texts += list(texts)
        return super().encode(texts, **kwargs)


def embedder_resource(embedder: HashingEmbedder | None = None):
    """The project's EmbedderResource handing out `embedder` (a new 64-d hashing one per call by default) instead of
    loading a model."""
    from resources.embedder import EmbedderResource

    class TestEmbedderResource(EmbedderResource):
        def setup_for_execution(self, context) -> None:  # no model to load
            pass

        def get_embedder(self):
            return embedder if embedder is not None else HashingEmbedder(dimension=64)

    return TestEmbedderResource()
