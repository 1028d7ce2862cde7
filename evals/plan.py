"""What a benchmark run will send before it sends anything: LLM calls and tokens per role, requests per provider
API, USD at list price (synchronous and batched) and the wall time at each API's configured limit. How each count
is made, counted from stored levels or estimated, is in docs/benchmark.md ("Plan before spending")."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from statistics import fmean
from typing import Any

from evals.defaults import PRIMARY_PAGE_SIZE
from evals.judge import load_prompt
from evals.provider_clients import EXA_HIGHLIGHT_CHARACTERS
from lumina_assets.core import prices

CHARS_PER_TOKEN = 4.0
OUTPUT_TOKENS = {
    "questions": 30.0,
    "refiner": 25.0,
    "relevance": 6.0,
    "precision_per_sentence": 7.0,
    "graded": 6.0,
}
# Pooled estimate: the distinct share of n local providers' top p; external providers count as distinct.
LOCAL_POOL_SHARE = {1: 1.0, 2: 0.73, 3: 0.58}
JSON_OVERHEAD_CHARS = 60.0  # the {"title", "chunks", "doi"} wrapping of one context
SENTENCE_NUMBER_CHARS = 4.0  # "12. " before each sentence of a CP prompt
DEFAULT_QUESTION_CHARS = 110.0
DEFAULT_PASSAGE_CHARS = 900.0
DEFAULT_TITLE_CHARS = 90.0


@dataclass
class ContextShape:
    """What one provider's contexts look like, for the token and judge-pair estimates."""

    chars: float  # title + chunks, as judged
    sentences: float
    new_per_depth: float  # share of a depth's p contexts not in the depth before
    source: str = "default"
    returned: float = 0.0  # title + chunks as returned, which the refiner reads (0: as judged)


# A context longer than the equal form's budget (`evals.contexts`) is judged cut to about CUT_CHUNK_CHARS characters
# in CUT_SENTENCES sentences plus its title; external lengths are what each API documents (docs/benchmark.md).
CUT_CHUNK_CHARS = 703.0
CUT_SENTENCES = 4.8
S2_SNIPPET_CHARS = 3250.0
SERPAPI_SNIPPET_CHARS = 217.0


def judged_shape(chunk_chars: float, new_per_depth: float) -> ContextShape:
    """A context returned with `chunk_chars` characters of text, as the equal form judges it."""
    kept = min(chunk_chars, CUT_CHUNK_CHARS)
    sentences = max(1.0, CUT_SENTENCES * kept / CUT_CHUNK_CHARS)
    return ContextShape(
        DEFAULT_TITLE_CHARS + kept, sentences, new_per_depth, returned=DEFAULT_TITLE_CHARS + chunk_chars
    )


DEFAULT_SHAPES: dict[str, ContextShape] = {
    "lumina": ContextShape(800.0, 4.8, 0.4, returned=1460.0),
    "dense": ContextShape(800.0, 5.1, 0.4, returned=1465.0),
    "bm25": ContextShape(810.0, 4.6, 0.4, returned=1565.0),
    "semantic_scholar": judged_shape(S2_SNIPPET_CHARS, 0.5),
    "google_scholar": judged_shape(SERPAPI_SNIPPET_CHARS, 0.6),
    "exa": judged_shape(EXA_HIGHLIGHT_CHARACTERS, 0.5),
}
FALLBACK_SHAPE = ContextShape(800.0, 5.0, 0.5)

PROVIDER_APIS = {"semantic_scholar": "semantic_scholar", "google_scholar": "serpapi", "exa": "exa"}


@dataclass
class LLMRole:
    """The LLM behind one role: `backend` offline means no calls; rpm 0 means no limit of Lumina's own."""

    backend: str
    model: str
    requests_per_minute: float = 0.0

    @property
    def offline(self) -> bool:
        return self.backend == "offline"


@dataclass
class ProviderAPI:
    api: str  # "local" for providers that search Lumina's own index
    requests_per_minute: float = 0.0


