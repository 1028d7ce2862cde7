"""LLM clients for commands that run outside a Dagster run: built from the same resources the Definitions use
(`resources.llm.build_llm_resources`, backend / model / key from the environment), so a command and an asset talk
to the same model."""

from __future__ import annotations

from lumina_assets.core import settings


def env_llm_client(role: str):
    """The client of `role` (`question_llm` or `judge_llm`); offline when its key or base URL is missing."""
    from resources.llm import build_llm_resources

    # process_config_and_initialize resolves the EnvVar key (outside a run it is only the variable's name)
    return build_llm_resources()[role].process_config_and_initialize().get_client()


def search_llm_client():
    """The question LLM's client for the `LUMINA_SEARCH_LLM` stages, for `configured_search_config(llm_client=...)`:
    None when no stage is asked for (nothing is built, so a plain search never imports Dagster) or the LLM is
    offline."""
    if not settings.search_llm_stages():
        return None
    client = env_llm_client("question_llm")
    return None if client.is_offline else client
