"""What a benchmark run will send before it sends anything: LLM calls and tokens per role, requests per provider
API, USD at list price (synchronous and through the batch APIs) and the wall time at each API's configured limit.

Counts follow the run's own steps (`evals.runner`, `evals.recursive`):
- questions: one generator call per synthetic question (none offline);
- provider requests: level 0 once per question at k = the largest page size (smaller pages are its prefix), then
  one request per refined level, page size and question (depths 1..max);
- refiner: one call per refined level, page size and question (none offline: pseudo-relevance feedback);
- judge: two calls (CR and CP) per distinct (question, context) pair, one verdict shared by every provider, depth
  and page size that returned the same context (`JudgeInput.key`); the offline judge judges nothing.

Where a provider's levels are already stored for these questions and this grid, its judge pairs are counted
exactly from them, across providers, and a pair whose verdicts are in the LLM cache costs no call ("after
caches"). Elsewhere the judge pairs are estimated: level 0 gives p_max contexts, and each later depth brings a
share `new_per_depth` of p new contexts per page size (measured from stored levels when there are any, else a
default per provider). Retries of unparseable answers are not counted.

Tokens are estimated as characters / 4 over the rendered prompt templates with the mean question and context
lengths (measured from stored tables when there are any, else the defaults below); output tokens per call are fixed
estimates per role. Prices come from `core.prices`; a model or API without a list price is unknown, not free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from evals.defaults import CONTEXT_FORM
from evals.judge import load_prompt
from lumina_assets.core import prices

CHARS_PER_TOKEN = 4.0
OUTPUT_TOKENS = {"questions": 30.0, "refiner": 25.0, "relevance": 6.0, "precision_per_sentence": 7.0}
JSON_OVERHEAD_CHARS = 60.0  # the {"title", "chunks", "doi"} wrapping of one context
SENTENCE_NUMBER_CHARS = 4.0  # "12. " before each sentence of a CP prompt
DEFAULT_QUESTION_CHARS = 110.0
DEFAULT_PASSAGE_CHARS = 900.0
DEFAULT_TITLE_CHARS = 90.0


@dataclass
class ContextShape:
    """What one provider's contexts look like, for the token and judge-pair estimates."""

    chars: float  # title + chunks
    sentences: float
    new_per_depth: float  # share of a depth's p contexts not in the depth before
    source: str = "default"


DEFAULT_SHAPES: dict[str, ContextShape] = {
    "lumina": ContextShape(1300.0, 9.0, 0.4),
    "dense": ContextShape(1300.0, 9.0, 0.4),
    "bm25": ContextShape(1100.0, 8.0, 0.4),
    "semantic_scholar": ContextShape(600.0, 4.0, 0.5),
    "google_scholar": ContextShape(250.0, 2.0, 0.6),
    "exa": ContextShape(700.0, 5.0, 0.5),
}
FALLBACK_SHAPE = ContextShape(1000.0, 7.0, 0.5)

# The API each external provider sends its requests to.
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

    @property
    def api(self) -> str:
        return "none (offline)" if self.offline else self.backend


@dataclass
class ProviderAPI:
    api: str  # "local" for providers that search Lumina's own index
    requests_per_minute: float = 0.0


@dataclass
class PlanInputs:
    """Everything the plan reads; `shapes` and `exact_pairs` come from stored tables (see `inputs_from_environment`)."""

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
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def questions(self) -> int:
        return self.synthetic + self.beir + self.user


def tokens(chars: float) -> float:
    return chars / CHARS_PER_TOKEN


def _template_chars(name: str) -> float:
    return float(len(re.sub(r"\{\w+\}", "", load_prompt(name))))


def _question_prompt_chars() -> float:
    from evals.questions import QUESTION_PROMPT

    return float(len(QUESTION_PROMPT.replace("{title}", "").replace("{passage}", "")))


def _usd(role: LLMRole, tokens_in: float, tokens_out: float, *, batch: bool) -> float | None:
    if role.offline:
        return 0.0
    if batch and role.backend not in prices.BATCH_BACKENDS:
        return None
    return prices.llm_cost(role.model, tokens_in, tokens_out, batch=batch)


def _minutes(requests: float, rpm: float) -> float | None:
    return requests / rpm if rpm > 0 else None


def judge_pair_estimate(inputs: PlanInputs) -> tuple[float, float]:
    """(pairs before sharing, distinct pairs) per the estimate in the module note, over every provider."""
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


