"""The optional cross-encoder reranker, off by default: `LUMINA_RERANK_MODEL` names a sentence-transformers
`CrossEncoder` that reorders the top fused papers (`SearchConfig.rerank`, `rerank_depth`)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from lumina_assets.core import settings
from lumina_assets.core.schemas import Context
from lumina_assets.search.config import SearchConfig


@functools.lru_cache(maxsize=2)
def _cross_encoder(name_or_path: str):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(name_or_path, device="cpu")


def cross_encoder_reranker(name_or_path: str, max_chars: int = 2000) -> Callable:
    """Rerank by a sentence-transformers CrossEncoder scoring (query, title + passages); scores replace the fused
    ones so callers see the reranker's confidence."""

    def rerank(query: str, contexts: list[Context]) -> list[Context]:
        if not contexts:
            return contexts
        model = _cross_encoder(name_or_path)
        pairs = [(query, f"{c.title}. {' '.join(c.chunks)}"[:max_chars]) for c in contexts]
        scores = model.predict(pairs, show_progress_bar=False)
        for context, score in zip(contexts, scores, strict=True):
            context.score = float(score)
        return sorted(contexts, key=lambda c: -c.score)

    return rerank


def configured_search_config(base: SearchConfig | None = None) -> SearchConfig:
    """`base` (default SearchConfig()) with the reranker `LUMINA_RERANK_MODEL` names, if any."""
    config = base or SearchConfig()
    rerank_model = settings.get().search.rerank_model
    return config.replace(rerank=cross_encoder_reranker(rerank_model)) if rerank_model else config