@dataclass
class PlanInputs:
    """Everything the plan reads; `shapes` and `exact_pairs` come from stored tables (`evals.plan_inputs`)."""

    synthetic: int
    beir: int
    user: int
    providers: Sequence[str]
    depths: Sequence[int]
    page_sizes: Sequence[int]
    question_llm: LLMRole
    judge_llm: LLMRole
    refiner_llm: LLMRole
    provider_apis: Mapping[str, ProviderAPI] = field(default_factory=dict)
    shapes: Mapping[str, ContextShape] = field(default_factory=dict)
    question_chars: float = DEFAULT_QUESTION_CHARS
    passage_chars: float = DEFAULT_PASSAGE_CHARS
    # measured judge pairs, when every provider's levels are stored: (pairs before sharing, distinct, uncached)
    exact_pairs: tuple[int, int, int] | None = None
    # measured pooled judging, likewise: (pool items, CR / CP calls, graded calls) not in the cache
    exact_pool: tuple[int, int, int] | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def questions(self) -> int:
        return self.synthetic + self.beir + self.user


def tokens(chars: float) -> float:
    return chars / CHARS_PER_TOKEN


def _template_chars(name: str) -> float:
    return float(len(re.sub(r"\{\w+\}", "", load_prompt(name))))


def _usd(role: LLMRole, tokens_in: float, tokens_out: float, *, batch: bool) -> float | None:
    if role.offline:
        return 0.0
    if batch and role.backend not in prices.BATCH_BACKENDS:
        return None
    return prices.llm_cost(role.model, tokens_in, tokens_out, batch=batch)


def _minutes(requests: float, rpm: float) -> float | None:
    return requests / rpm if rpm > 0 else None


def judge_pair_estimate(inputs: PlanInputs) -> tuple[float, float]:
    """(pairs before sharing, distinct pairs) per the estimate in docs/benchmark.md, over every provider."""
    page_sizes = sorted(set(inputs.page_sizes))
    depths = sorted(set(inputs.depths))
    naive = distinct = 0.0
    for provider in inputs.providers:
        shape = inputs.shapes.get(provider) or DEFAULT_SHAPES.get(provider, FALLBACK_SHAPE)
        naive += inputs.questions * sum(p for p in page_sizes for _ in depths)
        first = max(page_sizes) if 0 in depths else 0
        later = sum(shape.new_per_depth * p for p in page_sizes for d in depths if d > 0)
        distinct += inputs.questions * (first + later)
    return naive, distinct


def _provider_rows(inputs: PlanInputs, providers: list[str], page_sizes: list[int], max_depth: int) -> dict:
    """Requests, price and wall time per provider: level 0 once per question, then one per refined level."""
    rows: dict[str, dict[str, Any]] = {}
    for provider in providers:
        api = inputs.provider_apis.get(provider, ProviderAPI("local"))
        requests = inputs.questions * (1 + len(page_sizes) * max_depth)
        price, note = prices.request_price(provider)
        rows[provider] = {
            "api": api.api,
            "requests": requests,
            "usd": None if price is None else round(requests * price, 4),
            "price": note,
            "requests_per_minute": api.requests_per_minute or None,
            "minutes": None if api.api == "local" else _minutes(requests, api.requests_per_minute),
        }
    return rows


@dataclass
class _Usage:
    """One role's calls and tokens; `batchable` roles can go through the batch APIs."""

    role: LLMRole
    calls: float
    tokens_in: float
    tokens_out: float
    batchable: bool
    saved: float = 0.0


def _pair_tokens(inputs: PlanInputs, mean_chars: float, mean_sentences: float) -> tuple[float, float]:
    """(input, output) tokens of one pair's CR and CP prompts together."""
    context_chars = inputs.question_chars + mean_chars + JSON_OVERHEAD_CHARS
    tokens_in = tokens(_template_chars("context_relevance") + context_chars) + tokens(
        _template_chars("context_precision") + context_chars + SENTENCE_NUMBER_CHARS * mean_sentences
    )
    return tokens_in, OUTPUT_TOKENS["relevance"] + OUTPUT_TOKENS["precision_per_sentence"] * mean_sentences


