"""The relevance line: which results likely match the query, drawn on the cosine between the query and the paper's
closest passage (fused scores rank but cannot say "this does not match"). Results below it are "less related"
(docs/search.md; fitted by `lumina bench relevance-line`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lumina_assets.search.query_parser import author_match

# the highest line keeping 95 % of the judged-relevant results on SciFact train's tuning half (docs/search.md)
RELEVANCE_LINE = 0.37
AUTHOR_MATCH = 1.0  # the relevance score of a paper by the author the query cites


def line_for(embedder) -> float | None:
    """`RELEVANCE_LINE` for the bundled model it was fitted on; None (every result matches) for any other model."""
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
    vector = np.asarray(engine._embed(text), dtype=np.float32)
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
    if parsed is not None and parsed.authors:
        # "Cohan et al. 2020": a paper by the cited (first) author matches whatever its cosine
        for paper_id, paper in engine.store().papers(ids).items():
            if author_match(parsed, paper.get("authors")) >= 1.0:
                scores[paper_id] = max(scores.get(paper_id, 0.0), AUTHOR_MATCH)
    return scores


def above(score: float | None, line: float | None) -> bool:
    """Whether a relevance score is at or above the line (always, where there is no line)."""
    return line is None or (score is not None and score >= line)


def partition(contexts: Sequence, scores: dict[str, float], line: float | None):
    """(the contexts at or above the line, the rest), each in the order given."""
    matching = [c for c in contexts if above(scores.get(c.paper_id), line)]
    rest = [c for c in contexts if not above(scores.get(c.paper_id), line)]
    return matching, rest


def matching_contexts(engine, request, k: int) -> list:
    """The top-k contexts of a SearchRequest that are above the line; alerts take their hits from these."""
    contexts = engine.search(request.query, k=k, constrain=request.constrain)
    line = line_for(engine.embedder)
    if line is None:
        return contexts
    return partition(contexts, relevance_scores(engine, contexts), line)[0]


def exported(results: Sequence[dict], include_all: bool = False) -> list[dict]:
    """The API results an export or alert takes: those above the line, or every one with `include_all`."""
    return [r for r in results if include_all or r.get("matching", True)]
