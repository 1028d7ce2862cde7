"""The one price table: public list prices of the LLMs and search APIs the benchmark calls, with the day
they were read (`PRICES_AS_OF`). A model or API missing here is priced as unknown, never as free. The run's
cost line (`core.llm`), the plan (`evals.plan`) and the budget read it."""

from __future__ import annotations

PRICES_AS_OF = "2026-11-27"

# USD per million (input, output) tokens, synchronous list price.
LLM_PER_MTOK: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-2024-08-06": (2.50, 10.00),
    "gpt-4o-2024-11-20": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4-5-20250929": (3.00, 15.00),
    "claude-sonnet-4-6": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-opus-4-5": (5.00, 25.00),
}

# OpenAI's Batch API and Anthropic's Message Batches bill half the synchronous price.
BATCH_DISCOUNT = 0.5
BATCH_BACKENDS = frozenset({"openai", "anthropic"})

# Search APIs: USD per request (None: unknown) and where the figure comes from.
REQUEST_PRICES: dict[str, tuple[float | None, str]] = {
    "semantic_scholar": (0.0, "the Graph API is free (rate-limited)"),
    "google_scholar": (None, "SerpAPI bills a monthly plan; the price of one search depends on the plan"),
    "exa": (
        0.007,
        "Exa /search with contents, up to 10 results a request: $7 per 1,000 (exa.ai/docs/reference/pricing)",
    ),
}
LOCAL_REQUEST_PRICE = (0.0, "local, no request cost")


def llm_cost(model: str, input_tokens: float, output_tokens: float, *, batch: bool = False) -> float | None:
    """USD at list price, None for a model without a list price."""
    price = LLM_PER_MTOK.get(model)
    if price is None:
        return None
    usd = (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
    return usd * BATCH_DISCOUNT if batch else usd


def request_price(provider: str) -> tuple[float | None, str]:
    return REQUEST_PRICES.get(provider, LOCAL_REQUEST_PRICE)
