"""The paper's recursion end to end with an LLM: the Recursion Prompt goes through the real openai SDK path of
`LLMClient` (an injected transport answers with chat.completion bodies as the OpenAI API returns them, recorded in
tests/support/fake_llm.py), the refined query comes from the answer's <query> tag, each level queries a real BM25
index over a SciFact slice, and the ranked contexts hold one context per paper within and across levels."""

from __future__ import annotations

import json

import httpx2
import polars as pl
import pytest
from fake_llm import openai_chat_response

from evals import runner, scoring
from evals.judge import load_prompt, render
from evals.providers import BM25Provider
from evals.questions import questions_frame
from evals.recursive import LLMRefiner, format_results, recursive_search
from lumina_assets.core.llm import LLMClient
from lumina_assets.corpus.collections import read_corpus
from lumina_assets.parsing.chunking import passages_for_paper

CLAIM = "1 in 5 million in UK have abnormal PrP positivity."
RELEVANT = "13734012"
ANSWERS = [
    "The results cover prion prevalence in appendix samples. <query>abnormal prion protein appendix samples "
    "prevalence per million United Kingdom</query>",
    "<query>variant Creutzfeldt-Jakob disease prevalence survey tonsil appendix</query>",
]


@pytest.fixture(scope="module")
def bm25(shared_data):
    corpus = read_corpus(shared_data / "scifact")
    keep = [RELEVANT, *list(corpus)[:150]]
    papers = pl.DataFrame(
        [{"paper_id": f"beir-scifact:{d}", "title": corpus[d]["title"], "doi": None} for d in keep]
    )
    passages = pl.DataFrame(
        [
            p.to_row()
            for d in keep
            for p in passages_for_paper(
                f"beir-scifact:{d}", title=corpus[d]["title"], abstract=corpus[d]["text"]
            )
        ]
    )
    return BM25Provider(passages, papers)


def recorded_llm(prompts: list[str]) -> LLMClient:
    answers = list(ANSWERS)

    def handler(request: httpx2.Request) -> httpx2.Response:
        prompts.append(json.loads(request.content)["messages"][-1]["content"])
        return openai_chat_response(answers.pop(0), prompt_tokens=900, completion_tokens=20)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return LLMClient(backend="openai", model="gpt-4o", api_key="sk-test", http_client=client)


def test_llm_recursion_end_to_end(bm25):
    prompts: list[str] = []
    client = recorded_llm(prompts)
    levels = recursive_search(bm25, CLAIM, max_depth=2, page_size=5, refiner=LLMRefiner(client))

    assert [level.depth for level in levels] == [0, 1, 2]
    assert [level.refinement for level in levels] == ["none", "llm:openai:gpt-4o", "llm:openai:gpt-4o"]
    # the Recursion Prompt verbatim, with the question and the previous level's own results
    assert prompts[0] == render(
        load_prompt("recursion"), question=CLAIM, result=format_results(levels[0].fresh)
    )
    assert prompts[1] == render(
        load_prompt("recursion"), question=CLAIM, result=format_results(levels[1].fresh)
    )
    assert levels[1].query == "abnormal prion protein appendix samples prevalence per million United Kingdom"
    assert levels[2].query == "variant Creutzfeldt-Jakob disease prevalence survey tonsil appendix"
    assert [c.paper_id for c in levels[1].fresh] == [c.paper_id for c in bm25.search(levels[1].query, 5)]
    for level in levels:
        papers = [c.paper_id for c in level.contexts]
        assert len(papers) == len(set(papers)) <= 5  # one context per paper, within and across levels
    found_again = {c.paper_id for c in levels[0].fresh} & {c.paper_id for c in levels[1].fresh}
    assert found_again, "the refined query finds a paper of level 0 again: the case deduplication is for"
    assert client.usage.calls == 2 and client.usage.cost_usd > 0


def test_llm_recursion_scores_through_the_runner(bm25):
    questions = questions_frame(
        [
            {
                "question_id": "q2",
                "text": CLAIM,
                "kind": "beir",
                "relevant_paper_ids": [f"beir-scifact:{RELEVANT}"],
            }
        ]
    )
    frame = runner.run_recursive(
        bm25,
        questions,
        pl.DataFrame(schema=runner.PROVIDER_RESULT_SCHEMA),
        page_sizes=[5],
        max_depth=2,
        refiner=LLMRefiner(recorded_llm([])),
    )
    assert frame["refinement"].to_list() == ["none", "llm:openai:gpt-4o", "llm:openai:gpt-4o"]
    scores = scoring.question_scores(frame, None, questions).sort("depth")
    assert scores["recall_pool"].to_list()[-1] == 1.0  # the relevant paper is in the merged pool
    assert scores["error"].null_count() == 3
