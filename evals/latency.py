"""Latency percentiles for every command that prints p50 / p95: numpy's default over seconds, in milliseconds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of `seconds`, in milliseconds; 0.0 when nothing was timed."""
    if len(seconds) == 0:
        return 0.0
    return float(np.percentile(np.asarray(seconds, dtype=float) * 1000.0, q))