def build_plan(inputs: PlanInputs) -> dict[str, Any]:
    """The plan as a JSON-ready dict: `llm_calls` per role, `provider_requests` per provider, and the detail."""
    page_sizes = sorted(set(inputs.page_sizes))
    max_depth = max(inputs.depths) if inputs.depths else 0
    questions = inputs.questions
    providers = [p for p in inputs.providers if p not in inputs.skipped]
    refined_levels = questions * len(page_sizes) * max_depth

    # provider requests
    provider_rows: dict[str, dict[str, Any]] = {}
    for provider in providers:
        api = inputs.provider_apis.get(provider, ProviderAPI("local"))
        requests = questions * (1 + len(page_sizes) * max_depth)
        price, note = prices.request_price(provider)
        provider_rows[provider] = {
            "api": api.api,
            "requests": requests,
            "usd": None if price is None else round(requests * price, 4),
            "price": note,
            "requests_per_minute": api.requests_per_minute or None,
            "minutes": None if api.api == "local" else _minutes(requests, api.requests_per_minute),
        }

    shapes = {p: inputs.shapes.get(p) or DEFAULT_SHAPES.get(p, FALLBACK_SHAPE) for p in providers}
    mean_chars = sum(s.chars for s in shapes.values()) / len(shapes) if shapes else FALLBACK_SHAPE.chars
    mean_sentences = (
        sum(s.sentences for s in shapes.values()) / len(shapes) if shapes else FALLBACK_SHAPE.sentences
    )
    q_chars = inputs.question_chars

    # judge
    if inputs.exact_pairs is not None:
        naive_pairs, distinct_pairs, uncached_pairs = inputs.exact_pairs
        pair_source = "counted from the stored levels and the LLM cache"
    else:
        naive_pairs, distinct_pairs = judge_pair_estimate(replace(inputs, providers=providers))
        uncached_pairs = distinct_pairs
        pair_source = "estimated (see the plan's method)"
    judge_on = not inputs.judge_llm.offline
    judge_calls = 2 * uncached_pairs if judge_on else 0
    relevance_in = tokens(_template_chars("context_relevance") + q_chars + mean_chars + JSON_OVERHEAD_CHARS)
    precision_in = tokens(
        _template_chars("context_precision")
        + q_chars
        + mean_chars
        + JSON_OVERHEAD_CHARS
        + SENTENCE_NUMBER_CHARS * mean_sentences
    )
    judge_in = (relevance_in + precision_in) * uncached_pairs if judge_on else 0.0
    judge_out = (
        (OUTPUT_TOKENS["relevance"] + OUTPUT_TOKENS["precision_per_sentence"] * mean_sentences)
        * uncached_pairs
        if judge_on
        else 0.0
    )

    # refiner: the Recursion Prompt with one level's p contexts
    refiner_on = not inputs.refiner_llm.offline and max_depth > 0
    refiner_calls = refined_levels * len(providers) if refiner_on else 0
    mean_p = sum(page_sizes) / len(page_sizes) if page_sizes else 0
    refiner_in = (
        tokens(_template_chars("recursion") + q_chars + mean_p * (mean_chars + JSON_OVERHEAD_CHARS))
        * refiner_calls
        if refiner_on
        else 0.0
    )
    refiner_out = OUTPUT_TOKENS["refiner"] * refiner_calls

    # questions
    questions_on = not inputs.question_llm.offline
    question_calls = inputs.synthetic if questions_on else 0
    question_in = (
        tokens(_question_prompt_chars() + DEFAULT_TITLE_CHARS + inputs.passage_chars) * question_calls
    )
    question_out = OUTPUT_TOKENS["questions"] * question_calls

    roles = {
        "questions": (inputs.question_llm, question_calls, question_in, question_out, True, 0),
        "judge": (
            inputs.judge_llm,
            judge_calls,
            judge_in,
            judge_out,
            True,
            (2 * (naive_pairs - distinct_pairs) if judge_on else 0),
        ),
        "refiner": (inputs.refiner_llm, refiner_calls, refiner_in, refiner_out, False, 0),
    }
    llm: dict[str, dict[str, Any]] = {}
    for name, (role, calls, t_in, t_out, batchable, saved) in roles.items():
        calls = int(round(calls))
        sync = _usd(role, t_in, t_out, batch=False)
        batch = _usd(role, t_in, t_out, batch=True) if batchable else sync
        llm[name] = {
            "api": role.api,
            "model": role.model if not role.offline else "offline",
            "calls": calls,
            "input_tokens": int(round(t_in)),
            "output_tokens": int(round(t_out)),
            "usd_sync": None if sync is None else round(sync, 4),
            "usd_batch": None if batch is None else round(batch, 4),
            "batchable": batchable,
            "calls_saved_by_sharing": int(round(saved)),
            "requests_per_minute": role.requests_per_minute or None,
            "minutes": _minutes(calls, role.requests_per_minute) if calls else 0.0,
        }
    llm["judge"]["pairs"] = {
        "before_sharing": int(round(naive_pairs)),
        "distinct": int(round(distinct_pairs)),
        "to_judge": int(round(uncached_pairs)) if judge_on else 0,
        "source": pair_source,
    }

    apis: dict[str, dict[str, Any]] = {}
    for row in llm.values():
        if row["calls"]:
            api = apis.setdefault(
                row["api"], {"requests": 0, "requests_per_minute": row["requests_per_minute"]}
            )
            api["requests"] += row["calls"]
    for row in provider_rows.values():
        if row["api"] != "local":
            api = apis.setdefault(
                row["api"], {"requests": 0, "requests_per_minute": row["requests_per_minute"]}
            )
            api["requests"] += row["requests"]
    for api in apis.values():
        api["minutes"] = _minutes(api["requests"], api["requests_per_minute"] or 0)

    def total(key: str) -> tuple[float, bool]:
        values = [r[key] for r in llm.values()] + [r["usd"] for r in provider_rows.values()]
        return round(sum(v for v in values if v is not None), 4), all(v is not None for v in values)

    sync_total, sync_complete = total("usd_sync")
    batch_total, batch_complete = total("usd_batch")
    return {
        "prices_as_of": prices.PRICES_AS_OF,
        "questions": {
            "synthetic": inputs.synthetic,
            "beir": inputs.beir,
            "user": inputs.user,
            "total": questions,
        },
        "providers": providers,
        "skipped": dict(inputs.skipped),
        "depths": sorted(set(inputs.depths)),
        "page_sizes": page_sizes,
        "llm_calls": {name: row["calls"] for name, row in llm.items()},
        "provider_requests": {name: row["requests"] for name, row in provider_rows.items()},
        "llm": llm,
        "provider": provider_rows,
        "apis": apis,
        "usd_sync": sync_total,
        "usd_sync_complete": sync_complete,
        "usd_batch": batch_total,
        "usd_batch_complete": batch_complete,
        "context_shapes": {p: asdict(s) for p, s in shapes.items()},
        "token_method": f"characters / {CHARS_PER_TOKEN:g} over the rendered prompts; fixed output tokens per role",
    }


