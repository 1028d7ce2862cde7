"""Bootstrap CIs and permutation tests draw their resamples a block at a time (memory flat in the number of
questions) and still give exactly what one draw of every resample gives (the same draws; a mean may differ in its last bit)."""

from __future__ import annotations

import numpy as np
import pytest

from evals import metrics

REAL = np.random.default_rng  # the spy below replaces numpy's; the references draw with the real one


class _Spy:
    """A numpy Generator that records the size of every draw."""

    def __init__(self, rng, sizes):
        self.rng, self.sizes = rng, sizes

    def choice(self, a, size, **kwargs):
        self.sizes.append(int(np.prod(size)))
        return self.rng.choice(a, size=size, **kwargs)


@pytest.fixture
def small_blocks(monkeypatch):
    sizes: list[int] = []
    monkeypatch.setattr(metrics, "RESAMPLE_CELLS", 3_000)
    monkeypatch.setattr(metrics.np.random, "default_rng", lambda seed=None: _Spy(REAL(seed), sizes))
    return sizes


@pytest.mark.parametrize("n", [17, 101, 1000])
def test_bootstrap_in_blocks_equals_one_draw(small_blocks, n):
    values = REAL(n).normal(size=n)
    blocked = metrics.bootstrap_ci(values.tolist(), resamples=999, seed=3)
    assert len(small_blocks) > 1 and max(small_blocks) <= max(3_000, 2 * n)
    rng = REAL(3)
    means = rng.choice(values, size=(999, n), replace=True).mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    # the same draws: equal up to the last bit of a row mean's summation order
    assert (blocked.low, blocked.high) == pytest.approx((float(low), float(high)), rel=1e-12, abs=0)


@pytest.mark.parametrize("n", [21, 1001])
def test_permutation_in_blocks_equals_one_draw(small_blocks, n):
    a = REAL(1).normal(size=n)
    b = a + REAL(2).normal(scale=0.5, size=n) - 0.02
    blocked = metrics.paired_test(a.tolist(), b.tolist(), resamples=5_000, seed=0)
    assert max(small_blocks) <= max(3_000, 2 * n)
    diffs = a - b
    signs = REAL(0).choice([-1.0, 1.0], size=(5_000, n))
    means = np.abs((signs * diffs).mean(axis=1))
    expected = ((means >= abs(diffs.mean()) - 1e-12).sum() + 1) / 5_001
    assert blocked.p_value == pytest.approx(float(expected), abs=0)
