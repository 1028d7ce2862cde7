"""The optional model-backed search stages: an LLM query parser, LLM multi-query expansion, and reranking by a
cross-encoder or an LLM, off by default; each is a callable `SearchConfig` takes. An LLM that fails or answers
something unparseable never fails a search: the stage logs why and falls back to the offline path.
`configured_search_config()` switches them on from `LUMINA_SEARCH_LLM` and `LUMINA_RERANK_MODEL`."""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from lumina_assets.core import settings
from lumina_assets.core.schemas import Context
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.query_parser import ParsedQuery, parse_query

log = logging.getLogger(__name__)


PARSE_PROMPT = """You read a search request for scientific papers and separate its constraints from its topic.
Return only a JSON object with these keys:
"text": the topic to search for, without author or year constraints (keep every topical word),
"authors": author names the request restricts to (a list, often empty),
"year_min": the earliest publication year allowed, or null,
"year_max": the latest publication year allowed, or null,
"keywords": the 2 to 6 most important topical terms.
"after 2019" means year_min 2020; "before 2010" means year_max 2009; "in 2015" means both 2015.

Request: {query}"""

EXPAND_PROMPT = """Write {count} different search queries that would find scientific passages answering the
request below: use the vocabulary papers would use (synonyms, expanded acronyms, technical terms), one per line,
no numbering, no commentary.

Request: {query}"""

RERANK_PROMPT = """Rate how well each numbered passage answers the search request, from 0 (unrelated) through
1 (on the topic) and 2 (partly answers it) to 3 (answers it directly).
Return only a JSON object mapping each passage number to its rating, e.g. {{"1": 3, "2": 0}}.

Request: {query}

{passages}"""


def _json_object(text: str) -> dict:
    """The first JSON object in an LLM reply (models wrap JSON in prose or code fences)."""
    match = re.search(r"\{.*\}", text, re.S)
    if not match:
        raise ValueError("no JSON object in the reply")
    value = json.loads(match.group(0))
    if not isinstance(value, dict):
        raise ValueError("the reply's JSON is not an object")
    return value


def _failed(stage: str, error: Exception, fallback: str) -> None:
    log.warning("LLM %s failed (%s: %s); %s", stage, type(error).__name__, error, fallback)


def _year(value) -> int | None:
    if value is None or value == "":
        return None
    year = int(value)
    if not 1500 <= year <= 2100:
        raise ValueError(f"implausible year {year}")
    return year


def llm_query_parser(client) -> Callable[[str], ParsedQuery]:
    """Query parsing by an LLM (authors, years, keywords); the heuristic parser on any failure."""

    def parse(query: str) -> ParsedQuery:
        try:
            reply = _json_object(client.complete(PARSE_PROMPT.format(query=query), temperature=0.0).text)
            authors = [str(a).strip() for a in reply.get("authors") or [] if str(a).strip()]
            keywords = [str(k).strip() for k in reply.get("keywords") or [] if str(k).strip()]
            text = str(reply.get("text") or "").strip() or query
            year_min, year_max = _year(reply.get("year_min")), _year(reply.get("year_max"))
        except Exception as error:  # noqa: BLE001 - an LLM failure must not fail the search
            _failed("query parser", error, "using the heuristic parser")
            return parse_query(query)
        return ParsedQuery(query, text, authors, year_min, year_max, keywords, parser="llm")

    return parse


def llm_multi_query(client, count: int = 3) -> Callable[[str], list[str]]:
    """Extra phrasings of the query from an LLM (each embedded and averaged into the query vector)."""

    def expand(query: str) -> list[str]:
        try:
            text = client.complete(EXPAND_PROMPT.format(query=query, count=count), temperature=0.0).text
        except Exception as error:  # noqa: BLE001
            _failed("multi-query", error, "searching the query alone")
            return []
        lines = [
            re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip('"') for line in text.splitlines()
        ]
        return [line for line in lines if line and line.lower() != query.lower()][:count]

    return expand


def llm_reranker(client, max_chars: int = 1200) -> Callable[[str, list[Context]], list[Context]]:
    """Pointwise LLM relevance ratings of the contexts in one call; ties keep the fused order."""

    def rerank(query: str, contexts: list[Context]) -> list[Context]:
        if not contexts:
            return contexts
        blocks = []
        for number, context in enumerate(contexts, 1):
            body = " ".join(context.chunks)
            body = body if len(body) <= max_chars else body[: max_chars - 1] + "…"
            blocks.append(f"[{number}] {context.title}\n{body}")
        prompt = RERANK_PROMPT.format(query=query, passages="\n\n".join(blocks))
        try:
            ratings = _json_object(client.complete(prompt, temperature=0.0).text)
            scores = {int(key): float(value) for key, value in ratings.items()}
        except Exception as error:  # noqa: BLE001
            _failed("rerank", error, "keeping the fused order")
            return contexts
        order = sorted(range(len(contexts)), key=lambda i: (-scores.get(i + 1, -1.0), i))
        return [contexts[i] for i in order]

    return rerank


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


def search_llm_client(question_client: Callable[[], Any]):
    """The question LLM's client (built by `question_client`) for the `LUMINA_SEARCH_LLM` stages; None when no
    stage is asked for (then nothing is built, so a plain search imports no Dagster) or the LLM is offline."""
    if not settings.get().search.llm_stages:
        return None
    client = question_client()
    return None if client.is_offline else client


def configured_search_config(base: SearchConfig | None = None, *, llm_client=None) -> SearchConfig:
    """`base` (default SearchConfig()) with the stages LUMINA_SEARCH_LLM and LUMINA_RERANK_MODEL switch on;
    ValueError when LLM stages are asked for and `llm_client` (`search_llm_client`) is None."""
    config = base or SearchConfig()
    stages = settings.get().search.llm_stages  # the settings refuse an unknown stage, naming the variable
    changes: dict = {}
    if stages:
        client = llm_client
        if client is None:
            raise ValueError(
                "LUMINA_SEARCH_LLM asks for LLM stages but the question LLM is offline: set its API key "
                "(ANTHROPIC_API_KEY for the default anthropic backend) or LUMINA_QUESTION_BACKEND"
            )
        if "parse" in stages:
            changes["llm_parser"] = llm_query_parser(client)
        if "expand" in stages:
            changes["llm_multi_query"] = llm_multi_query(client)
        if "rerank" in stages:
            changes["rerank"] = llm_reranker(client)
    rerank_model = settings.get().search.rerank_model
    if rerank_model and "rerank" not in changes:
        changes["rerank"] = cross_encoder_reranker(rerank_model)
    return config.replace(**changes) if changes else config
