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


def relevance_scores(engine, contexts: Sequence) -> dict[str, float]:
    """paper id -> relevance score of the engine's last search: the cosine between the query text alone and the
    paper's closest passage (the index holds unit vectors)."""
    if not contexts:
        return {}
    trace = engine.last_trace
    parsed = trace.parsed
    text = (parsed.text if parsed is not None else "") or trace.query_text
    if not text:
        return {}
    vector = trace.query_vector if trace.query_text == text else None  # as the search encoded it, else now
    if vector is None:
        vector = np.asarray(engine._embed(text), dtype=np.float32)
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    ids = [c.paper_id for c in contexts]
    scores: dict[str, float] = {}
    for paper_id, members in engine.store().paper_passage_rows(ids).items():
        matrix = np.asarray([row["vector"] for row in members], dtype=np.float32)
        if matrix.size:
            scores[paper_id] = float((matrix @ vector).max())
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
