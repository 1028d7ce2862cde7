"""The encoder of passages, sentences and queries: the model's transformer exported to ONNX once and run by
onnxruntime in fp32 or, quantized per channel, in int8; no torch once exported (docs/embedding.md). Only
Transformer -> mean Pooling [-> Normalize] models qualify, and only exports that reproduce sentence-transformers."""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import logging
import warnings
from pathlib import Path

import numpy as np

from lumina_assets.core.tables import atomic_replace
from lumina_assets.indexing.length_batches import padded_inputs

log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # max |onnx - sentence-transformers| on the probe texts, per vector component
INT8_MIN_COSINE = 0.98  # least cosine of an int8 vector to its fp32 one on the probe texts
# Most texts and most padded tokens per forward pass (texts sorted by length, so a batch pads to its longest text):
# passages are capped by the tokens, and 128 texts let short sentences fill a pass that keeps every core busy.
BATCH_TEXTS = 128
BATCH_TOKENS = 8192
PROBE_TEXTS = (
    "warm up",
    "Vitamin D deficiency is associated with an increased risk of multiple sclerosis.",
    "Über-expression of IL-6 (p < 0.05) in 1,024 naïve CD4+ T cells; β-catenin",
    "long " * 600,  # past the model's token limit: truncation must match too
)


class OnnxUnavailable(RuntimeError):
    """The fast path cannot be used for this model here; the reason is the message."""


def _mean_pooling_pipeline(model) -> tuple[object, bool]:
    """(the transformer module, whether vectors are normalized) or OnnxUnavailable."""
    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if len(modules) < 2 or names[0] != "Transformer" or names[1] != "Pooling":
        raise OnnxUnavailable(f"pipeline {names} is not Transformer -> Pooling")
    pooling = modules[1]
    mode = getattr(pooling, "pooling_mode", None)
    if mode != "mean":
        raise OnnxUnavailable(f"pooling mode {mode!r} is not mean")
    rest = names[2:]
    if rest not in ([], ["Normalize"]):
        raise OnnxUnavailable(f"modules after pooling {rest} are not supported")
    return modules[0], rest == ["Normalize"]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "-"


# bumped when what an export contains changes, so an older export (or another checkout's) is never mixed up with it
EXPORT_FORMAT = "eager-attention+fused-2"


def cache_key(model_name_or_path: str) -> str:
    """Changes when the weights, the libraries or the export format change, so a stale export is never reused
    (imports nothing)."""
    parts = [model_name_or_path, EXPORT_FORMAT] + [
        f"{p}={_version(p)}" for p in ("torch", "transformers", "sentence-transformers", "onnxruntime")
    ]
    path = Path(model_name_or_path)
    if path.is_dir():
        for file in sorted(path.rglob("*")):
            if file.is_file() and file.suffix in (".safetensors", ".bin", ".json", ".txt"):
                stat = file.stat()
                parts.append(f"{file.relative_to(path)}:{stat.st_size}:{int(stat.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _paths(cache_dir: Path, model_name_or_path: str) -> tuple[Path, Path, Path]:
    """(model.onnx, tokenizer.json, settings.json) of one export."""
    stem = cache_dir / cache_key(model_name_or_path)
    return stem.with_suffix(".onnx"), stem.with_suffix(".tokenizer.json"), stem.with_suffix(".json")


# in the file name: a model quantized another way is never reused as this one
INT8_RECIPE = "matmul-per-channel"


def _int8_path(onnx_path: Path) -> Path:
    return onnx_path.with_suffix(f".int8-{INT8_RECIPE}.onnx")


def quantize_int8(onnx_path: Path) -> Path:
    """The int8 model beside an fp32 export, written once: MatMul weights quantized per output channel,
    activations per batch at run time; the fused Attention projections stay fp32 (quantizing them cost
    ranking quality)."""
    target = _int8_path(onnx_path)
    if target.exists():
        return target
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as error:
        raise OnnxUnavailable(f"int8 quantization needs {error.name}") from error

    def write(path: Path) -> None:
        # silences the quantizer's pre-processing advice
        logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))
        quantize_dynamic(
            str(onnx_path),
            str(path),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            # fused ops (Attention, SkipLayerNormalization) have no shape inference: their outputs are float
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )

    root = logging.getLogger()
    level = root.level
    try:
        atomic_replace(target, write)
    except Exception as error:  # noqa: BLE001 - any quantizer failure means: no int8 form here
        raise OnnxUnavailable(f"int8 quantization failed: {type(error).__name__}: {error}") from error
    finally:
        root.setLevel(level)
    return target


