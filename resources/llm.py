"""The LLM resources: `question_llm` and `judge_llm`, each constructing a `core.llm.LLMClient`. Keys arrive only
through `dg.EnvVar` and are never logged, cached or put in an exception message."""

from __future__ import annotations

from typing import Any

import dagster as dg

from lumina_assets.core import settings
from lumina_assets.core.llm import DEFAULT_JUDGE_MODEL, DEFAULT_QUESTION_MODEL, LLMClient


class LLMResource(dg.ConfigurableResource):
    """An LLM for question generation, recursive refinement or judging.

    A remote backend without a key (or an openai-compatible one without a base URL) degrades to `offline`, and
    `describe()` says so, so every table and report can label what produced it.
    """

    backend: str = "offline"
    model: str = ""
    api_key: str = ""
    base_url: str = ""
    temperature: float | None = None
    max_tokens: int = 1024
    timeout: float = 120.0
    max_retries: int = 3
    cache_subdir: str = "llm"

    def effective_backend(self) -> str:
        if self.backend == "offline":
            return "offline"
        if self.backend == "openai-compatible":
            return self.backend if self.base_url else "offline"
        return self.backend if self.api_key else "offline"

    def describe(self) -> str:
        backend = self.effective_backend()
        if backend == "offline" and self.backend != "offline":
            missing = "base URL" if self.backend == "openai-compatible" else "API key"
            return f"offline (no {missing} for {self.backend}:{self.model})"
        return "offline" if backend == "offline" else f"{backend}:{self.model}"

    def get_client(self, http_client: Any = None) -> LLMClient:
        backend = self.effective_backend()
        return LLMClient(
            backend=backend,
            model=self.model or "offline",
            api_key=self.api_key or None,
            base_url=self.base_url or None,
            cache_dir=settings.cache_dir() / self.cache_subdir,
            max_tokens=self.max_tokens,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=http_client,
            label=self.describe(),
        )


def _env_key(name: str) -> Any:
    """`dg.EnvVar(name)` when the variable is set, else "" (an unset EnvVar would fail the whole code location)."""
    return dg.EnvVar(name) if settings.is_set(name) else ""


def build_llm_resources() -> dict[str, LLMResource]:
    """`question_llm` (anthropic / Claude Sonnet) and `judge_llm` (openai / gpt-4o, temperature 0).

    `OPENAI_BASE_URL` (or `OPENAI_COMPATIBLE_BASE_URL`) points the judge at an OpenAI-compatible server (vLLM,
    Ollama, llama.cpp); `LUMINA_JUDGE_BACKEND` / `LUMINA_QUESTION_BACKEND` pick a backend explicitly and
    `LUMINA_JUDGE_MODEL` / `LUMINA_QUESTION_MODEL` override the models.
    """
    base_url_env = settings.compatible_base_url_var()
    judge_backend = settings.judge_backend()
    question_backend = settings.question_backend()

    def key_for(backend: str) -> Any:
        if backend == "openai-compatible":
            return _env_key("OPENAI_COMPATIBLE_API_KEY") or _env_key("OPENAI_API_KEY")
        return {"anthropic": _env_key("ANTHROPIC_API_KEY"), "openai": _env_key("OPENAI_API_KEY")}.get(
            backend, ""
        )

    def base_url_for(backend: str) -> Any:
        return dg.EnvVar(base_url_env) if backend == "openai-compatible" and base_url_env else ""

    return {
        "question_llm": LLMResource(
            backend=question_backend,
            model=settings.question_model(DEFAULT_QUESTION_MODEL),
            api_key=key_for(question_backend),
            base_url=base_url_for(question_backend),
            temperature=None,
        ),
        "judge_llm": LLMResource(
            backend=judge_backend,
            model=settings.judge_model(DEFAULT_JUDGE_MODEL),
            api_key=key_for(judge_backend),
            base_url=base_url_for(judge_backend),
            temperature=0.0,
        ),
    }
