"""Recursive query refinement (the paper's "lumina-recursive" mode, run for every provider): level d's query is
refined from level d-1's results, and depth d's result is every level so far fused by reciprocal rank, one context
per paper. Offline, `PseudoRelevanceRefiner` is pseudo-relevance feedback, labelled so everywhere."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from evals.judge import ask_with_retries, load_prompt, parse_tag, render
from lumina_assets.core.schemas import Context

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{2,}")
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having here how i if
    in into is it its itself just may might more most must no nor not now of off on once only or other our out over
    own same should so some such than that the their them then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your however therefore thus
    using used use based study studies results result show shows shown found find paper patients associated
    increased decreased compared effect effects data significant significantly among within without via two one""".split()
)


def format_results(contexts: Sequence[Context]) -> str:
    return json.dumps(
        [{"title": c.title, "chunks": list(c.chunks), "doi": c.doi} for c in contexts], ensure_ascii=False
    )


@dataclass
class Refinement:
    query: str | None
    method: str
    failure: str | None = None


class LLMRefiner:
    """The Recursion Prompt through an LLM client; the refined query is the `<query>` tag's content."""

    def __init__(self, client, *, max_attempts: int = 3):
        self.client = client
        self.max_attempts = max_attempts
        self.method = f"llm:{client.label}"

    def refine(self, question: str, previous_query: str, contexts: Sequence[Context]) -> Refinement:
        query, failure, _ = ask_with_retries(
            self.client,
            render(load_prompt("recursion"), question=question, result=format_results(contexts)),
            lambda answer: parse_tag(answer, "query"),
            self.max_attempts,
            "wrap the query in <query></query> exactly once",
            temperature=0.0,
        )
        return Refinement(query, self.method, failure=failure)


class PseudoRelevanceRefiner:
    """Offline stand-in: the question plus the key terms (tf-idf over the results) of the top contexts."""

    method = "offline:pseudo-relevance-feedback"

    def __init__(self, *, terms: int = 5):
        self.terms = terms

    @staticmethod
    def _words(text: str) -> list[str]:
        return [w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS]

    def refine(self, question: str, previous_query: str, contexts: Sequence[Context]) -> Refinement:
        if not contexts:
            return Refinement(None, self.method, failure="no results to take feedback terms from")
        documents = [self._words(" ".join([c.title, *c.chunks])) for c in contexts]
        document_frequency = Counter(w for words in documents for w in set(words))
        seen = set(self._words(previous_query)) | set(self._words(question))
        weights: Counter[str] = Counter()
        for words in documents[:3]:  # the top contexts give the terms; every context gives their idf
            counts = Counter(words)
            for word, count in counts.items():
                if word not in seen:
                    weights[word] += (1 + math.log(count)) * math.log(
                        1 + len(documents) / document_frequency[word]
                    )
        picked = [w for w, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: self.terms]]
        if not picked:
            return Refinement(None, self.method, failure="no new feedback terms in the results")
        return Refinement(f"{question} {' '.join(picked)}", self.method)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def merge_contexts(previous: Sequence[Context], new: Sequence[Context]) -> tuple[list[Context], int]:
    """Previous contexts then the new ones, each chunk kept once (dedupe by passage text); (merged, chunks added)."""
    seen = {_norm(chunk) for context in previous for chunk in context.chunks}
    merged = [Context(**c.to_dict()) for c in previous]
    added = 0
    for context in new:
        kept = _unseen_part(context, seen, context.score)
        if kept is not None:
            merged.append(kept)
            added += len(kept.chunks)
    return merged, added


def _unseen_part(context: Context, seen: set[str], score: float | None) -> Context | None:
    """`context` with only the chunks not in `seen` (which it extends), scored `score`; None when none is left."""
    chunks, passage_ids = [], []
    ids = list(context.passage_ids) + [None] * (len(context.chunks) - len(context.passage_ids))
    for chunk, passage_id in zip(context.chunks, ids, strict=True):
        key = _norm(chunk)
        if key and key not in seen:
            seen.add(key)
            chunks.append(chunk)
            if passage_id:
                passage_ids.append(passage_id)
    if not chunks:
        return None
    return Context(
        title=context.title,
        chunks=chunks,
        doi=context.doi,
        url=context.url,
        paper_id=context.paper_id,
        score=score,
        passage_ids=passage_ids,
        ranked_passage_ids=[p for p in context.ranked_passage_ids if p in passage_ids],
    )


