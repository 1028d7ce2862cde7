"""One context form for every provider before judging.

Providers return contexts of very different forms: Lumina up to two hit passages with their neighbours in reading
order, bm25 a paper's passages best first, Google Scholar one snippet, Exa a few highlights, Semantic Scholar
every snippet of a paper or its abstract. The judge's relevance and precision prompts react to length in opposite
directions, so every context is cut to the same form first, by one rule that names no provider (`RULE`):

the passages are taken in the provider's own ranking (the passage it ranked highest first: `ranked_passage_ids`
where the provider states a ranking apart from the chunks' order, else the order of its chunks), and whole
sentences are kept, passage after passage, while they fit in the budget of word tokens (`\\w+` runs); a first
sentence longer than the whole budget is cut to it. The kept text stays in that order, one chunk per passage;
title and DOI are kept. A context shorter than the budget (a snippet, a short abstract) is judged as it is.

The whitepaper's own form (title, chunks, doi as the provider returned them) stays available as `WHITEPAPER`.
"""

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
    return sorted(
        pairs, key=lambda pair: position.get(pair[0], len(order))
    )  # stable: unranked keep their order


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


def judged_form(context: Context, form: str = EQUAL, budget: int | None = None) -> Context:
    """The context as the judge sees it in `form` (`budget` defaults to `evals.defaults.CONTEXT_TOKENS`)."""
    if form == WHITEPAPER:
        return context
    if form != EQUAL:
        raise ValueError(f"unknown context form {form!r}; choose from {', '.join(FORMS)}")
    from evals import defaults

    return cut(context, defaults.CONTEXT_TOKENS if budget is None else budget)


def describe(form: str = EQUAL, budget: int | None = None) -> str:
    """The form as the report states it."""
    if form == WHITEPAPER:
        return "the whitepaper's form: title, chunks and DOI as each provider returned them (lengths differ)"
    from evals import defaults

    return RULE.format(budget=defaults.CONTEXT_TOKENS if budget is None else budget)
