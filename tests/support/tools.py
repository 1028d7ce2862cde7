"""One rule for tests that need a tool from outside the project (Chromium, PostgreSQL, node, moto's server, the
shared data beside the checkout): outside CI a missing tool skips with the reason; in CI (`CI=true`, set by
`.ci/run`, which installs every such tool first) it is a failure, so CI can never pass with the test unrun."""

from __future__ import annotations

import os

import pytest

TRUE = {"1", "true", "yes", "on"}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in TRUE


def missing_tool(reason: str) -> None:
    """Stop the test because a tool it needs is absent: a skip with `reason`, or under CI a failure."""
    if in_ci():
        pytest.fail(f"CI=true and a required tool is missing (.ci/run installs it): {reason}", pytrace=False)
    pytest.skip(reason)