RRF_K = 60


def paper_key(context: Context) -> str:
    """A context's paper across levels: its id, else DOI, URL, title, else its normalized text."""
    for prefix, value in (
        ("id:", context.paper_id),
        ("doi:", (context.doi or "").lower()),
        ("url:", context.url),
        ("title:", _norm(context.title or "")),
    ):
        if value:
            return prefix + value
    return "text:" + _norm(" ".join(context.chunks))


def fuse_levels(level_results: Sequence[Sequence[Context]], page_size: int) -> list[Context]:
    """The top `page_size` of every level's results fused by reciprocal rank, one context per paper: a paper found
    again adds to its score and keeps its first context. Chunks a better-ranked context took are dropped; one level
    keeps its own order, so depth 0 is the provider's own top p."""
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    contexts: dict[str, Context] = {}
    counted: set[tuple[int, str]] = set()
    for level, results in enumerate(level_results):
        for rank, context in enumerate(results, start=1):
            key = paper_key(context)
            if (level, key) in counted:
                continue  # a paper repeated within one level counts once, at its best rank
            counted.add((level, key))
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
            if key not in contexts:
                contexts[key] = context
                first_seen[key] = (level, rank)
    ordered = sorted(scores, key=lambda k: (-scores[k], first_seen[k]))
    ranked: list[Context] = []
    seen: set[str] = set()
    for key in ordered:
        if len(ranked) >= page_size:
            break
        kept = _unseen_part(contexts[key], seen, scores[key])
        if kept is not None:
            ranked.append(kept)
    return ranked


@dataclass
class Level:
    """One recursion level: the query, what it returned (`fresh`), the ranked top p so far (`contexts`, judged and
    scored) and the merged `pool`; `error` is a provider failure, `failure` a refinement failure."""

    depth: int
    query: str | None
    refinement: str
    contexts: list[Context]
    new_chunks: int
    fresh: list[Context] = field(default_factory=list)
    failure: str | None = None
    pool: list[Context] = field(default_factory=list)
    error: str | None = None


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def recursive_search(
    provider,
    question: str,
    *,
    max_depth: int,
    page_size: int,
    refiner,
    level0: Sequence[Context] | None = None,
) -> list[Level]:
    """Levels 0..max_depth, level d's query refined from level d-1's own results. A refinement failure stops
    fetching (later levels repeat the last contexts and carry it); a provider error fails its depth and every later one."""
    method = getattr(refiner, "method", "refiner")
    try:
        first = list(level0) if level0 is not None else provider.search(question, page_size)
    except Exception as exc:  # the provider failed: every depth is a failure, none is an empty result
        error = _error(exc)
        return [
            Level(d, question if d == 0 else None, "none" if d == 0 else method, [], 0, error=error)
            for d in range(max_depth + 1)
        ]
    first = fuse_levels([first[:page_size]], page_size)
    levels = [
        Level(0, question, "none", first, sum(len(c.chunks) for c in first), fresh=first, pool=list(first))
    ]
    fetched = [first]
    query = question
    stopped: str | None = None
    errored: str | None = None
    for depth in range(1, max_depth + 1):
        previous = levels[-1]
        if errored is not None:
            levels.append(Level(depth, None, method, [], 0, error=errored))
            continue
        if stopped is None:
            refinement = refiner.refine(question, query, previous.fresh)
            if refinement.query is not None:
                query = refinement.query
                try:
                    fresh = provider.search(query, page_size)[:page_size]
                except Exception as exc:
                    errored = f"depth {depth}: {_error(exc)}"
                    levels.append(Level(depth, query, refinement.method, [], 0, error=errored))
                    continue
                fetched.append(fresh)
                pool, added = merge_contexts(previous.pool, fresh)
                ranked = fuse_levels(fetched, page_size)
                levels.append(Level(depth, query, refinement.method, ranked, added, fresh=fresh, pool=pool))
                continue
            stopped = refinement.failure or "refinement failed"
        levels.append(
            Level(depth, None, method, previous.contexts, 0, fresh=[], failure=stopped, pool=previous.pool)
        )
    return levels
