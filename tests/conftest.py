"""Shared fixtures: the real data in ../shared/data and an isolated data directory per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumina_assets.core import settings


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout; skipped (with the reason) only when the folder is absent."""
    path = settings.shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared test data not found at {path} (CI always has it beside the checkout)")
    return path


@pytest.fixture(scope="session", autouse=True)
def session_data_dir(tmp_path_factory):
    """Every test runs against a temporary LUMINA_DATA_DIR, so derived files (the ONNX query encoder, the lexical
    index cache, eval indexes) never land in the project's data/ folder; `data_dir` gives a test its own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LUMINA_DATA_DIR", str(tmp_path_factory.mktemp("session-data")))
        yield


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """A fresh LUMINA_DATA_DIR so tests never touch the project's data/ folder."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("LUMINA_DATA_DIR", str(root))
    monkeypatch.delenv("LUMINA_CORPUS", raising=False)
    monkeypatch.delenv("LUMINA_LANCEDB_URI", raising=False)
    return root
