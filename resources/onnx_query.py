"""A fast path for encoding one query: the model's transformer exported to ONNX once, run with onnxruntime.

Why: sentence-transformers spends ~22 ms on a 20-token query on 2 cores (most of it framework overhead around a
tiny forward pass); onnxruntime does the same forward pass in ~8 ms, which is what lets the whole search pipeline
meet its 25 ms p50 budget. Documents are still encoded by sentence-transformers (batches amortize the overhead).

Only models whose sentence-transformers pipeline is Transformer -> mean Pooling [-> Normalize] qualify (the
bundled all-MiniLM-L6-v2 and most sentence-transformers models); anything else, a failed export, or outputs that
differ from sentence-transformers by more than `TOLERANCE` disables the fast path with a logged reason.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import warnings
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # max |onnx - sentence-transformers| on the probe texts, per vector component
PROBE_TEXTS = ("warm up", "Vitamin D deficiency is associated with an increased risk of multiple sclerosis.")


class OnnxUnavailable(RuntimeError):
    """The fast path cannot be used for this model here; the reason is the message."""


def _mean_pooling_pipeline(model) -> tuple[object, bool]:
    """(the transformer module, whether vectors are normalized) or OnnxUnavailable."""
    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if len(modules) < 2 or names[0] != "Transformer" or names[1] != "Pooling":
        raise OnnxUnavailable(f"pipeline {names} is not Transformer -> Pooling")
    pooling = modules[1]
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers >= 6
    if mode is None and hasattr(pooling, "get_pooling_mode_str"):
        mode = pooling.get_pooling_mode_str()
    if mode != "mean":
        raise OnnxUnavailable(f"pooling mode {mode!r} is not mean")
    rest = names[2:]
    if rest not in ([], ["Normalize"]):
        raise OnnxUnavailable(f"modules after pooling {rest} are not supported")
    return modules[0], rest == ["Normalize"]


def _cache_key(model_name_or_path: str) -> str:
    """Changes when the weights, torch or onnxruntime change (a stale export is never reused)."""
    import onnxruntime
    import torch

    parts = [model_name_or_path, torch.__version__, onnxruntime.__version__]
    path = Path(model_name_or_path)
    if path.is_dir():
        for file in sorted(path.rglob("*")):
            if file.is_file() and file.suffix in (".safetensors", ".bin", ".json", ".txt"):
                stat = file.stat()
                parts.append(f"{file.relative_to(path)}:{stat.st_size}:{int(stat.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _export(transformer, input_names: list[str], target: Path) -> None:
    """torch.onnx export of the bare transformer (dynamic batch and sequence), written atomically."""
    import torch

    auto_model = transformer.auto_model

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(input_names, tensors, strict=True))).last_hidden_state

    sample = transformer.tokenizer(["an example query"], return_tensors="pt")
    args = tuple(sample[name] for name in input_names)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*input_names, "last_hidden_state"]}
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(auto_model.eval()),
            args,
            str(partial),
            input_names=input_names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    partial.replace(target)


class OnnxQueryEncoder:
    """`encode(texts) -> (n, dim) float32`, numerically the same as the sentence-transformers model it came from."""

    def __init__(
        self, model, model_name_or_path: str, cache_dir: Path, *, normalize: bool, threads: int = 2
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError as error:
            raise OnnxUnavailable("onnxruntime is not installed") from error
        transformer, has_normalize_module = _mean_pooling_pipeline(model)
        self.normalize = normalize or has_normalize_module
        self.tokenizer = transformer.tokenizer
        self.max_length = int(getattr(transformer, "max_seq_length", None) or 512)
        accepted = inspect.signature(transformer.auto_model.forward).parameters
        produced = self.tokenizer(["x"], return_tensors="np").keys()
        self.input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in produced]
        self.input_names = [n for n in self.input_names if n in accepted]
        if "input_ids" not in self.input_names or "attention_mask" not in self.input_names:
            raise OnnxUnavailable(f"tokenizer inputs {list(produced)} lack input_ids / attention_mask")

        self.path = cache_dir / f"{_cache_key(model_name_or_path)}.onnx"
        if not self.path.exists():
            try:
                _export(transformer, self.input_names, self.path)
            except Exception as error:  # noqa: BLE001 - any exporter failure means: use the slow path
                raise OnnxUnavailable(f"ONNX export failed: {type(error).__name__}: {error}") from error
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, min(threads, os.cpu_count() or 1))
        options.inter_op_num_threads = 1
        # no busy-waiting between ops: on a loaded machine spinning threads steal the cores they wait for
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # noqa: BLE001 - a corrupt cached file: drop it so the next process re-exports
            self.path.unlink(missing_ok=True)
            raise OnnxUnavailable(f"cannot load {self.path.name}: {error}") from error

        reference = model.encode(
            list(PROBE_TEXTS), normalize_embeddings=self.normalize, convert_to_numpy=True
        )
        difference = float(np.abs(self.encode(list(PROBE_TEXTS)) - reference).max())
        if difference > TOLERANCE:
            raise OnnxUnavailable(f"ONNX output differs from sentence-transformers by {difference:.2e}")

    def encode(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer(
            list(texts), return_tensors="np", padding=True, truncation=True, max_length=self.max_length
        )
        feeds = {name: np.asarray(batch[name], dtype=np.int64) for name in self.input_names}
        hidden = self.session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        vectors = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if self.normalize:
            vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors.astype(np.float32)
