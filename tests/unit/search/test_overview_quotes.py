"""The extractive (and LLM) overview quotes sentences a researcher can use: never a caption, heading, transition or
reference entry, never a paragraph as one "sentence", and never the paper's own citation numbers as links."""

from __future__ import annotations

from dataclasses import dataclass

from lumina_assets.search.overview import (
    CITATION,
    Reference,
    build_overview,
    extractive_overview,
    refusal_reason,
    strip_paper_citations,
)


def _ref(number: int, paper: str, evidence: str, score: float = 1.0) -> Reference:
    return Reference(number, f"{paper}#1:{number}", paper, f"Paper {paper}", evidence, evidence, score)


def test_caption_refused_and_the_papers_next_passage_quoted():
    overview = extractive_overview(
        [
            _ref(1, "a", "Figure 2: Overview of the training pipeline with citation triplets.", 0.9),
            _ref(
                2, "a", "SPECTER learns document embeddings from citation triplets with a margin loss.", 0.7
            ),
        ]
    )
    assert [s.text for s in overview.sentences] == [
        "SPECTER learns document embeddings from citation triplets with a margin loss. [2]"
    ]
    assert overview.refused[0]["reason"] == "a figure or table caption"


def test_the_papers_own_citation_brackets_never_become_links():
    references = [
        _ref(n, f"p{n}", f"Filler sentence number {n} about something else entirely.") for n in range(2, 11)
    ]
    references.insert(
        0,
        _ref(
            1,
            "p1",
            "Prior systems [8][9][14] and surveys [3]-[5] used citation graphs [2, 7] to rank scientific documents.",
            2.0,
        ),
    )
    overview = extractive_overview(references, max_sentences=1)
    (sentence,) = overview.sentences
    assert sentence.text == "Prior systems and surveys used citation graphs to rank scientific documents. [1]"
    assert [n for group in CITATION.findall(overview.text) for n in group.split(",")] == ["1"]


def test_a_paragraph_is_cut_to_one_sentence_and_transitions_are_refused():
    overview = extractive_overview(
        [
            _ref(
                1,
                "a",
                "In the previous section, we described the corpus. The corpus has 81.1M papers in total.",
            ),
            _ref(2, "b", "In this section, we describe the model."),
        ]
    )
    assert [s.text for s in overview.sentences] == ["The corpus has 81.1M papers in total. [1]"]
    assert overview.refused == [
        {"text": "In this section, we describe the model.", "reason": "a transition sentence, not a finding"}
    ]


def test_headings_and_reference_entries_are_not_sentences():
    assert refusal_reason("3.2 Training Objective") == "a heading or fragment, not a sentence"
    assert (
        refusal_reason(
            "Arman Cohan, Sergey Feldman, Iz Beltagy, Doug Downey, and Daniel S. Weld. 2020. SPECTER: Document-level "
            "representation learning. In Proceedings of ACL, pp. 2270-2282."
        )
        == "a reference list entry"
    )
    assert refusal_reason("The citation graph gives positives and hard negatives for training. [1]") is None
    assert strip_paper_citations("as shown before [12] , and later [3-5].") == "as shown before, and later."


@dataclass
class _Reply:
    text: str


class _FakeLLM:
    label = "a test LLM"
    model = "fake"
    is_offline = False

    def __init__(self, answer: str):
        self.answer = answer
        self.prompts: list[str] = []

    def complete(self, prompt: str, **_):
        self.prompts.append(prompt)
        return _Reply(self.answer)


def test_llm_sentences_follow_the_same_rules_and_see_no_paper_brackets():
    client = _FakeLLM(
        "Table 3: results on SciDocs [1]. SPECTER trains a Transformer on citation triplets [1]."
    )
    references = [_ref(1, "a", "SPECTER [8] trains on citation triplets to embed papers.")]
    overview = build_overview("how does SPECTER train", references, client)
    assert overview.method == "llm"
    assert [s.text for s in overview.sentences] == ["SPECTER trains a Transformer on citation triplets [1]."]
    assert overview.refused == [
        {"text": "Table 3: results on SciDocs [1].", "reason": "a figure or table caption"}
    ]
    assert "[8]" not in client.prompts[0]


def test_a_result_much_less_related_than_the_first_quote_is_not_quoted():
    """Evidence scores are normalized within each result, so the cosine to the query decides whether a later result
    belongs in the overview (the SPECTER search quoted a Bayh-Dole paper before the floor)."""

    def quoted(number: int, paper: str, evidence: str, cosine: float) -> Reference:
        return Reference(number, f"{paper}#1:{number}", paper, paper, evidence, evidence, 1.0, cosine)

    references = [
        quoted(1, "specter", "SPECTER trains on citation triplets of a query paper and its citations.", 0.71),
        quoted(2, "scidocs", "SciDocs evaluates citation prediction with embeddings of papers.", 0.52),
        quoted(
            3, "bayh-dole", "The Act may provide an incentive to reduce basic research at universities.", 0.19
        ),
        quoted(4, "open-access", "Open access articles were cited more often than other articles.", 0.37),
    ]
    overview = extractive_overview(references)
    assert [s.citations for s in overview.sentences] == [[1], [2]]
    assert [r["reason"] for r in overview.refused] == [
        "less related to the search than the first quote (cosine 0.19 against 0.71)",
        "less related to the search than the first quote (cosine 0.37 against 0.71)",
    ]
    unscored = [
        Reference(r.number, r.passage_id, r.paper_id, r.title, r.text, r.evidence) for r in references
    ]
    assert len(extractive_overview(unscored).sentences) == 3  # no cosines (no model scores): no floor
