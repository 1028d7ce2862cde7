"""Shared fixtures: the real data in ../shared/data and an isolated data directory per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumina_assets import settings


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout; skipped (with the reason) only when the folder is absent."""
    path = settings.shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared test data not found at {path} (CI always has it beside the checkout)")
    return path


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """A fresh LUMINA_DATA_DIR so tests never touch the project's data/ folder."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("LUMINA_DATA_DIR", str(root))
    monkeypatch.delenv("LUMINA_CORPUS", raising=False)
    monkeypatch.delenv("LUMINA_LANCEDB_URI", raising=False)
    return root