# ---------------------------------------------------------------- measured inputs


_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def context_shape(levels, *, sample_rows: int = 5000, form: str = CONTEXT_FORM) -> ContextShape | None:
    """A provider's mean context length and sentences as the judge sees them (`form`), and new contexts per depth,
    from its stored levels."""
    from evals.contexts import judged_form
    from evals.providers import contexts_from_rows

    if levels is None or levels.height == 0:
        return None
    rows = levels.head(sample_rows).to_dicts()
    lengths, sentences = [], []
    by_level: dict[tuple[str, int, int], set[str]] = {}
    for row in rows:
        keys = set()
        for context in contexts_from_rows(row["contexts"] or []):
            judged = judged_form(context, form)
            text = " ".join(judged.chunks or [])
            lengths.append(len(judged.title or "") + len(text))
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
    )


def exact_judge_pairs(
    levels_by_provider: Mapping[str, Any],
    question_texts: Mapping[str, str],
    judge_client,
    form: str = CONTEXT_FORM,
) -> tuple[int, int, int]:
    """(pairs before sharing, distinct pairs, distinct pairs not in the LLM cache) over stored levels, each
    context in the form the judge sees it."""
    from evals.contexts import judged_form
    from evals.judge import JudgeInput, context_sentences, precision_prompt, relevance_prompt
    from evals.providers import contexts_from_rows

    naive = 0
    distinct: dict[str, JudgeInput] = {}
    for levels in levels_by_provider.values():
        for row in levels.iter_rows(named=True):
            question = question_texts.get(row["question_id"])
            if question is None:
                continue
            for context in contexts_from_rows(row["contexts"]):
                naive += 1
                item = JudgeInput(row["question_id"], question, judged_form(context, form))
                distinct.setdefault(item.key, item)
    uncached = 0
    for item in distinct.values():
        if judge_client is None or judge_client.cache is None:
            uncached += 1
            continue
        sentences = context_sentences(item.context)
        prompts = [relevance_prompt(item.question, item.context)]
        if sentences:
            prompts.append(precision_prompt(item.question, item.context, sentences))
        params = {"temperature": 0.0, "max_tokens": judge_client.max_tokens, "system": None}
        if any(judge_client.cache.get(judge_client.cache_key(p, params)) is None for p in prompts):
            uncached += 1
    return naive, len(distinct), uncached