def _judge_usage(
    inputs: PlanInputs, providers: list[str], mean_chars: float, mean_sentences: float
) -> tuple[_Usage, dict[str, Any]]:
    """The judge's calls and tokens (two calls per uncached distinct pair), and its pair counts."""
    if inputs.exact_pairs is not None:
        naive_pairs, distinct_pairs, uncached_pairs = inputs.exact_pairs
        pair_source = "counted from the stored levels and the LLM cache"
    else:
        naive_pairs, distinct_pairs = judge_pair_estimate(replace(inputs, providers=providers))
        uncached_pairs = distinct_pairs
        pair_source = "estimated (see the plan's method)"
    judged = 0 if inputs.judge_llm.offline else uncached_pairs
    pair_in, pair_out = _pair_tokens(inputs, mean_chars, mean_sentences)
    usage = _Usage(
        inputs.judge_llm,
        2 * judged,
        pair_in * judged,
        pair_out * judged,
        batchable=True,
        saved=0 if inputs.judge_llm.offline else 2 * (naive_pairs - distinct_pairs),
    )
    pairs = {
        "before_sharing": int(round(naive_pairs)),
        "distinct": int(round(distinct_pairs)),
        "to_judge": int(round(judged)),
        "source": pair_source,
    }
    return usage, pairs


def _pooled_usage(
    inputs: PlanInputs, providers: list[str], mean_chars: float, mean_sentences: float
) -> tuple[_Usage, dict[str, Any]]:
    """Pooled judging's calls and tokens: graded prompts, and the CR / CP prompts the judge step does not ask."""
    p = PRIMARY_PAGE_SIZE
    if inputs.judge_llm.offline:
        items, binary, graded, source = 0, 0, 0, "none: pooled judging runs with an LLM judge only"
    elif inputs.exact_pool is not None:
        items, binary, graded = inputs.exact_pool
        source = "counted from the stored levels and the LLM cache"
    elif p not in inputs.page_sizes or 0 not in inputs.depths:
        items, binary, graded, source = 0, 0, 0, f"none: p = {p} at depth 0 is not in the grid"
    else:
        local = sum(
            1 for name in providers if inputs.provider_apis.get(name, ProviderAPI("local")).api == "local"
        )
        pooled_papers = (
            local * LOCAL_POOL_SHARE.get(local, min(LOCAL_POOL_SHARE.values())) + len(providers) - local
        )
        items = graded = inputs.questions * p * pooled_papers
        binary = 0
        source = (
            f"estimated: per question {pooled_papers:.2f} x p distinct papers ({local} local provider(s) sharing "
            f"one index, {len(providers) - local} external assumed distinct); their CR / CP prompts are the judge's "
            "own (cached)"
        )
    graded_in = tokens(
        _template_chars("graded_relevance") + inputs.question_chars + mean_chars + JSON_OVERHEAD_CHARS
    )
    pair_in, pair_out = _pair_tokens(inputs, mean_chars, mean_sentences)
    binary_in, binary_out = pair_in / 2, pair_out / 2  # a binary call is one of a pair's two prompts
    usage = _Usage(
        inputs.judge_llm,
        graded + binary,
        graded_in * graded + binary_in * binary,
        OUTPUT_TOKENS["graded"] * graded + binary_out * binary,
        batchable=True,
    )
    return usage, {"page_size": p, "items": int(round(items)), "source": source}


def _refiner_usage(
    inputs: PlanInputs, providers: list[str], page_sizes: list[int], max_depth: int, mean_chars: float
) -> _Usage:
    """One Recursion Prompt with a level's p contexts as returned per refined level, page size, question, provider."""
    refiner_on = not inputs.refiner_llm.offline and max_depth > 0
    calls = inputs.questions * len(page_sizes) * max_depth * len(providers) if refiner_on else 0
    mean_p = fmean(page_sizes) if page_sizes else 0
    prompt_chars = (
        _template_chars("recursion") + inputs.question_chars + mean_p * (mean_chars + JSON_OVERHEAD_CHARS)
    )
    tokens_in = tokens(prompt_chars) * calls
    return _Usage(inputs.refiner_llm, calls, tokens_in, OUTPUT_TOKENS["refiner"] * calls, batchable=False)


