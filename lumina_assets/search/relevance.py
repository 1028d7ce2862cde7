"""The relevance line: which results likely match the query, on a score comparable across queries.

The engine's final score is a weighted min-max fusion: within one search the best candidate scores near the top
of the scale whatever it is, so it ranks but cannot say "this does not match". The line is drawn on a score that
means the same in every search: the cosine between the query and the paper's closest passage (the index's own
unit vectors, the query encoded by the same model). A result at or above `RELEVANCE_LINE` matches; the rest are
"less related": shown under a divider on the page and in `lumina search`, left out of exports and saved-search
alerts unless all results are asked for. `lumina bench relevance-line` measures, on collections with judgments,
the share of relevant and of non-relevant papers each candidate line keeps (docs/search.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lumina_assets.search.query_parser import author_match

# Fitted with `lumina bench relevance-line` (each query's top 20): the highest line keeping 95 % of the judged-relevant
# results, on SciFact train's tuning half; CISI's own fit is 0.38, so one line serves both (docs/search.md).
RELEVANCE_LINE = 0.37
KEEP_RELEVANT = 0.95  # the share of judged-relevant results the fitted line keeps
AUTHOR_MATCH = 1.0  # the relevance score of a paper by the author the query cites


def line_for(embedder) -> float | None:
    """The relevance line for an embedder's cosines: `RELEVANCE_LINE` for the bundled model it was fitted on;
    None (no line: every result counts as matching) for any other model, whose cosines it does not describe."""
    from lumina_assets.indexing.embedding import default_model_path

    for candidate in (embedder, getattr(embedder, "inner", None)):
        if getattr(candidate, "model_name_or_path", None) == default_model_path():
            return RELEVANCE_LINE
    return None


def query_vector(engine, text: str) -> np.ndarray:
    """The unit vector of the query text alone, as the engine's last search encoded it (else encoded now)."""
    trace = engine.last_trace
    if trace.query_vector is not None and trace.query_text == text:
        return trace.query_vector
    vector = np.asarray(engine._embed([text]), dtype=np.float32)
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def closest_passage_cosines(store, paper_ids: Sequence[str], vector: np.ndarray) -> dict[str, float]:
    """paper id -> the cosine of its passage closest to `vector` (the index holds unit vectors)."""
    rows = store.paper_passage_rows(list(paper_ids))
    scores: dict[str, float] = {}
    for paper_id, members in rows.items():
        matrix = np.asarray([row["vector"] for row in members], dtype=np.float32)
        if matrix.size:
            scores[paper_id] = float((matrix @ vector).max())
    return scores


def relevance_scores(engine, contexts: Sequence) -> dict[str, float]:
    """paper id -> relevance score (the closest passage's cosine to the query) of the engine's last search."""
    if not contexts:
        return {}
    parsed = engine.last_trace.parsed
    text = (parsed.text if parsed is not None else "") or engine.last_trace.query_text
    if not text:
        return {}
    vector = query_vector(engine, text)
    ids = [c.paper_id for c in contexts]
    scores = closest_passage_cosines(engine.store(), ids, vector)
    if (
        parsed is not None and parsed.authors
    ):  # "Cohan et al. 2020": a name has no meaning to compare; a paper
        # written by the cited author (its first author, for "et al.") matches whatever its cosine
        for paper_id, paper in engine.store().papers(ids).items():
            if author_match(parsed, paper.get("authors")) >= 1.0:
                scores[paper_id] = max(scores.get(paper_id, 0.0), AUTHOR_MATCH)
    return scores


def above(score: float | None, line: float | None) -> bool:
    """Whether a relevance score is at or above the line (always, where there is no line)."""
    return line is None or (score is not None and score >= line)


def partition(items: Sequence, scores: dict[str, float], line: float | None, key=None):
    """(the items at or above the line, the rest), each in the order given. `key(item)` is its paper id."""
    key = key or (lambda item: item.paper_id)
    matching = [item for item in items if above(scores.get(key(item)), line)]
    rest = [item for item in items if not above(scores.get(key(item)), line)]
    return matching, rest


def matching_contexts(engine, request, k: int, *, include_all: bool = False) -> list:
    """The top-k contexts of a SearchRequest (its structured filters applied as given) that are above the line;
    every one of them with `include_all` (what saved-search alerts take their hits from)."""
    contexts = engine.search(request.query, k=k, constrain=request.constrain)
    line = line_for(engine.embedder)
    if include_all or line is None:
        return contexts
    return partition(contexts, relevance_scores(engine, contexts), line)[0]


def exported(results: Sequence[dict], include_all: bool = False) -> list[dict]:
    """The API results an export or alert takes: those above the line, or every one with `include_all`."""
    return [r for r in results if include_all or r.get("matching", True)]


# ---------------------------------------------------------------- calibration on judged collections


@dataclass(frozen=True)
class Judged:
    """One returned paper of one judged query."""

    query_id: str
    paper_id: str
    rank: int
    fused: float
    cosine: float
    relevant: bool


def judged_results(
    engine,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]] | None,
    depth: int = 20,
    doc_id=lambda paper_id: paper_id,
):
    """Every paper of the top `depth` of each judged query, with its fused score, its cosine and its judgment
    (`doc_id(paper_id)` is the id the qrels use). `qrels=None`: queries from another collection, so every result
    is off topic (judged not relevant)."""
    out: list[Judged] = []
    for query_id, text in queries.items():
        judged = {} if qrels is None else qrels.get(query_id)
        if judged is None or (qrels is not None and not judged):
            continue
        contexts = engine.search(text, k=depth)
        cosines = relevance_scores(engine, contexts)
        for rank, context in enumerate(contexts, start=1):
            out.append(
                Judged(
                    query_id,
                    context.paper_id,
                    rank,
                    float(context.score),
                    cosines.get(context.paper_id, float("-inf")),
                    judged.get(doc_id(context.paper_id), 0) > 0,
                )
            )
    return out


def kept_shares(results: Iterable[Judged], line: float, score=lambda r: r.cosine) -> tuple[float, float]:
    """(share of the relevant results kept at or above `line`, share of the non-relevant ones kept)."""
    relevant = kept_relevant = other = kept_other = 0
    for result in results:
        kept = score(result) >= line
        if result.relevant:
            relevant, kept_relevant = relevant + 1, kept_relevant + kept
        else:
            other, kept_other = other + 1, kept_other + kept
    return kept_relevant / max(relevant, 1), kept_other / max(other, 1)


def fit_line(
    results: Sequence[Judged], keep_relevant: float = KEEP_RELEVANT, score=lambda r: r.cosine
) -> float:
    """The highest line (to 0.01) that keeps at least `keep_relevant` of the relevant results."""
    values = sorted((score(r) for r in results if r.relevant), reverse=True)
    if not values:
        return 0.0
    cut = values[min(len(values) - 1, max(0, int(np.ceil(keep_relevant * len(values))) - 1))]
    return float(np.floor(cut * 100) / 100)
