"""A test that needs a tool from outside the project skips without it, with the reason, except in CI, where the
same missing tool is a failure (so CI cannot go green with the browser or PostgreSQL tests unrun)."""

from __future__ import annotations

import pytest
from tools import in_ci, missing_tool


@pytest.mark.parametrize("value", ["", "false", "0"])
def test_outside_ci_a_missing_tool_skips_with_its_reason(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match="chromium not found"):
        missing_tool("chromium not found")


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_in_ci_a_missing_tool_fails(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match="CI=true and a required tool is missing.*initdb"):
        missing_tool("initdb not found")


def test_ci_script_installs_the_tools_before_make_test():
    """.ci/run sets CI=true, installs what .ci/debian-packages finds missing (chromium, PostgreSQL, node, npm among
    them) from Debian, then runs `make test`."""
    from lumina_assets.core import settings

    ci = settings.PROJECT_ROOT / ".ci"
    script = (ci / "run").read_text()
    assert "export CI=true" in script
    assert script.index(".ci/debian-packages") < script.index("apt-get install")
    assert script.index("apt-get install") < script.rindex("make test")  # the last line runs the suite
    packages = (ci / "debian-packages").read_text()
    for package in ("chromium", "postgresql", "nodejs", "npm", "python3-venv"):
        assert f"missing+=({package}" in packages
