"""`lumina bench embed`: passages/s of sentence-transformers (the path passages took before the ONNX encoder) and of
each candidate form on the same texts in one run, their cosine agreement with it, and nDCG@10 on SciFact train and
CISI with an index built in each form.

Speed is measured in interleaved rounds (every round encodes the same texts with every encoder, in a rotated
order), so a change in machine load touches every encoder alike; the figure is the median round. Candidates:
the ONNX export in fp32 and int8 (the forms an index can be built in, indexing/encoder_forms.py) and
sentence-transformers under torch's bf16 autocast (measured only: it would be kept if it were the fastest).

Quality: one eval index per collection and form (evals/collection_eval.py, reused across runs), searched with the
default search setting; `ndcg_delta_<collection>` is the form's nDCG@10 minus fp32's. The chosen form is the fastest whose
deltas are within QUALITY_TOLERANCE on every collection measured.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BASELINE = "sentence-transformers"
CANDIDATES = ("fp32", "int8", "bf16")
INDEX_FORMS = ("fp32", "int8")  # forms an index can be built in (bf16 is not chosen: see encoder_forms)
QUALITY_TOLERANCE = 0.005  # nDCG@10 a form may lose against fp32 on any collection
COLLECTIONS = {"scifact": ("scifact", "train"), "cisi": ("cisi", "test")}


@dataclass
class EmbedBenchResult:
    texts: int
    mean_tokens: float
    rounds: int
    per_s: dict[str, list[float]] = field(default_factory=dict)  # encoder -> passages/s of every round
    cosine: dict[str, tuple[float, float]] = field(default_factory=dict)  # encoder -> (mean, min) to baseline
    ndcg: dict[str, dict[str, float]] = field(default_factory=dict)  # collection -> form -> nDCG@10
    index_seconds: dict[str, dict[str, float]] = field(default_factory=dict)  # collection -> form -> build s
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    machine_form: str = ""

    def median(self, encoder: str) -> float:
        return statistics.median(self.per_s[encoder]) if self.per_s.get(encoder) else 0.0

    def delta(self, collection: str, form: str) -> float | None:
        found = self.ndcg.get(collection, {})
        if form not in found or "fp32" not in found:
            return None
        return round(found[form] - found["fp32"], 4)

    def quality_holds(self, form: str) -> bool | None:
        """Within QUALITY_TOLERANCE of fp32 on every measured collection; None where nothing was measured."""
        deltas = [self.delta(c, form) for c in self.ndcg]
        deltas = [d for d in deltas if d is not None]
        if form == "fp32":
            return True
        return None if not deltas else all(d >= -QUALITY_TOLERANCE for d in deltas)

    @property
    def chosen_form(self) -> str:
        """The fastest index form whose quality holds (unmeasured quality: the machine's own choice)."""
        measured = [f for f in INDEX_FORMS if self.quality_holds(f) is not None]
        if len(measured) < 2:
            return self.machine_form or "fp32"
        holding = [f for f in INDEX_FORMS if self.quality_holds(f)]
        return max(holding, key=self.median)

    def summary(self) -> dict:
        form = self.chosen_form
        baseline = self.median(BASELINE)
        per_s = self.median(form)
        return {
            "baseline_per_s": round(baseline, 2),
            "per_s": round(per_s, 2),
            "ratio": round(per_s / baseline, 2) if baseline else None,
            "form": form,
            "ndcg_delta_scifact": self.delta("scifact", form),
            "ndcg_delta_cisi": self.delta("cisi", form),
            "machine_form": self.machine_form,
            "texts": self.texts,
            "mean_tokens": round(self.mean_tokens, 1),
            "rounds": self.rounds,
            "encoders": {
                name: {
                    "per_s_median": round(self.median(name), 2),
                    "per_s_rounds": [round(v, 2) for v in rates],
                    "cosine_to_baseline_mean": round(self.cosine[name][0], 5)
                    if name in self.cosine
                    else None,
                    "cosine_to_baseline_min": round(self.cosine[name][1], 5) if name in self.cosine else None,
                }
                for name, rates in self.per_s.items()
            },
            "ndcg10": self.ndcg,
            "index_seconds": self.index_seconds,
            "load_average": [round(v, 2) for v in self.load],
        }


def sample_texts(corpus_file: Path, limit: int) -> list[str]:
    """`limit` SciFact abstracts as the index embeds them ("title. abstract"), spread over the corpus."""
    rows = [json.loads(line) for line in corpus_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    step = max(1, len(rows) // max(limit, 1))
    chosen = rows[::step][:limit]
    return [f"{row.get('title', '').strip()}. {row.get('text', '').strip()}" for row in chosen]


def _bf16_encoder(reference) -> Callable[[list[str]], np.ndarray]:
    """sentence-transformers under torch's CPU bf16 autocast (AVX-512 BF16 / AMX where the CPU has them)."""
    import torch

    model = reference.model

    def encode(texts: list[str]) -> np.ndarray:
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.inference_mode():
            vectors = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32)

    return encode


def encoders(candidates=CANDIDATES) -> dict[str, Callable[[list[str]], np.ndarray]]:
    """The baseline and each candidate, as `encode(texts) -> vectors`, all on the CPU."""
    from lumina_assets.indexing.embedding import Embedder

    reference = Embedder(device="cpu")

    def baseline(texts: list[str]) -> np.ndarray:  # sentence-transformers itself, fp32
        vectors = reference.model.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)

    found: dict[str, Callable[[list[str]], np.ndarray]] = {BASELINE: baseline}
    for name in candidates:
        if name == "bf16":
            found[name] = _bf16_encoder(reference)
        else:
            found[name] = Embedder(form=name, device="cpu").encode
    return found


def measure_speed(
    texts: list[str], rounds: int, candidates=CANDIDATES, log: Callable[[str], None] = print
) -> EmbedBenchResult:
    """Interleaved rounds: each round runs every encoder on all `texts`, starting with a different one."""
    from lumina_assets.indexing.encoder_forms import plan_for_this_machine
    from lumina_assets.parsing.chunking import model_token_counter

    count = model_token_counter()
    result = EmbedBenchResult(
        texts=len(texts),
        mean_tokens=float(np.mean([min(count(t), 256) for t in texts])) if texts else 0.0,
        rounds=rounds,
        machine_form=plan_for_this_machine("auto", use_gpu=False).form,
    )
    found = encoders(candidates)
    names = list(found)
    vectors: dict[str, np.ndarray] = {}
    for name in names:  # warm-up: loads, exports and quantizes outside the timed rounds
        found[name](texts[:4])
    for round_number in range(rounds):
        offset = round_number % len(names)
        for name in names[offset:] + names[:offset]:
            started = time.perf_counter()
            vectors[name] = found[name](texts)
            result.per_s.setdefault(name, []).append(len(texts) / (time.perf_counter() - started))
        log(
            f"round {round_number + 1}/{rounds}: "
            + ", ".join(f"{n} {result.per_s[n][-1]:.1f}/s" for n in names)
            + f" (load {os.getloadavg()[0]:.2f})"
        )
    baseline = vectors[BASELINE]
    for name in names:
        cosine = (vectors[name] * baseline).sum(axis=1) / np.maximum(
            np.linalg.norm(vectors[name], axis=1) * np.linalg.norm(baseline, axis=1), 1e-12
        )
        result.cosine[name] = (float(cosine.mean()), float(cosine.min()))
    result.load = os.getloadavg()
    return result


def measure_quality(
    result: EmbedBenchResult,
    shared_data: Path,
    collections: list[str],
    forms=INDEX_FORMS,
    log: Callable[[str], None] = print,
) -> None:
    """nDCG@10 of an index built in each form, per collection (indexes are reused once built)."""
    from evals.collection_eval import ensure_eval_index, evaluate_run, run_queries
    from lumina_assets.corpus.collections import load_collection
    from lumina_assets.indexing.embedding import Embedder
    from lumina_assets.search.config import SearchConfig
    from lumina_assets.search.engine import SearchEngine

    for name in collections:
        folder, split = COLLECTIONS[name]
        collection = load_collection(shared_data / folder, split=split)
        for form in forms:
            embedder = Embedder(form=form, device="cpu")
            uri, seconds, reused = ensure_eval_index(collection, embedder, log_fn=log)
            engine = SearchEngine(uri, embedder, SearchConfig())
            run, _ = run_queries(engine, collection)
            ndcg = evaluate_run(run, collection.qrels)["ndcg@10"]
            result.ndcg.setdefault(name, {})[form] = round(ndcg, 4)
            result.index_seconds.setdefault(name, {})[form] = round(seconds, 1)
            log(
                f"{name} ({len(collection.corpus)} documents, {len(collection.queries)} queries), {form}: "
                f"nDCG@10 {ndcg:.4f}; index {'reused' if reused else 'built'} ({seconds:.1f} s)"
            )
    result.load = os.getloadavg()
