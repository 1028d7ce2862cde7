"""The LLM resources: `question_llm` and `judge_llm`, each constructing a `core.llm.LLMClient`. Keys arrive only
through `dg.EnvVar` and are never logged, cached or put in an exception message."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

from lumina_assets.core import settings
from lumina_assets.core.ids import short_hash
from lumina_assets.core.llm import (
    DEFAULT_JUDGE_MODEL,
    DEFAULT_QUESTION_MODEL,
    LLMClient,
    derived_concurrency,
)
from resources.env import env_secret, first_secret


class LLMResource(dg.ConfigurableResource):
    """An LLM for question generation, recursive refinement or judging. A remote backend without a key (or
    an openai-compatible one without a base URL) degrades to `offline`, and `describe()` says so. Backend,
    model and temperature are class defaults read from the environment; key and base URL are found by
    variable name (`api_key_env`, `base_url_env`), so a run-config override keeps them (resources/env.py)."""

    backend: str = "offline"
    model: str = ""
    api_key: str = ""
    base_url: str = ""
    api_key_env: str = Field(
        default="",
        description="variable holding the key when `api_key` is not given; 'auto' = the backend's own "
        "(ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_COMPATIBLE_API_KEY then OPENAI_API_KEY)",
    )
    base_url_env: str = Field(
        default="",
        description="variable holding the base URL when `base_url` is not given; 'auto' = "
        "OPENAI_COMPATIBLE_BASE_URL or OPENAI_BASE_URL for the openai-compatible backend",
    )
    temperature: float | None = None
    max_tokens: int = 1024
    timeout: float = 120.0
    max_retries: int = 3
    cache_subdir: str = "llm"
    requests_per_minute: float = Field(
        default=0.0,
        description="most requests per minute this process sends to the API (0: no limit of its own)",
    )
    concurrency: int = Field(
        default=0,
        description="requests in flight at once (the threads of the judge, the refiner and pooled judging); "
        "0: requests_per_minute / 60 × expected_latency_s, so the configured rate can be reached",
    )
    expected_latency_s: float = Field(
        default=2.0, description="typical seconds one request takes; sizes the derived concurrency"
    )
    budget_usd: float = Field(
        default=0.0,
        description="stop calling once the spend counted in `budget_file` reaches this many USD (0: no budget)",
    )
    budget_file: str = Field(default="", description="the spend ledger the run's processes share")

    def resolved_api_key(self) -> str:
        """`api_key` when given (a dg.EnvVar), else the variable `api_key_env` names (see the class note)."""
        if self.api_key:
            return self.api_key
        names = _key_variables(self.backend) if self.api_key_env == "auto" else [self.api_key_env]
        return first_secret(names)

    def resolved_base_url(self) -> str:
        if self.base_url:
            return self.base_url
        if self.base_url_env == "auto":
            compatible = self.backend == "openai-compatible"
            return first_secret([settings.get().benchmark.compatible_base_url_var if compatible else ""])
        return first_secret([self.base_url_env])

    def resolved_concurrency(self) -> int:
        """`concurrency` when set, else derived from the rate limit and the expected latency."""
        rate = self.requests_per_minute
        return (
            self.concurrency if self.concurrency > 0 else derived_concurrency(rate, self.expected_latency_s)
        )

    def effective_backend(self) -> str:
        if self.backend == "offline":
            return "offline"
        if self.backend == "openai-compatible":
            return self.backend if self.resolved_base_url() else "offline"
        return self.backend if self.resolved_api_key() else "offline"

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
            api_key=self.resolved_api_key() or None,
            base_url=self.resolved_base_url() or None,
            cache_dir=settings.cache_dir() / self.cache_subdir,
            max_tokens=self.max_tokens,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=http_client,
            label=self.describe(),
            requests_per_minute=self.requests_per_minute,
            concurrency=self.resolved_concurrency(),
            rate_file=settings.cache_dir() / "rate_limits" / f"{short_hash(self.describe(), length=16)}.txt",
            budget=self._budget(),
        )

    def _budget(self):
        if self.budget_usd <= 0 or not self.budget_file:
            return None
        from evals.budget import Budget

        return Budget(self.budget_file, self.budget_usd)


def _key_variables(backend: str) -> list[str]:
    """The variables a backend's key is read from, in order."""
    return {
        "anthropic": ["ANTHROPIC_API_KEY"],
        "openai": ["OPENAI_API_KEY"],
        "openai-compatible": ["OPENAI_COMPATIBLE_API_KEY", "OPENAI_API_KEY"],
    }.get(backend, [])


