"""The judge, ragas-style: a typed input, the paper's prompt, a strict output parser; score math lives elsewhere.
An unparseable LLM answer is retried, then recorded as a failure; without an LLM judge `NoJudge` judges nothing."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources as importlib_resources
from typing import Any

from lumina_assets.core.concurrency import map_in_threads
from lumina_assets.core.llm import BudgetExhausted
from lumina_assets.core.schemas import Context
from lumina_assets.parsing.sentences import split_sentences


class JudgeParseError(ValueError):
    """The judge's answer does not follow the required format."""


def load_prompt(name: str) -> str:
    """A prompt template from evals/prompts (kept verbatim from the paper)."""
    return importlib_resources.files("evals").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def render(template: str, **values: str) -> str:
    """Fill `{name}` slots by plain replacement: contexts contain braces that str.format would choke on."""
    out = template
    for name, value in values.items():
        out = out.replace("{" + name + "}", value)
    return out.rstrip("\n")


_SEGMENTER_LOCK = threading.Lock()


def context_sentences(context: Context) -> list[str]:
    """The sentences of a context's chunks in order: the units Context Precision counts (t_ij). Judge threads take
    turns here, so a context is always numbered the same way whatever segmenter backs split_sentences."""
    sentences: list[str] = []
    with _SEGMENTER_LOCK:
        for chunk in context.chunks:
            sentences += split_sentences(chunk)
    return sentences


def format_context_for_relevance(context: Context) -> str:
    """The context as the Context Relevance prompt describes it: 'title', 'chunks' and 'doi'."""
    return json.dumps(
        {"title": context.title, "chunks": list(context.chunks), "doi": context.doi}, ensure_ascii=False
    )


def relevance_prompt(question: str, context: Context) -> str:
    return render(
        load_prompt("context_relevance"), question=question, context=format_context_for_relevance(context)
    )


def precision_prompt(question: str, context: Context, sentences: Sequence[str]) -> str:
    """The Context Precision prompt: title and DOI, then the sentences numbered from 1."""
    numbered = " ".join(f"{i}. {s}" for i, s in enumerate(sentences, start=1))
    described = json.dumps({"title": context.title, "doi": context.doi}, ensure_ascii=False)
    return render(
        load_prompt("context_precision"), question=question, context=f"{described} Sentences: {numbered}"
    )


def binary_prompts(item: JudgeInput) -> list[str]:
    """The judge's first-attempt prompts for one pair: CR, and CP when the context has sentences."""
    sentences = context_sentences(item.context)
    prompts = [relevance_prompt(item.question, item.context)]
    if sentences:
        prompts.append(precision_prompt(item.question, item.context, sentences))
    return prompts


def parse_tag(answer: str, tag: str) -> str:
    """The content, spaces collapsed, of exactly one non-empty `<tag>...</tag>`; anything else is malformed."""
    pattern = re.compile(rf"<{tag}>(.*?)</{tag}>", re.IGNORECASE | re.DOTALL)
    found = [re.sub(r"\s+", " ", m).strip() for m in pattern.findall(answer or "")]
    if len(found) != 1 or not found[0]:
        raise JudgeParseError(f"expected exactly one non-empty <{tag}>...</{tag}>, found {len(found)}")
    return found[0]


_RELEVANCE_TAG = re.compile(r"<\s*(highly_relevant|not_relevant)\s*/?\s*>", re.IGNORECASE)
_PRECISION_ITEM = re.compile(r"(\d+)\s*[.):]\s*<\s*(critical|not_critical)\s*/?\s*>", re.IGNORECASE)
_ANY_PRECISION_TAG = re.compile(r"<\s*(critical|not_critical)\s*/?\s*>", re.IGNORECASE)


def parse_relevance(answer: str) -> int:
    """1 for `<highly_relevant>`, 0 for `<not_relevant>`; both, or neither, is malformed."""
    tags = {m.group(1).lower() for m in _RELEVANCE_TAG.finditer(answer or "")}
    if len(tags) != 1:
        raise JudgeParseError(
            f"expected exactly one of <highly_relevant>/<not_relevant>, found {sorted(tags) or 'none'}"
        )
    return 1 if tags.pop() == "highly_relevant" else 0


def parse_precision(answer: str, expected: int) -> list[int]:
    """Per-sentence 1/0 from a numbered `<critical>`/`<not_critical>` list numbered 1..expected in order."""
    items = _PRECISION_ITEM.findall(answer or "")
    loose = _ANY_PRECISION_TAG.findall(answer or "")
    if len(loose) != len(items):
        raise JudgeParseError(f"{len(loose) - len(items)} verdict tag(s) without a sentence number")
    numbers = [int(n) for n, _ in items]
    if numbers != list(range(1, expected + 1)):
        raise JudgeParseError(
            f"expected verdicts numbered 1..{expected}, got {len(numbers)} numbered {numbers[:12]}"
        )
    return [1 if tag.lower() == "critical" else 0 for _, tag in items]


