"""One context form for every provider before judging: each context is cut to one budget of word tokens by one
rule that names no provider (`RULE`), since the judge's CR and CP react to length in opposite directions. The
whitepaper's own form (as returned) stays available as `WHITEPAPER`."""

from __future__ import annotations

from lumina_assets.core.schemas import Context

EQUAL = "equal"  # every provider's context cut by the rule above
WHITEPAPER = "whitepaper"  # the contexts as returned (the paper's form)
FORMS = (EQUAL, WHITEPAPER)

RULE = (
    "each context cut to {budget} word tokens: the provider's highest-ranked passage first, then its next ones, "
    "whole sentences while they fit (a first sentence longer than the budget cut to it); shorter contexts (a "
    "snippet, a short abstract) judged as they are; the same rule for every provider"
)


def ranked(context: Context) -> list[tuple[str | None, str]]:
    """(passage id, text) of the context's chunks in the provider's ranking, best first."""
    ids = list(context.passage_ids) + [None] * (len(context.chunks) - len(context.passage_ids))
    pairs = list(zip(ids, context.chunks, strict=False))
    order = [p for p in context.ranked_passage_ids if p in set(context.passage_ids)]
    if not order:
        return pairs
    position = {passage_id: index for index, passage_id in enumerate(order)}
    # stable: unranked passages keep their order
    return sorted(pairs, key=lambda pair: position.get(pair[0], len(order)))


def cut(context: Context, budget: int) -> Context:
    """The context in the equal form: best passage first, whole sentences within `budget` word tokens."""
    from evals.human_labels import sentences_of, tokens

    kept_chunks: list[str] = []
    kept_ids: list[str] = []
    used = 0
    full = False
    for passage_id, text in ranked(context):
        kept: list[str] = []
        for sentence in sentences_of(Context(title="", chunks=[text])):
            count = tokens(sentence)
            if used + count <= budget:
                kept.append(sentence)
                used += count
                continue
            if used == 0 and budget > 0:
                kept.append(" ".join(sentence.split()[:budget]))
                used = budget
            full = True
            break
        if kept:
            kept_chunks.append(" ".join(kept))
            if passage_id:
                kept_ids.append(passage_id)
        if full:
            break
    return Context(
        title=context.title,
        chunks=kept_chunks,
        doi=context.doi,
        url=context.url,
        paper_id=context.paper_id,
        score=context.score,
        passage_ids=kept_ids,
        ranked_passage_ids=[p for p in context.ranked_passage_ids if p in kept_ids],
    )


def judged_form(context: Context, form: str = EQUAL) -> Context:
    """The context as the judge sees it in `form`, cut to `evals.defaults.CONTEXT_TOKENS` in the equal form."""
    if form == WHITEPAPER:
        return context
    if form != EQUAL:
        raise ValueError(f"unknown context form {form!r}; choose from {', '.join(FORMS)}")
    from evals import defaults

    return cut(context, defaults.CONTEXT_TOKENS)


def describe(form: str = EQUAL) -> str:
    """The form as the report states it."""
    if form == WHITEPAPER:
        return "the whitepaper's form: title, chunks and DOI as each provider returned them (lengths differ)"
    from evals import defaults

    return RULE.format(budget=defaults.CONTEXT_TOKENS)