def _question_usage(inputs: PlanInputs) -> _Usage:
    """One generator call per synthetic question (none offline)."""
    from evals.questions import question_prompt

    calls = inputs.synthetic if not inputs.question_llm.offline else 0
    tokens_in = tokens(len(question_prompt("", "")) + DEFAULT_TITLE_CHARS + inputs.passage_chars) * calls
    return _Usage(inputs.question_llm, calls, tokens_in, OUTPUT_TOKENS["questions"] * calls, batchable=True)


def _llm_row(usage: _Usage) -> dict[str, Any]:
    """One role's row of the plan: calls, tokens, USD synchronous and batched, wall time at its limit."""
    role = usage.role
    calls = int(round(usage.calls))
    sync = _usd(role, usage.tokens_in, usage.tokens_out, batch=False)
    batch = _usd(role, usage.tokens_in, usage.tokens_out, batch=True) if usage.batchable else sync
    return {
        "api": "none (offline)" if role.offline else role.backend,
        "model": "offline" if role.offline else role.model,
        "calls": calls,
        "input_tokens": int(round(usage.tokens_in)),
        "output_tokens": int(round(usage.tokens_out)),
        "usd_sync": None if sync is None else round(sync, 4),
        "usd_batch": None if batch is None else round(batch, 4),
        "batchable": usage.batchable,
        "calls_saved_by_sharing": int(round(usage.saved)),
        "requests_per_minute": role.requests_per_minute or None,
        "minutes": _minutes(calls, role.requests_per_minute) if calls else 0.0,
    }


def _api_totals(llm: dict[str, dict[str, Any]], provider_rows: dict[str, dict[str, Any]]) -> dict:
    """Requests and wall time per external API, LLM calls and provider requests together."""
    apis: dict[str, dict[str, Any]] = {}
    sent = [(row["api"], row["calls"], row) for row in llm.values() if row["calls"]]
    sent += [(row["api"], row["requests"], row) for row in provider_rows.values() if row["api"] != "local"]
    for name, count, row in sent:
        api = apis.setdefault(name, {"requests": 0, "requests_per_minute": row["requests_per_minute"]})
        api["requests"] += count
    for api in apis.values():
        api["minutes"] = _minutes(api["requests"], api["requests_per_minute"] or 0)
    return apis


def _usd_total(llm: dict, provider_rows: dict, key: str) -> tuple[float, bool]:
    """(the known USD of every role and provider, whether every one of them is known)."""
    values = [r[key] for r in llm.values()] + [r["usd"] for r in provider_rows.values()]
    return round(sum(v for v in values if v is not None), 4), all(v is not None for v in values)


def build_plan(inputs: PlanInputs) -> dict[str, Any]:
    """The plan as a JSON-ready dict: `llm_calls` per role, `provider_requests` per provider, and the detail."""
    page_sizes = sorted(set(inputs.page_sizes))
    max_depth = max(inputs.depths) if inputs.depths else 0
    providers = [p for p in inputs.providers if p not in inputs.skipped]
    provider_rows = _provider_rows(inputs, providers, page_sizes, max_depth)

    shapes = {p: inputs.shapes.get(p) or DEFAULT_SHAPES.get(p, FALLBACK_SHAPE) for p in providers}
    averaged = list(shapes.values()) or [FALLBACK_SHAPE]
    mean_chars = fmean(s.chars for s in averaged)
    returned_chars = fmean(s.returned or s.chars for s in averaged)
    mean_sentences = fmean(s.sentences for s in averaged)
    judge, pairs = _judge_usage(inputs, providers, mean_chars, mean_sentences)
    pooled, pool = _pooled_usage(inputs, providers, mean_chars, mean_sentences)
    usages = {
        "questions": _question_usage(inputs),
        "judge": judge,
        "pooled": pooled,
        "refiner": _refiner_usage(inputs, providers, page_sizes, max_depth, returned_chars),
    }
    llm = {name: _llm_row(usage) for name, usage in usages.items()}
    llm["judge"]["pairs"] = pairs
    llm["pooled"]["pool"] = pool

    sync_total, sync_complete = _usd_total(llm, provider_rows, "usd_sync")
    batch_total, batch_complete = _usd_total(llm, provider_rows, "usd_batch")
    return {
        "prices_as_of": prices.PRICES_AS_OF,
        "questions": {
            "synthetic": inputs.synthetic,
            "beir": inputs.beir,
            "user": inputs.user,
            "total": inputs.questions,
        },
        "providers": providers,
        "skipped": dict(inputs.skipped),
        "depths": sorted(set(inputs.depths)),
        "page_sizes": page_sizes,
        "llm_calls": {name: row["calls"] for name, row in llm.items()},
        "provider_requests": {name: row["requests"] for name, row in provider_rows.items()},
        "llm": llm,
        "provider": provider_rows,
        "apis": _api_totals(llm, provider_rows),
        "usd_sync": sync_total,
        "usd_sync_complete": sync_complete,
        "usd_batch": batch_total,
        "usd_batch_complete": batch_complete,
        "context_shapes": {p: asdict(s) for p, s in shapes.items()},
        "token_method": f"characters / {CHARS_PER_TOKEN:g} over the rendered prompts; fixed output tokens per role",
    }


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def _time(minutes: float | None) -> str:
    if minutes is None:
        return "no limit configured"
    return f"{minutes / 60:,.1f} h" if minutes >= 90 else f"{minutes:,.1f} min"


