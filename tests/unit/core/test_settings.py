"""The typed settings object: the variables users set keep their names and parsing, bad values are refused with
the variable's name, the cache follows the environment, and docs/configuration.md is the object's own rendering."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devtools import settings_docs
from lumina_assets.core import settings


def test_the_configuration_page_is_generated_from_the_settings_object():
    assert settings_docs.PAGE.read_text(encoding="utf-8") == settings_docs.render(), (
        "docs/configuration.md differs from the settings object: run python -m devtools.settings_docs"
    )


def test_the_generator_notices_a_drifted_table_and_keeps_the_hand_written_parts():
    page = settings_docs.PAGE.read_text(encoding="utf-8")
    drifted = page.replace("| `LUMINA_DATA_DIR` |", "| `LUMINA_DATA_FOLDER` |")
    assert drifted != page and settings_docs.render(drifted) == page
    assert (
        "## Mirrors, proxies and local replay servers" in page
    )  # a hand-written section outside the markers
    with pytest.raises(ValueError, match="markers"):
        settings_docs.render("no markers here")


def test_every_lumina_variable_the_code_names_is_a_documented_setting():
    root = settings.PROJECT_ROOT
    named = set()
    for folder in ("lumina_assets", "evals", "resources", "sensors"):
        for path in (root / folder).rglob("*.py"):
            named |= set(re.findall(r"\bLUMINA_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    assert named - set(settings.VARIABLES) == set()


@pytest.mark.parametrize(
    ("value", "vectors", "private"),
    [
        (None, True, False),
        ("", True, False),
        (" 1 ", True, True),
        ("On", True, True),
        ("OFF", False, False),
        ("no", False, False),
        ("maybe", True, False),
    ],
)
def test_switches_keep_their_opt_in_and_opt_out_words(monkeypatch, value, vectors, private):
    for name in ("LUMINA_SENTENCE_VECTORS", "LUMINA_ALLOW_PRIVATE_URLS"):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    current = settings.get()
    assert current.embedding.sentence_vectors is vectors  # off only for 0/false/no/off
    assert current.network.allow_private_urls is private  # on only for 1/true/yes/on


def test_values_are_typed_and_normalised(monkeypatch, tmp_path):
    monkeypatch.setenv("LUMINA_CORPUS", f"zotero:{tmp_path}")
    monkeypatch.setenv("LUMINA_OPENALEX_URL", "http://mirror.internal/openalex/")
    monkeypatch.setenv("LUMINA_INDEX_CACHE_MB", "Unbounded")
    monkeypatch.setenv("LUMINA_EMBED_PARTS", "auto")
    monkeypatch.setenv("LUMINA_EXECUTOR", "")
    current = settings.get()
    assert current.paths.corpus == tmp_path.resolve()
    assert current.network.openalex_url == "http://mirror.internal/openalex"
    assert current.search.index_cache_mb == "unbounded"
    assert current.embedding.embed_parts is None
    assert current.orchestration.executor == "in_process"  # empty: the default
    monkeypatch.setenv("LUMINA_INDEX_CACHE_MB", "512")
    assert settings.get().search.index_cache_mb == 512


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LUMINA_EMBEDDING_FORM", "bf16"),
        ("LUMINA_K8S_GPU", "two"),
        ("LUMINA_RECURSION_LLM", "both"),
        ("LUMINA_BEIR_QUERIES", "-1"),
        ("LUMINA_EXECUTOR", "celery"),
    ],
)
def test_an_invalid_value_is_refused_naming_its_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        settings.get()


def test_the_settings_follow_the_environment_and_are_parsed_once_per_environment(monkeypatch, tmp_path):
    first = settings.get()
    assert settings.get() is first  # cached while the variables stay the same
    monkeypatch.setenv("LUMINA_DATA_DIR", str(tmp_path / "elsewhere"))
    assert settings.data_dir() == tmp_path / "elsewhere"
    assert settings.tables_dir() == tmp_path / "elsewhere" / "tables"
    assert settings.lancedb_uri() == str(tmp_path / "elsewhere" / "lancedb")
    settings.reset()
    assert settings.get() is not first and settings.data_dir() == tmp_path / "elsewhere"


def test_an_openai_compatible_server_switches_the_judge_unless_a_backend_is_named(monkeypatch):
    for name in ("LUMINA_JUDGE_BACKEND", *settings.COMPATIBLE_BASE_URL_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    assert settings.get().benchmark.judge_backend == "openai"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert settings.get().benchmark.judge_backend == "openai-compatible"
    assert settings.get().benchmark.compatible_base_url_var == "OPENAI_BASE_URL"
    monkeypatch.setenv("LUMINA_JUDGE_BACKEND", "Anthropic")
    assert settings.get().benchmark.judge_backend == "anthropic"


def test_the_model_cache_defaults_under_the_users_cache_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("LUMINA_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert settings.model_cache_dir() == tmp_path.resolve() / "lumina" / "models"
    monkeypatch.setenv("LUMINA_MODEL_CACHE", str(tmp_path / "models"))
    assert settings.model_cache_dir() == Path(tmp_path / "models").resolve()


def test_status_lists_what_the_environment_sets_with_url_credentials_masked(monkeypatch):
    monkeypatch.setenv("LUMINA_INDEX_CACHE_MB", "512")
    monkeypatch.setenv("LUMINA_OPENALEX_URL", "http://user:hunter2@mirror.internal/openalex")
    monkeypatch.delenv("LUMINA_RERANK_MODEL", raising=False)
    monkeypatch.delenv("LUMINA_JUDGE_BACKEND", raising=False)
    chosen = settings.from_environment()
    assert chosen["LUMINA_INDEX_CACHE_MB"] == 512
    assert chosen["LUMINA_OPENALEX_URL"] == "http://***@mirror.internal/openalex"
    assert "LUMINA_RERANK_MODEL" not in chosen and "hunter2" not in repr(chosen)
    assert "LUMINA_JUDGE_BACKEND" not in chosen  # derived from the other variables, not set
