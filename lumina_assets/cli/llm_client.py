"""LLM clients for commands outside a Dagster run, built from the resources the Definitions use (same model)."""

from __future__ import annotations


def env_llm_client(role: str):
    """The client of `role` (`question_llm` or `judge_llm`); offline when its key or base URL is missing."""
    from resources.llm import build_llm_resources

    # process_config_and_initialize resolves the EnvVar key (outside a run it is only the variable's name)
    return build_llm_resources()[role].process_config_and_initialize().get_client()
