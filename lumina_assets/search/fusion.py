"""Fusion of retriever runs: reciprocal rank or weighted, normalized scores over each run's candidates."""

from __future__ import annotations

import numpy as np


def top_indices(scores: np.ndarray, n: int) -> np.ndarray:
    finite = np.isfinite(scores)
    count = int(finite.sum())
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    n = min(n, count)
    masked = np.where(finite, scores, -np.inf)
    top = np.argpartition(-masked, n - 1)[:n]
    return top[np.argsort(-masked[top], kind="stable")]


def fuse(
    runs: dict[str, np.ndarray],
    weights: dict[str, float],
    size: int,
    *,
    method: str,
    candidates: int,
    rrf_k: int,
    normalization: str = "minmax",
) -> np.ndarray:
    """Fused score per document (0 for documents no retriever put in its candidates)."""
    fused = np.zeros(size, dtype=np.float32)
    for name, scores in runs.items():
        weight = weights.get(name, 1.0)
        if weight <= 0:
            continue
        top = top_indices(scores, candidates)
        if len(top) == 0:
            continue
        if method == "rrf":
            fused[top] += weight / (rrf_k + np.arange(1, len(top) + 1, dtype=np.float32))
        else:
            values = scores[top]
            high, low = float(values[0]), float(values[-1])
            if high <= 0 and name.endswith("fulltext"):
                continue
            if normalization == "zscore":
                std = float(values.std())
                fused[top] += (
                    weight * ((values - float(values.mean())) / std if std > 1e-9 else 0.0) + weight * 3.0
                )
            elif normalization == "max":
                fused[top] += weight * (values / high if high > 1e-9 else np.ones_like(values))
            else:
                span = high - low
                fused[top] += weight * ((values - low) / span if span > 1e-9 else np.ones_like(values))
    return fused