def _export_onnx(transformer, input_names: list[str], target: Path) -> None:
    """torch.onnx export of the bare transformer (dynamic batch and sequence), traced with eager attention: the
    SDPA trace hides the attention pattern behind IsNaN / Where guards that onnxruntime cannot fuse (a copy is
    traced, so the loaded model keeps its own attention for document encoding)."""
    import copy

    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(input_names, tensors, strict=True))).last_hidden_state

    traced = copy.deepcopy(transformer.auto_model).eval()
    if hasattr(traced, "set_attn_implementation"):
        try:
            traced.set_attn_implementation("eager")
        except (ValueError, NotImplementedError) as error:  # a model without eager attention: trace as loaded
            log.debug("eager attention unavailable for the ONNX export: %s", error)
    sample = transformer.tokenizer(["an example query"], return_tensors="pt")
    args = tuple(sample[name] for name in input_names)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*input_names, "last_hidden_state"]}

    def write(path: Path) -> None:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHiddenState(traced),
                args,
                str(path),
                input_names=input_names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )

    atomic_replace(target, write)


def _fuse_transformer_ops(onnx_path: Path, config) -> bool:
    """Rewrite the export with onnxruntime's transformer fusions (fewer nodes, a faster query, the same
    numbers to rounding); False, leaving the plain export, when this model's graph cannot be fused."""
    heads, hidden = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    if not heads or not hidden:
        return False
    try:
        from onnxruntime.transformers import optimizer

        for name in list(logging.root.manager.loggerDict):  # its modules log every fusion step at INFO
            if name.startswith(("onnx_model", "fusion_", "onnxruntime.transformers")):
                logging.getLogger(name).setLevel(logging.ERROR)
        model = optimizer.optimize_model(
            str(onnx_path), model_type="bert", num_heads=int(heads), hidden_size=int(hidden), opt_level=0
        )
        if not model.get_fused_operator_statistics().get("Attention"):
            return False  # nothing gained where attention did not fuse
        atomic_replace(onnx_path, lambda path: model.save_model_to_file(str(path)))
        return True
    except Exception as error:  # noqa: BLE001 - any optimizer failure leaves the plain export, which works
        log.debug("transformer fusion skipped: %s: %s", type(error).__name__, error)
        return False


