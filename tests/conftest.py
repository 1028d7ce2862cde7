"""Shared fixtures: the real data in ../shared/data and an isolated data directory per test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tools import missing_tool

from lumina_assets.core import settings


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout; skipped (with the reason) only when the folder is absent."""
    path = settings.shared_data_dir()
    if not path.is_dir():
        missing_tool(f"shared test data not found at {path} (CI always has it beside the checkout)")
    return path


@pytest.fixture(scope="session", autouse=True)
def session_data_dir(tmp_path_factory):
    """A temporary LUMINA_DATA_DIR and DAGSTER_HOME for module- and session-scoped fixtures, which run before any
    per-test fixture: nothing a test builds ever lands in the project's data/ or .dagster_home/ folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LUMINA_DATA_DIR", str(tmp_path_factory.mktemp("session-data")))
        patch.setenv("DAGSTER_HOME", str(tmp_path_factory.mktemp("session-dagster-home")))
        # the local fakes every HTTP test talks to live on 127.0.0.1: the one opt-in to private addresses
        # (tests of the refusal build a UrlPolicy(allow_private=False) or unset it)
        patch.setenv("LUMINA_ALLOW_PRIVATE_URLS", "1")
        # vectors in fp32 on every machine (the default form is chosen per CPU: int8 where it has VNNI), so
        # figures pinned by tests do not depend on the machine; tests of the forms name theirs
        patch.setenv("LUMINA_EMBEDDING_FORM", "fp32")
        yield


def reset_process_state() -> None:
    """Forget what the process keeps between calls that could make one test depend on another: the per-host
    rate limiter's next-allowed times, the open search stores (keyed by index URI, so a store of an index a
    previous test wrote would be reused). The loaded models and ONNX query encoders stay:
    they are read-only weights, and reloading them per test would add minutes to the suite."""
    # only modules a test already imported hold state; importing the others here would only slow the suite
    http = sys.modules.get("lumina_assets.core.http")
    if http is not None:
        http.RateLimiter.reset()
    stores = sys.modules.get("lumina_assets.search.memory_store")
    if stores is not None:
        stores.clear_open_stores()


@pytest.fixture(autouse=True)
def isolated_test(tmp_path, monkeypatch) -> Path:
    """Every test: its own LUMINA_DATA_DIR under tmp_path (tables, PDFs, caches, LanceDB, reports) and its own
    DAGSTER_HOME (settings.dagster_home() would otherwise point the process at the project's .dagster_home for every
    later test), no corpus or LanceDB URI inherited from the shell, and the process-wide state reset around it."""
    root = tmp_path / "data"
    root.mkdir()
    # not tmp_path / "dagster_home": tests that build their own instance create that one
    home = tmp_path / "isolated-dagster-home"
    home.mkdir()
    monkeypatch.setenv("LUMINA_DATA_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("LUMINA_ALLOW_PRIVATE_URLS", "1")  # local fakes on 127.0.0.1 (see session_data_dir)
    monkeypatch.delenv("LUMINA_CORPUS", raising=False)
    monkeypatch.delenv("LUMINA_LANCEDB_URI", raising=False)
    reset_process_state()
    yield root
    reset_process_state()


@pytest.fixture
def data_dir(isolated_test) -> Path:
    """This test's LUMINA_DATA_DIR (set up by `isolated_test` for every test), for tests that look inside it."""
    return isolated_test
