"""Which numeric form encodes passages on this machine: `fp16` on a CUDA device, `int8` on a CPU with 8-bit
dot-product instructions, `fp32` elsewhere (docs/embedding.md). Float forms may share an index; int8 vectors
only with int8 (`compatible`)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

CPU_FORMS = ("fp32", "int8")
GPU_FORMS = ("fp16",)
FORMS = (*CPU_FORMS, *GPU_FORMS)
FLOAT_FORMS = frozenset({"fp32", "fp16", "bf16"})  # close enough to fp32 that mixing is safe
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})

# GPU batch size: activations of one text at the model's length, times a safety factor for the attention maps and
# the framework's workspace; the batch uses at most half of the free memory
GPU_BYTES_PER_TOKEN = 384 * 2 * 48  # hidden size x fp16 bytes x (layers x live tensors), generous for MiniLM
GPU_MIN_BATCH, GPU_MAX_BATCH = 32, 1024


@dataclass(frozen=True)
class EncoderPlan:
    """How this machine encodes: `form` (what the index records), `device`, texts per batch, CPU threads, why."""

    form: str
    device: str = "cpu"
    batch_size: int = 32
    threads: int = 1
    reason: str = ""


def compatible(a: str, b: str) -> bool:
    """Whether vectors of forms `a` and `b` may be compared in one index ("" is an index from before forms were
    recorded: built by sentence-transformers in fp32)."""
    a, b = a or "fp32", b or "fp32"
    return a == b or (a in FLOAT_FORMS and b in FLOAT_FORMS)


def query_form(index_form: str) -> str:
    """The CPU form that encodes queries (and new passages) for an index built in `index_form`."""
    index_form = index_form or "fp32"
    return index_form if index_form in CPU_FORMS else "fp32"


@functools.lru_cache(maxsize=1)
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is absent: fp32 is then chosen)."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def available_cores() -> int:
    """The cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cuda_free_memory() -> int | None:
    """Free bytes on the first CUDA device, or None without one. torch is imported only where a driver is present
    (/dev/nvidiactl or CUDA_VISIBLE_DEVICES), so a CPU machine never pays for the import."""
    from lumina_assets.core import settings

    if not (os.path.exists("/dev/nvidiactl") or settings.get().embedding.cuda_visible_devices):
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        free, _total = torch.cuda.mem_get_info()
        return int(free)
    except Exception:  # noqa: BLE001 - a broken driver means: no GPU
        return None


def gpu_batch_size(free_bytes: int, max_tokens: int = 256) -> int:
    """Texts per GPU batch: half the free memory over one text's activations, within [32, 1024]."""
    per_text = GPU_BYTES_PER_TOKEN * max_tokens
    return int(min(GPU_MAX_BATCH, max(GPU_MIN_BATCH, (free_bytes // 2) // per_text)))


def choose(
    flags: frozenset[str],
    *,
    gpu_free_bytes: int | None = None,
    cores: int = 1,
    requested: str = "auto",
) -> EncoderPlan:
    """The plan for a machine with these CPU `flags`, GPU memory and cores; `requested` (auto or a form) overrides
    the choice (a CPU form never runs on the GPU, fp16 only on one)."""
    if requested not in ("auto", *FORMS):
        raise ValueError(f"embedding form must be auto or one of {FORMS}, not {requested!r}")
    if requested in ("auto", "fp16") and gpu_free_bytes is not None:
        batch = gpu_batch_size(gpu_free_bytes)
        return EncoderPlan(
            "fp16", "cuda", batch, cores, f"CUDA device, {gpu_free_bytes / 2**30:.1f} GiB free"
        )
    if requested == "fp16":
        requested = "fp32"  # no GPU here: the float form it is compatible with
    if requested == "auto":
        vnni = sorted(flags & INT8_FLAGS)
        if vnni:
            return EncoderPlan("int8", "cpu", 32, cores, f"CPU has {', '.join(vnni)}")
        return EncoderPlan("fp32", "cpu", 32, cores, "CPU without 8-bit dot-product instructions")
    return EncoderPlan(requested, "cpu", 32, cores, "requested (LUMINA_EMBEDDING_FORM)")


def plan_for_this_machine(requested: str = "auto", *, use_gpu: bool = True) -> EncoderPlan:
    """`choose` with this machine's CPU flags, GPU (when `use_gpu`) and cores."""
    free = cuda_free_memory() if use_gpu and requested in ("auto", "fp16") else None
    return choose(cpu_flags(), gpu_free_bytes=free, cores=available_cores(), requested=requested)