class QuestionLLMResource(LLMResource):
    """`question_llm`: backend and model from LUMINA_QUESTION_BACKEND / LUMINA_QUESTION_MODEL (anthropic, Claude
    Sonnet), key and base URL by variable name, so a run-config override of any field keeps them."""

    backend: str = Field(
        default_factory=lambda: settings.get().benchmark.question_backend,
        description="LUMINA_QUESTION_BACKEND",
    )
    model: str = Field(
        default_factory=lambda: settings.get().benchmark.question_model or DEFAULT_QUESTION_MODEL,
        description="LUMINA_QUESTION_MODEL",
    )
    api_key_env: str = "auto"
    base_url_env: str = "auto"
    requests_per_minute: float = 50.0  # Anthropic's first usage tier
    expected_latency_s: float = 4.0  # a question written from a passage


class JudgeLLMResource(LLMResource):
    """`judge_llm`: backend and model from LUMINA_JUDGE_BACKEND / LUMINA_JUDGE_MODEL (openai, gpt-4o; an
    OpenAI-compatible base URL switches the backend), temperature 0, key and base URL by variable name."""

    backend: str = Field(
        default_factory=lambda: settings.get().benchmark.judge_backend, description="LUMINA_JUDGE_BACKEND"
    )
    model: str = Field(
        default_factory=lambda: settings.get().benchmark.judge_model or DEFAULT_JUDGE_MODEL,
        description="LUMINA_JUDGE_MODEL",
    )
    temperature: float | None = 0.0
    api_key_env: str = "auto"
    base_url_env: str = "auto"
    requests_per_minute: float = 500.0  # OpenAI's first usage tier for gpt-4o


def build_llm_resources(
    *,
    budget_usd: float = 0.0,
    budget_file: str = "",
    judge_rpm: float | None = None,
    question_rpm: float | None = None,
    judge_concurrency: int | None = None,
) -> dict[str, LLMResource]:
    """`question_llm` (anthropic / Claude Sonnet) and `judge_llm` (openai / gpt-4o, temperature 0, or
    openai-compatible when `OPENAI_BASE_URL` / `OPENAI_COMPATIBLE_BASE_URL` is set); the LUMINA_*_BACKEND /
    _MODEL variables override."""
    configured = settings.get().benchmark
    base_url_env = configured.compatible_base_url_var
    judge_backend = configured.judge_backend
    question_backend = configured.question_backend

    def key_for(backend: str) -> Any:
        return next((env_secret(n) for n in _key_variables(backend) if settings.is_set(n)), "")

    def base_url_for(backend: str) -> Any:
        return dg.EnvVar(base_url_env) if backend == "openai-compatible" and base_url_env else ""

    # Backend and model are the classes' defaults (from the same variables); key and base URL are also given as
    # dg.EnvVar so an un-overridden resource shows them as environment references in the UI.
    return {
        "question_llm": QuestionLLMResource(
            api_key=key_for(question_backend),
            base_url=base_url_for(question_backend),
            budget_usd=budget_usd,
            budget_file=budget_file,
            **({"requests_per_minute": question_rpm} if question_rpm is not None else {}),
        ),
        "judge_llm": JudgeLLMResource(
            api_key=key_for(judge_backend),
            base_url=base_url_for(judge_backend),
            budget_usd=budget_usd,
            budget_file=budget_file,
            **({"requests_per_minute": judge_rpm} if judge_rpm is not None else {}),
            **({"concurrency": judge_concurrency} if judge_concurrency else {}),
        ),
    }