def llm_role(resource, *, assume_keys: bool = False) -> LLMRole:
    """The role an LLM resource (duck-typed: `backend`, `effective_backend()`, `model`, `requests_per_minute`)
    plays; `assume_keys` plans the configured backend as if its key were set."""
    return LLMRole(
        backend=resource.backend if assume_keys else resource.effective_backend(),
        model=resource.model or "offline",
        requests_per_minute=float(getattr(resource, "requests_per_minute", 0.0) or 0.0),
    )


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
    """The plan's inputs from the run's options, its resources and whatever the data dir already holds: question
    counts (the BEIR folder and user query files the run would read), stored levels (context shapes, exact judge
    pairs), provider keys (a provider without one is skipped, as the run skips it, unless `assume_keys` plans the
    run with every key set) and the configured limits. `count_stored` False keeps to the estimate (no pass over the
    stored levels and the LLM cache, which takes a while on a large run)."""
    from evals import questions as questions_lib
    from evals import registry
    from evals.setup import beir_folder_candidates, load_papers
    from lumina_assets.core import settings, tables

    papers = load_papers()
    beir = 0
    if beir_queries >= 0:
        folder = questions_lib.find_beir_folder(settings.get().paths.corpus, papers, beir_folder_candidates())
        if folder is not None:
            available = questions_lib.load_beir_queries(
                folder, n=0, split=settings.get().benchmark.beir_splits, subset=beir_subset
            ).height
            beir = min(beir_queries, available) if beir_queries > 0 else available
    if user_queries is None:
        paths = [p.strip() for p in (settings.get().benchmark.user_queries or "").split(",") if p.strip()]
        user_queries = sum(questions_lib.load_user_queries(Path(p)).height for p in paths)

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

    question_frame = tables.read(tables.QUESTIONS)
    texts = (
        dict(zip(question_frame["question_id"], question_frame["text"], strict=True))
        if question_frame is not None
        else {}
    )
    question_chars = sum(len(t) for t in texts.values()) / len(texts) if texts else DEFAULT_QUESTION_CHARS
    passage_chars = _mean_passage_chars()

    shapes: dict[str, ContextShape] = {}
    stored: dict[str, Any] = {}
    grid = {(p, d) for p in page_sizes for d in depths}
    for name in providers:
        levels = tables.read(tables.RECURSIVE_RESULTS, name) if name not in skipped else None
        shape = context_shape(levels)
        if shape is not None:
            shapes[name] = shape
            have = set(zip(levels["page_size"].to_list(), levels["depth"].to_list(), strict=True))
            if grid <= have and set(levels["question_id"].to_list()) >= set(texts) and texts:
                stored[name] = levels.filter(
                    levels["page_size"].is_in(list(page_sizes)) & levels["depth"].is_in(list(depths))
                )
    judge = llm_role(resources["judge_llm"], assume_keys=assume_keys)
    exact = None
    live = [p for p in providers if p not in skipped]
    complete = live and set(stored) == set(live) and texts and len(texts) == synthetic + beir + user_queries
    if count_stored and complete and not judge.offline:
        client = resources["judge_llm"].get_client()
        client = None if client.is_offline else client
        exact = exact_judge_pairs(stored, texts, client)
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
        passage_chars=passage_chars or DEFAULT_PASSAGE_CHARS,
        exact_pairs=exact,
        skipped=skipped,
    )


def _mean_passage_chars() -> float | None:
    """The mean passage length, read lazily from the passages table's files (only the text column)."""
    from lumina_assets.core import tables

    folder = tables.PASSAGES.root() / tables.PASSAGES.name
    files = sorted(folder.glob("*.parquet")) if folder.exists() else []
    if not files:
        return None
    mean = pl.scan_parquet(files).select(pl.col("text").str.len_chars().mean()).collect().item()
    return float(mean) if mean is not None else None


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
        f"{plan['depths']} x p {plan['page_sizes']}",
    ]
    for name, reason in plan["skipped"].items():
        lines.append(f"  skipped {name}: {reason}")
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