@dataclass
class JudgeInput:
    """One (question, context) pair to judge; `key` identifies it across providers, levels and runs."""

    question_id: str
    question: str
    context: Context

    @property
    def key(self) -> str:
        blob = json.dumps(
            [self.question, self.context.title, self.context.doi, list(self.context.chunks)],
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


@dataclass
class JudgeResult:
    key: str
    question_id: str
    judge: str
    relevant: int | None
    relevance_failure: str | None
    relevance_attempts: int
    critical: int | None
    sentences: int
    sentence_verdicts: list[int] | None
    precision_failure: str | None
    precision_attempts: int
    # always empty for the LLM judge; kept so stored judgments read alike
    relevance_score: float | None = None


def ask_with_retries(
    client, prompt: str, parse: Callable[[str], Any], max_attempts: int, retry_note: str, **params: Any
) -> tuple[Any, str | None, int]:
    """(parsed answer, None, attempts) or (None, failure reason, attempts) after `max_attempts` bad answers. A retry
    carries `retry_note` as its system message, so it is a fresh call with a cache key of its own."""
    problem = "no attempt"
    for attempt in range(max_attempts):
        system = None if attempt == 0 else f"(retry {attempt}: {retry_note})"
        try:
            answer = client.complete(prompt, system=system, **params).text
        except BudgetExhausted:  # the run stops; the pair is neither judged nor failed
            raise
        except Exception as exc:  # an API error is a failed attempt, reported by type only (no secrets)
            problem = f"llm error: {type(exc).__name__}"
            continue
        try:
            return parse(answer), None, attempt + 1
        except JudgeParseError as exc:
            problem = f"unparseable answer: {exc}"
    return None, problem, max_attempts


class LLMJudge:
    """The paper's judge through any `core.llm.LLMClient`, at temperature 0."""

    def __init__(self, client, *, max_attempts: int = 3, workers: int | None = None):
        self.client = client
        self.max_attempts = max_attempts
        # the client's concurrency (`LLMResource.resolved_concurrency`, derived from its rate limit) unless the
        # caller names its own: enough pairs in flight to keep the API at its configured rate
        self.workers = workers if workers is not None else getattr(client, "concurrency", 4)
        self.name = f"llm:{client.label}"
        self.is_offline = False

    def ask(self, prompt: str, parse: Callable[[str], Any]) -> tuple[Any, str | None, int]:
        """`prompt` at temperature 0, retried on a bad answer (`ask_with_retries`)."""
        return ask_with_retries(
            self.client,
            prompt,
            parse,
            self.max_attempts,
            "follow the required answer format exactly",
            temperature=0.0,
        )

    def judge_relevance(self, question: str, context: Context) -> tuple[int | None, str | None, int]:
        return self.ask(relevance_prompt(question, context), parse_relevance)

    def judge_precision(
        self, question: str, context: Context
    ) -> tuple[list[int] | None, str | None, int, int]:
        sentences = context_sentences(context)
        if not sentences:
            return [], None, 0, 0
        verdicts, failure, attempts = self.ask(
            precision_prompt(question, context, sentences), lambda a: parse_precision(a, len(sentences))
        )
        return verdicts, failure, attempts, len(sentences)

    def judge_one(self, item: JudgeInput) -> JudgeResult:
        relevant, rel_failure, rel_attempts = self.judge_relevance(item.question, item.context)
        verdicts, cp_failure, cp_attempts, n_sentences = self.judge_precision(item.question, item.context)
        return JudgeResult(
            key=item.key,
            question_id=item.question_id,
            judge=self.name,
            relevant=relevant,
            relevance_failure=rel_failure,
            relevance_attempts=rel_attempts,
            critical=sum(verdicts) if verdicts is not None else None,
            sentences=n_sentences,
            sentence_verdicts=verdicts,
            precision_failure=cp_failure,
            precision_attempts=cp_attempts,
        )

    def judge_many(self, items: Sequence[JudgeInput]) -> list[JudgeResult]:
        """Every pair judged, `workers` pairs at a time, in the order given."""
        return map_in_threads(self.judge_one, items, self.workers)

    def relevance_verdicts(self, pairs: Sequence[tuple[str, Context]]) -> list[int | None]:
        """CR verdicts of `pairs`, `workers` at a time, in the order given."""
        return map_in_threads(lambda pair: self.judge_relevance(*pair)[0], pairs, self.workers)


class NoJudge:
    """Where no LLM judge is configured: nothing is judged, and offline runs compare providers on qrels alone (an
    offline judge would have to share no model with a provider under test; Lumina ships none)."""

    name = "none"
    is_offline = True
