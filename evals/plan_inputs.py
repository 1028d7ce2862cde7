"""The benchmark plan's inputs (`evals.plan.PlanInputs`) from the run's options, its resources and whatever the
data dir already holds (stored levels give context shapes and exact judge pairs)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from evals.defaults import CONTEXT_FORM, PRIMARY_PAGE_SIZE
from evals.plan import (
    DEFAULT_PASSAGE_CHARS,
    DEFAULT_QUESTION_CHARS,
    FALLBACK_SHAPE,
    PROVIDER_APIS,
    ContextShape,
    LLMRole,
    PlanInputs,
    ProviderAPI,
)

_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def context_shape(levels) -> ContextShape | None:
    """A provider's context lengths and sentences as judged and as returned, and new contexts per depth, over its
    first stored rows."""
    from evals.contexts import judged_form
    from evals.providers import contexts_from_rows

    if levels is None or levels.height == 0:
        return None
    rows = levels.head(5000).to_dicts()
    lengths, sentences, returned = [], [], []
    by_level: dict[tuple[str, int, int], set[str]] = {}
    for row in rows:
        keys = set()
        for context in contexts_from_rows(row["contexts"] or []):
            judged = judged_form(context, CONTEXT_FORM)
            text = " ".join(judged.chunks or [])
            lengths.append(len(judged.title or "") + len(text))
            returned.append(len(context.title or "") + len(" ".join(context.chunks or [])))
            sentences.append(max(1, len(_SENTENCE_END.findall(text))))
            keys.add(json.dumps([context.title, context.doi, context.chunks]))
        by_level[(row["question_id"], row["page_size"], row["depth"])] = keys
    if not lengths:
        return None
    new, total = 0, 0
    for (question, page_size, depth), keys in by_level.items():
        before = by_level.get((question, page_size, depth - 1))
        if depth > 0 and before is not None:
            new += len(keys - before)
            total += page_size
    return ContextShape(
        chars=sum(lengths) / len(lengths),
        sentences=sum(sentences) / len(sentences),
        new_per_depth=new / total if total else FALLBACK_SHAPE.new_per_depth,
        source="measured on the stored levels",
        returned=sum(returned) / len(returned),
    )


def _judge_pairs(levels_by_provider: Mapping[str, Any], question_texts: Mapping[str, str]):
    """(pairs before sharing, the distinct judge inputs by key) over stored levels, in the form the judge sees."""
    from evals.runner import judged_pairs

    naive = 0
    distinct: dict[str, Any] = {}
    for levels in levels_by_provider.values():
        for _, _, item in judged_pairs(levels, question_texts, CONTEXT_FORM):
            naive += 1
            distinct.setdefault(item.key, item)
    return naive, distinct


def _uncached(judge_client, prompts: Sequence[str]) -> list[str]:
    """The prompts whose answers are not in the LLM cache (all of them without a cache)."""
    if judge_client is None or judge_client.cache is None:
        return list(prompts)
    params = {"temperature": 0.0, "max_tokens": judge_client.max_tokens, "system": None}
    return [p for p in prompts if judge_client.cache.get(judge_client.cache_key(p, params)) is None]


def exact_judge_pairs(
    levels_by_provider: Mapping[str, Any], question_texts: Mapping[str, str], judge_client
) -> tuple[int, int, int, set[str]]:
    """(pairs before sharing, distinct, distinct not in the LLM cache, their keys) over stored levels, as judged."""
    from evals.judge import binary_prompts

    naive, distinct = _judge_pairs(levels_by_provider, question_texts)
    uncached = sum(1 for item in distinct.values() if _uncached(judge_client, binary_prompts(item)))
    return naive, len(distinct), uncached, set(distinct)


def exact_pool_calls(
    levels_by_provider: Mapping[str, Any],
    question_texts: Mapping[str, str],
    judge_client,
    judged: Collection[str],
) -> tuple[int, int, int]:
    """(pool items, binary calls, graded calls) pooled judging will send over stored levels: each distinct prompt
    not cached, CR / CP ones only where the judge step (`judged`: its pair keys) does not ask them."""
    from evals import pooled
    from evals.judge import binary_prompts
    from evals.matching import PaperMatcher
    from evals.setup import load_papers

    frames = [levels for levels in levels_by_provider.values() if levels.height]
    if not frames:
        return 0, 0, 0
    questions = pl.DataFrame(
        {"question_id": list(question_texts), "text": list(question_texts.values())},
        schema={"question_id": pl.String, "text": pl.String},
    )
    items = pooled.build_pool(
        pl.concat(frames, how="diagonal_relaxed"),
        questions,
        page_size=PRIMARY_PAGE_SIZE,
        matcher=PaperMatcher.from_papers(load_papers()),
        form=CONTEXT_FORM,
    )
    binary: set[str] = set()  # a prompt two items share (same question text and context) is sent once
    graded: set[str] = set()
    for item in items:
        if item.judge_input.key not in judged:
            binary.update(binary_prompts(item.judge_input))
        graded.add(pooled.graded_prompt(item.question, item.context))
    return (
        len(items),
        len(_uncached(judge_client, sorted(binary))),
        len(_uncached(judge_client, sorted(graded))),
    )


def llm_role(resource, *, assume_keys: bool = False) -> LLMRole:
    """The role an LLM resource plays; `assume_keys` plans its configured backend as if its key were set."""
    return LLMRole(
        backend=resource.backend if assume_keys else resource.effective_backend(),
        model=resource.model or "offline",
        requests_per_minute=float(getattr(resource, "requests_per_minute", 0.0) or 0.0),
    )


def question_counts(beir_queries: int, beir_subset: str, user_queries: int | None) -> tuple[int, int]:
    """(BEIR queries, user queries) the run would read (`user_queries` overrides the configured files' count)."""
    from evals import questions as questions_lib
    from evals.setup import beir_folder_candidates, load_papers
    from lumina_assets.core import settings

    beir = 0
    if beir_queries >= 0:
        folder = questions_lib.find_beir_folder(
            settings.get().paths.corpus, load_papers(), beir_folder_candidates()
        )
        if folder is not None:
            available = questions_lib.load_beir_queries(
                folder, n=0, split=settings.get().benchmark.beir_splits, subset=beir_subset
            ).height
            beir = min(beir_queries, available) if beir_queries > 0 else available
    if user_queries is None:
        paths = [p.strip() for p in (settings.get().benchmark.user_queries or "").split(",") if p.strip()]
        user_queries = sum(questions_lib.load_user_queries(Path(p)).height for p in paths)
    return beir, user_queries


def provider_apis(
    resources: Mapping[str, Any], providers: Sequence[str], *, assume_keys: bool
) -> tuple[dict[str, ProviderAPI], dict[str, str]]:
    """(each provider's API and rate, the providers skipped for want of a key unless `assume_keys`)."""
    from evals import registry

    skipped: dict[str, str] = {}
    apis: dict[str, ProviderAPI] = {}
    for name in providers:
        spec = registry.PROVIDERS.get(name)
        if spec is None or spec.build is None:
            skipped[name] = f"{name} is not a provider"
            continue
        if spec.external:
            resource = resources[spec.resource_key]
            if not resource.available() and not assume_keys:
                skipped[name] = resource.unavailable_reason()
            interval = float(getattr(resource, "min_interval_s", 0.0) or 0.0)
            apis[name] = ProviderAPI(PROVIDER_APIS.get(name, name), 60.0 / interval if interval > 0 else 0.0)
        else:
            apis[name] = ProviderAPI("local")
    return apis, skipped


def stored_levels(
    providers: Sequence[str],
    skipped: Mapping[str, str],
    texts: Mapping[str, str],
    depths: Sequence[int],
    page_sizes: Sequence[int],
) -> tuple[dict[str, ContextShape], dict[str, Any]]:
    """(each stored provider's context shape, its levels cut to the grid when they cover every question)."""
    from lumina_assets.core import tables

    shapes: dict[str, ContextShape] = {}
    stored: dict[str, Any] = {}
    grid = {(p, d) for p in page_sizes for d in depths}
    for name in providers:
        levels = tables.read(tables.RECURSIVE_RESULTS, name) if name not in skipped else None
        shape = context_shape(levels)
        if shape is None:
            continue
        shapes[name] = shape
        have = set(zip(levels["page_size"].to_list(), levels["depth"].to_list(), strict=True))
        if grid <= have and set(levels["question_id"].to_list()) >= set(texts) and texts:
            stored[name] = levels.filter(
                levels["page_size"].is_in(list(page_sizes)) & levels["depth"].is_in(list(depths))
            )
    return shapes, stored


def question_texts() -> dict[str, str]:
    """The stored questions' texts by id (empty before the questions asset ran)."""
    from lumina_assets.core import tables

    frame = tables.read(tables.QUESTIONS)
    if frame is None:
        return {}
    return dict(zip(frame["question_id"], frame["text"], strict=True))


def inputs_from_environment(
    resources: Mapping[str, Any],
    *,
    synthetic: int,
    beir_queries: int,
    beir_subset: str,
    providers: Sequence[str],
    depths: Sequence[int],
    page_sizes: Sequence[int],
    user_queries: int | None = None,
    recursion_llm: str = "judge",
    assume_keys: bool = False,
    count_stored: bool = True,
) -> PlanInputs:
    """The plan's inputs from the run's options, its resources and the data dir: question counts, stored levels,
    provider keys (skipped as the run skips them unless `assume_keys`) and limits. `count_stored` False keeps to
    the estimate, with no pass over the stored levels and the LLM cache."""
    beir, user_queries = question_counts(beir_queries, beir_subset, user_queries)
    apis, skipped = provider_apis(resources, providers, assume_keys=assume_keys)
    texts = question_texts()
    question_chars = sum(len(t) for t in texts.values()) / len(texts) if texts else DEFAULT_QUESTION_CHARS
    shapes, stored = stored_levels(providers, skipped, texts, depths, page_sizes)
    judge = llm_role(resources["judge_llm"], assume_keys=assume_keys)
    exact = pool = None
    live = [p for p in providers if p not in skipped]
    complete = live and set(stored) == set(live) and texts and len(texts) == synthetic + beir + user_queries
    if count_stored and complete and not judge.offline:
        client = resources["judge_llm"].get_client()
        client = None if client.is_offline else client
        *exact, judged = exact_judge_pairs(stored, texts, client)
        pool = exact_pool_calls(stored, texts, client, judged)
    refiner_key = "question_llm" if recursion_llm.lower() == "question" else "judge_llm"
    return PlanInputs(
        synthetic=synthetic,
        beir=beir,
        user=user_queries,
        providers=list(providers),
        depths=list(depths),
        page_sizes=list(page_sizes),
        question_llm=llm_role(resources["question_llm"], assume_keys=assume_keys),
        judge_llm=judge,
        refiner_llm=llm_role(resources[refiner_key], assume_keys=assume_keys),
        provider_apis=apis,
        shapes=shapes,
        question_chars=question_chars,
        passage_chars=mean_passage_chars() or DEFAULT_PASSAGE_CHARS,
        exact_pairs=tuple(exact) if exact else None,
        exact_pool=pool,
        skipped=skipped,
    )


def mean_passage_chars() -> float | None:
    """The mean passage length, read lazily from the passages table's files (only the text column)."""
    from lumina_assets.core import tables

    folder = tables.PASSAGES.root() / tables.PASSAGES.name
    files = sorted(folder.glob("*.parquet"))
    if not files:
        return None
    mean = pl.scan_parquet(files).select(pl.col("text").str.len_chars().mean()).collect().item()
    return float(mean) if mean is not None else None