def export(model, model_name_or_path: str, cache_dir: Path) -> OnnxQueryEncoder:
    """Export a sentence-transformers `model` (once; reused by every later process) and check it reproduces it."""
    transformer, has_normalize_module = _mean_pooling_pipeline(model)
    backend = getattr(transformer.tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise OnnxUnavailable("the model has no fast (tokenizers) tokenizer")
    accepted = inspect.signature(transformer.auto_model.forward).parameters
    produced = transformer.tokenizer(["x"], return_tensors="np").keys()
    input_names = [
        n for n in ("input_ids", "attention_mask", "token_type_ids") if n in produced and n in accepted
    ]
    if "input_ids" not in input_names or "attention_mask" not in input_names:
        raise OnnxUnavailable(f"tokenizer inputs {list(produced)} lack input_ids / attention_mask")

    onnx_path, tokenizer_path, settings_path = _paths(cache_dir, model_name_or_path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    # an int8 model quantized from an earlier export is made again from this one
    _int8_path(onnx_path).unlink(missing_ok=True)
    try:
        _export_onnx(transformer, input_names, onnx_path)
    except Exception as error:  # noqa: BLE001 - any exporter failure means: use the slow path
        raise OnnxUnavailable(f"ONNX export failed: {type(error).__name__}: {error}") from error
    atomic_replace(tokenizer_path, lambda path: backend.save(str(path)))
    settings = {
        "input_names": input_names,
        "max_length": int(getattr(transformer, "max_seq_length", None) or 512),
        "normalize_module": has_normalize_module,
        "pad_id": int(transformer.tokenizer.pad_token_id or 0),
        "pad_token": str(transformer.tokenizer.pad_token or "[PAD]"),
    }
    atomic_replace(settings_path, lambda path: path.write_text(json.dumps(settings, indent=2)))

    fused = _fuse_transformer_ops(onnx_path, transformer.auto_model.config)
    encoder = OnnxQueryEncoder.load(model_name_or_path, cache_dir)
    reference = model.encode(list(PROBE_TEXTS), normalize_embeddings=True, convert_to_numpy=True)
    difference = float(np.abs(encoder.encode(list(PROBE_TEXTS)) - reference).max())
    if difference > TOLERANCE and fused:  # a fusion that changed the numbers: the plain export instead
        log.warning("fused ONNX export differs by %.2e; using the unfused export", difference)
        _export_onnx(transformer, input_names, onnx_path)
        encoder = OnnxQueryEncoder.load(model_name_or_path, cache_dir)
        difference = float(np.abs(encoder.encode(list(PROBE_TEXTS)) - reference).max())
    if difference > TOLERANCE:
        for path in (onnx_path, tokenizer_path, settings_path):
            path.unlink(missing_ok=True)
        raise OnnxUnavailable(f"ONNX output differs from sentence-transformers by {difference:.2e}")
    return encoder


class OnnxQueryEncoder:
    """`encode(texts) -> (n, dim) float32` from an export (fp32, or its int8 quantization): onnxruntime and
    tokenizers only, no torch. `form` says which; texts are encoded in length-sorted batches."""

    def __init__(self, onnx_path: Path, tokenizer_path: Path, settings: dict, *, form: str = "fp32"):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from lumina_assets.indexing.encoder_forms import available_cores

        self.path = onnx_path
        self.form = form
        self.input_names: list[str] = settings["input_names"]
        self.pad_id = int(settings["pad_id"])
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(max_length=int(settings["max_length"]))
        self.tokenizer.no_padding()  # batches are padded here, after sorting by length
        options = ort.SessionOptions()
        options.intra_op_num_threads = available_cores()
        options.inter_op_num_threads = 1
        # no busy-waiting between ops: on a loaded machine spinning threads steal the cores they wait for
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._dimension: int | None = None

    @classmethod
    def load(cls, model_name_or_path: str, cache_dir: Path, *, form: str = "fp32") -> OnnxQueryEncoder:
        """The cached export of this model in `form` (fp32 or int8; int8 is quantized from the fp32 export the
        first time and checked against it); FileNotFoundError when there is no export, OnnxUnavailable when it is
        unreadable (dropped) or the form cannot be made."""
        try:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as error:
            raise OnnxUnavailable(f"{error.name} is not installed") from error
        paths = _paths(cache_dir, model_name_or_path)
        if not all(path.exists() for path in paths):
            raise FileNotFoundError(paths[0])
        onnx_path, tokenizer_path, settings_path = paths
        try:
            settings = json.loads(settings_path.read_text())
            fp32 = cls(onnx_path, tokenizer_path, settings)
        except Exception as error:  # noqa: BLE001 - a corrupt cached file: drop it so the next process re-exports
            for path in (*paths, _int8_path(onnx_path)):
                path.unlink(missing_ok=True)
            raise OnnxUnavailable(f"cannot load {onnx_path.name}: {error}") from error
        if form == "fp32":
            return fp32
        if form != "int8":
            raise OnnxUnavailable(f"no ONNX encoder for the {form} form")
        fresh = not _int8_path(onnx_path).exists()
        int8_path = quantize_int8(onnx_path)
        try:
            int8 = cls(int8_path, tokenizer_path, settings, form="int8")
        except Exception as error:  # noqa: BLE001
            int8_path.unlink(missing_ok=True)
            raise OnnxUnavailable(f"cannot load {int8_path.name}: {error}") from error
        if fresh:  # checked once, when made: a quantization that broke the model is never used
            probes = list(PROBE_TEXTS)
            agreement = float((int8.encode(probes) * fp32.encode(probes)).sum(axis=1).min())
            if agreement < INT8_MIN_COSINE:
                int8_path.unlink(missing_ok=True)
                raise OnnxUnavailable(f"int8 vectors agree with fp32 only to cosine {agreement:.4f}")
        return int8

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            width = self.session.get_outputs()[0].shape[-1]
            self._dimension = width if isinstance(width, int) else int(self.encode(["x"]).shape[1])
        return self._dimension

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors in the input order. Texts are tokenized once, sorted by token length and run in batches of at
        most BATCH_TEXTS texts and BATCH_TOKENS padded tokens, so a batch pads only to its own longest text."""
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out: np.ndarray | None = None
        begin = 0
        while begin < len(order):
            end = begin + 1
            while end < len(order) and end - begin < BATCH_TEXTS:
                if (end - begin + 1) * len(encodings[order[end]].ids) > BATCH_TOKENS:
                    break
                end += 1
            chosen = order[begin:end]
            vectors = self._forward([encodings[i] for i in chosen])
            if out is None:
                out = np.empty((len(encodings), vectors.shape[1]), dtype=np.float32)
            out[chosen] = vectors
            begin = end
        return out if out is not None else np.zeros((0, self.dimension), dtype=np.float32)

    def _forward(self, encodings) -> np.ndarray:
        feeds = padded_inputs(encodings, self.input_names, self.pad_id)
        hidden = self.session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        vectors = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors.astype(np.float32)
