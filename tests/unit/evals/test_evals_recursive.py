"""The recursion loop: strict `<query>` parsing, the refined query comes from the previous level's results,
merge with dedupe by passage text, every level kept, failures recorded; offline PRF labelled as such."""

from __future__ import annotations

import pytest

from evals.judge import JudgeParseError, parse_tag
from evals.recursive import (
    LLMRefiner,
    PseudoRelevanceRefiner,
    fuse_levels,
    merge_contexts,
    recursive_search,
)
from lumina_assets.core.schemas import Context


class FakeProvider:
    name = "fake"

    def __init__(self, results: dict[str, list[Context]]):
        self.results = results
        self.queries: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> list[Context]:
        self.queries.append((query, k))
        return list(self.results.get(query, []))


class ScriptedLLM:
    label = "scripted:test"
    is_offline = False

    def __init__(self, answers):
        self.answers = list(answers)
        self.prompts: list[str] = []

    def complete(self, prompt, *, temperature=None, max_tokens=None, system=None):
        self.prompts.append(prompt)

        class Reply:
            text = self.answers.pop(0)

        return Reply()


def ctx(title: str, *chunks: str) -> Context:
    return Context(title=title, chunks=list(chunks), paper_id=title)


def test_parse_query_is_strict():
    assert parse_tag("Refined: <query>vitamin D  hip\nfracture</query>", "query") == "vitamin D hip fracture"
    for bad in ("vitamin D", "<query></query>", "<query>a</query> <query>b</query>", "<query>unclosed"):
        with pytest.raises(JudgeParseError):
            parse_tag(bad, "query")


def test_merge_dedupes_by_passage_text():
    previous = [ctx("A", "alpha one", "alpha two")]
    new = [ctx("A", "Alpha  one", "alpha three"), ctx("B", "alpha two"), ctx("C", "gamma")]
    merged, added = merge_contexts(previous, new)
    assert [c.title for c in merged] == ["A", "A", "C"]
    assert merged[1].chunks == ["alpha three"] and added == 2
    assert previous[0].chunks == ["alpha one", "alpha two"]  # inputs untouched


def test_recursion_levels_follow_the_llm_queries():
    provider = FakeProvider(
        {
            "q": [ctx("A", "a1"), ctx("B", "b1")],
            "r1": [ctx("B", "b1"), ctx("C", "c1")],
            "r2": [ctx("D", "d1")],
        }
    )
    llm = ScriptedLLM(["<query>r1</query>", "no tag here", "<query>r2</query>"])
    levels = recursive_search(
        provider, "q", max_depth=2, page_size=2, refiner=LLMRefiner(llm, max_attempts=2)
    )
    assert [lv.depth for lv in levels] == [0, 1, 2]
    assert [lv.query for lv in levels] == ["q", "r1", "r2"]
    assert provider.queries == [("q", 2), ("r1", 2), ("r2", 2)]
    assert [len(lv.pool) for lv in levels] == [2, 3, 4]  # B's b1 deduplicated at level 1
    assert [lv.new_chunks for lv in levels] == [2, 1, 1]
    # every depth is a ranked list of p = 2: reciprocal rank across levels puts B (ranked at levels 0 and 1) first
    assert [[c.title for c in lv.contexts] for lv in levels] == [["A", "B"], ["B", "A"], ["B", "A"]]
    # level 2's prompt is built from level 1's own results (B, C), not from level 0's
    assert '"title": "C"' in llm.prompts[1] and '"title": "A"' not in llm.prompts[1]
    assert "Based on the user's query: q," in llm.prompts[0]


def test_refinement_failure_is_recorded_and_levels_still_exist():
    provider = FakeProvider({"q": [ctx("A", "a1")]})
    llm = ScriptedLLM(["nothing", "still nothing"])
    levels = recursive_search(
        provider, "q", max_depth=3, page_size=5, refiner=LLMRefiner(llm, max_attempts=2)
    )
    assert len(levels) == 4 and provider.queries == [("q", 5)]
    assert levels[1].failure.startswith("unparseable answer") and levels[3].failure == levels[1].failure
    assert all(lv.contexts == levels[0].contexts for lv in levels)


def test_level0_can_be_supplied_and_offline_prf_is_labelled():
    provider = FakeProvider({})
    first = [ctx("A", "insulin resistance obesity adipose tissue inflammation macrophages")]
    refiner = PseudoRelevanceRefiner(terms=3)
    levels = recursive_search(provider, "obesity", max_depth=1, page_size=5, refiner=refiner, level0=first)
    assert levels[1].refinement == "offline:pseudo-relevance-feedback"
    assert levels[1].query.startswith("obesity ") and len(levels[1].query.split()) == 4
    assert "obesity" not in levels[1].query.split()[1:]
    assert provider.queries == [(levels[1].query, 5)]


class Numbered:
    """Any query returns k distinct contexts named after the query; a query in `fail_on` raises."""

    name = "numbered"

    def __init__(self, fail_on=()):
        self.fail_on = set(fail_on)

    def search(self, query, k):
        if query in self.fail_on:
            raise RuntimeError("429 Too Many Requests")
        return [ctx(f"{query}-{i}", f"{query} chunk {i}") for i in range(k + 3)]


class Counter:
    method = "scripted"

    def __init__(self):
        self.n = 0

    def refine(self, question, previous, contexts):
        from evals.recursive import Refinement

        self.n += 1
        return Refinement(f"r{self.n}", self.method)


def test_every_depth_is_exactly_p_contexts_and_the_pool_grows():
    levels = recursive_search(Numbered(), "q", max_depth=3, page_size=4, refiner=Counter())
    assert [len(lv.contexts) for lv in levels] == [4, 4, 4, 4]
    assert [len(lv.pool) for lv in levels] == [4, 8, 12, 16]
    assert [c.title for c in levels[0].contexts] == [
        "q-0",
        "q-1",
        "q-2",
        "q-3",
    ]  # depth 0: the provider's top p
    # depth 1 interleaves the two levels by reciprocal rank (ties to the earlier level)
    assert [c.title for c in levels[1].contexts] == ["q-0", "r1-0", "q-1", "r1-1"]


def test_fusion_drops_chunks_already_taken():
    fused = fuse_levels([[ctx("A", "x", "y")], [ctx("B", "x"), ctx("C", "z")]], 3)
    assert [(c.title, c.chunks) for c in fused] == [("A", ["x", "y"]), ("C", ["z"])]


def test_provider_error_at_depth_two_leaves_earlier_depths_and_is_a_failure():
    levels = recursive_search(Numbered(fail_on={"r2"}), "q", max_depth=3, page_size=3, refiner=Counter())
    assert [lv.error is None for lv in levels] == [True, True, False, False]
    assert "429" in levels[2].error and levels[3].error == levels[2].error
    assert [len(lv.contexts) for lv in levels] == [3, 3, 0, 0]


def test_provider_error_at_depth_zero_fails_every_depth_instead_of_scoring_empty():
    levels = recursive_search(Numbered(fail_on={"q"}), "q", max_depth=2, page_size=3, refiner=Counter())
    assert all(lv.error and "429" in lv.error for lv in levels)