def format_plan(plan: dict[str, Any]) -> str:
    """The plan as text for `lumina benchmark plan`."""
    q = plan["questions"]
    lines = [
        f"plan: {q['total']:,} questions ({q['synthetic']:,} synthetic, {q['beir']:,} BEIR, {q['user']:,} user) x "
        f"{len(plan['providers'])} providers ({', '.join(plan['providers']) or 'none'}) x depths "
        f"{plan['depths']} x p {plan['page_sizes']}"
    ]
    lines += [f"  skipped {name}: {reason}" for name, reason in plan["skipped"].items()]
    lines.append(f"\nLLM calls (prices as of {plan['prices_as_of']}):")
    lines.append(
        "  role       api             model               calls    tokens in   tokens out   USD sync   USD batch   time at limit"
    )
    for name, row in plan["llm"].items():
        lines.append(
            f"  {name:<10} {row['api']:<15} {row['model']:<18} {row['calls']:>8,} {row['input_tokens']:>12,} "
            f"{row['output_tokens']:>12,} {_money(row['usd_sync']):>10} "
            f"{(_money(row['usd_batch']) if row['batchable'] else 'n/a'):>11}   {_time(row['minutes'])}"
        )
    pairs = plan["llm"]["judge"]["pairs"]
    lines.append(
        f"  judge pairs: {pairs['before_sharing']:,} (question, context) pairs before sharing, {pairs['distinct']:,} "
        f"distinct, {pairs['to_judge']:,} to judge ({pairs['source']}); sharing one verdict across providers, "
        f"depths and page sizes saves {plan['llm']['judge']['calls_saved_by_sharing']:,} calls"
    )
    pool = plan["llm"]["pooled"]["pool"]
    lines.append(
        f"  pooled: {pool['items']:,} (question, paper) pool items at p = {pool['page_size']}, depth 0 "
        f"({pool['source']}), at the judge's model"
    )
    lines.append("\nprovider requests:")
    for name, row in plan["provider"].items():
        where = "local index" if row["api"] == "local" else f"{row['api']}: {_time(row['minutes'])}"
        lines.append(
            f"  {name:<17} {row['requests']:>10,}  {_money(row['usd']):>10}  ({where}; {row['price']})"
        )
    lines.append("\nper API (wall time at the configured requests/minute):")
    for name, row in plan["apis"].items():
        rpm = row["requests_per_minute"]
        lines.append(
            f"  {name:<17} {row['requests']:>10,} requests  {f'{rpm:g}/min' if rpm else 'no limit':>10}  "
            f"{_time(row['minutes'])}"
        )
    lines.append(
        f"\ntotal: {_money(plan['usd_sync'])} synchronous"
        f"{'' if plan['usd_sync_complete'] else ' + unknown'}, {_money(plan['usd_batch'])} with the batch APIs for "
        f"the judge and the questions{'' if plan['usd_batch_complete'] else ' + unknown'}"
    )
    lines.append(f"tokens: {plan['token_method']}")
    return "\n".join(lines)
