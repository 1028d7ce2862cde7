"""Judge prompts (verbatim from DESIGN.md), strict parsers, retries and recorded failures (never a silent 0/1)."""

from __future__ import annotations

import re

import pytest
from tools import missing_tool

from evals.judge import (
    JudgeInput,
    JudgeParseError,
    LLMJudge,
    context_sentences,
    load_prompt,
    parse_precision,
    parse_relevance,
    precision_prompt,
    relevance_prompt,
)
from lumina_assets.core import settings
from lumina_assets.core.schemas import Context
from lumina_assets.parsing.sentences import split_sentences

CONTEXT = Context(
    title="Vitamin D and fractures",
    chunks=[
        "Vitamin D supplementation reduced hip fractures by 20% in adults over 65 (Smith et al. 2010). "
        "The effect was dose dependent. Fig. 3 shows the trend.",
        "No effect was seen in younger adults.",
    ],
    doi="10.1000/xyz",
)


class ScriptedClient:
    """Returns scripted answers in order and records every prompt / system / temperature it got."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []
        self.label = "scripted:test"
        self.is_offline = False

    def complete(self, prompt, *, temperature=None, max_tokens=None, system=None):
        self.calls.append({"prompt": prompt, "temperature": temperature, "system": system})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer

        class Reply:
            text = answer

        return Reply()


def test_prompts_are_verbatim_from_design():
    design = settings.PROJECT_ROOT.parent / "shared" / "DESIGN.md"
    if not design.exists():
        missing_tool(f"DESIGN.md not found at {design} (CI has ../shared beside the checkout)")
    blocks = re.findall(r"```\n(.*?)```", design.read_text(encoding="utf-8"), re.S)
    for name, opening in (
        ("context_relevance", "Given a question and a single context"),
        ("context_precision", "Given a question and a context, evaluate"),
        ("recursion", "Based on the user's query"),
    ):
        block = next(b for b in blocks if b.startswith(opening))
        assert load_prompt(name).rstrip("\n") == block.rstrip("\n")


def test_rendered_prompts_carry_question_context_and_numbered_sentences():
    prompt = relevance_prompt("Does vitamin D prevent fractures?", CONTEXT)
    assert prompt.endswith('"doi": "10.1000/xyz"}')
    assert "Question: Does vitamin D prevent fractures? Context: {" in prompt
    sentences = context_sentences(CONTEXT)
    # the sentence splitter keeps "et al." and "Fig. 3" inside their sentences
    assert sentences == split_sentences(CONTEXT.chunks[0]) + split_sentences(CONTEXT.chunks[1])
    assert len(sentences) == 4
    cp = precision_prompt("q?", CONTEXT, sentences)
    assert "1. Vitamin D supplementation" in cp and "4. No effect was seen" in cp and "5." not in cp


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("<highly_relevant>", 1), ("Answer: <not_relevant>", 0), ("<HIGHLY_RELEVANT> <highly_relevant>", 1)],
)
def test_parse_relevance_accepts_one_verdict(answer, expected):
    assert parse_relevance(answer) == expected


@pytest.mark.parametrize("answer", ["", "relevant", "<highly_relevant> or <not_relevant>", "<relevant>"])
def test_parse_relevance_rejects_malformed(answer):
    with pytest.raises(JudgeParseError):
        parse_relevance(answer)


def test_parse_precision_strict_numbering_and_count():
    assert parse_precision("1. <critical> 2. <not_critical> 3. <critical>", 3) == [1, 0, 1]
    assert parse_precision("1) <not_critical>\n2) <critical>", 2) == [0, 1]
    for bad in (
        "1. <critical> 2. <not_critical>",  # too few for 3 sentences
        "1. <critical> 2. <not_critical> 3. <critical> 4. <critical>",  # too many
        "1. <critical> 3. <not_critical> 2. <critical>",  # out of order
        "<critical> <not_critical> <critical>",  # unnumbered
        "1. <critical> 2. <not_critical> 3. <critical> <critical>",  # stray tag
    ):
        with pytest.raises(JudgeParseError):
            parse_precision(bad, 3)


def test_llm_judge_retries_malformed_then_succeeds():
    client = ScriptedClient(
        [
            "I think it is relevant",
            "<highly_relevant>",
            "1. <critical> 2. <critical> 3. x",
            "1. <critical> 2. <not_critical> 3. <not_critical> 4. <not_critical>",
        ]
    )
    result = LLMJudge(client, max_attempts=3, workers=1).judge_one(
        JudgeInput("q1", "Does vitamin D prevent fractures?", CONTEXT)
    )
    assert result.relevant == 1 and result.relevance_attempts == 2 and result.relevance_failure is None
    assert result.critical == 1 and result.sentences == 4 and result.precision_attempts == 2
    assert all(call["temperature"] == 0.0 for call in client.calls)
    # a retry is a different request (different cache key), not a replay of the cached bad answer
    assert client.calls[0]["system"] is None and client.calls[1]["system"] is not None


def test_llm_judge_records_failure_after_retries_never_zero_or_one():
    client = ScriptedClient(["maybe"] * 3 + [RuntimeError("boom")] * 3)
    result = LLMJudge(client, max_attempts=3, workers=1).judge_one(JudgeInput("q1", "q?", CONTEXT))
    assert result.relevant is None and "unparseable" in result.relevance_failure
    assert result.critical is None and result.sentence_verdicts is None
    assert result.precision_failure == "llm error: RuntimeError"
    assert len(client.calls) == 6


class _Offline:
    """A judge_llm resource whose client has no key."""

    def get_client(self):
        from lumina_assets.core.llm import LLMClient

        return LLMClient(backend="offline", model="")


def test_without_a_judge_key_nothing_is_judged_or_validated(shared_data):
    """No LLM judge: `build_judge` returns the no-judge marker (offline, no client) and no agreement is measured,
    even with SciFact's qrels at hand."""
    from types import SimpleNamespace

    from evals import setup
    from evals.judge import NoJudge

    config = SimpleNamespace(calibration_dir=str(shared_data / "scifact"), calibration_queries=3)
    judge, client = setup.build_judge(_Offline(), config)
    assert isinstance(judge, NoJudge) and judge.is_offline and client is None
    assert setup.judge_agreement(_Offline(), config) == {}


def test_validation_half_leaves_out_the_first_half(shared_data):
    """The seeded split: the LLM judge validates on the second half only; the first half's queries are the ones
    judge-vs-qrels leaves out, and every validation query has a positive and three negatives."""
    from evals import judge_validation

    folder = shared_data / "scifact"
    first, second = judge_validation.labelled_pairs(folder, queries_per_split=4)
    left_out = judge_validation.left_out_query_ids(folder, queries_per_split=4)
    assert {p.query_id for p in first} == left_out
    assert len({p.query_id for p in second}) == 4 and not left_out & {p.query_id for p in second}
    for qid in {p.query_id for p in second}:
        labels = [p.label for p in second if p.query_id == qid]
        assert labels.count(0) == judge_validation.HARD_NEGATIVES + 1 and 1 in labels
