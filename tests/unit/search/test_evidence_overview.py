"""Highlighted evidence (sentence offsets, scorer), the overview's citation check, and the pinpoint metric's
bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass

from hashing_embedder import HashingEmbedder

from evals.pinpoint import RationalePair, evaluate_pinpoint, is_rationale, rationale_spans
from lumina_assets.core.schemas import Context
from lumina_assets.parsing.sentences import sentence_spans
from lumina_assets.search.evidence import EvidenceScorer, first_highlight
from lumina_assets.search.overview import (
    Reference,
    build_overview,
    check_citations,
    extractive_overview,
)

TEXT = (
    "Transformers dominate NLP.  We train SPECTER with a triplet loss where citations give positives. "
    "At inference no citations are needed (e.g. for new papers). Venues are not used."
)


def test_sentence_spans_are_offsets_into_the_original_text():
    spans = sentence_spans(TEXT)
    assert len(spans) == 4
    assert TEXT[spans[1][0] : spans[1][1]].startswith("We train SPECTER")
    assert TEXT[spans[2][0] : spans[2][1]].endswith("(e.g. for new papers).")  # "e.g." does not split
    assert all(a < b for a, b in spans) and sentence_spans("") == []


def test_scorer_highlights_the_answering_sentence_first():
    scorer = EvidenceScorer(HashingEmbedder(), max_highlights=2)
    other = "Protein folding is predicted from contacts. Citations are rare in biology."
    marks = scorer.highlight("how does SPECTER use citations for training", [[TEXT], [other]])
    index, best = first_highlight(marks[0])
    assert index == 0 and TEXT[best.start : best.end].startswith("We train SPECTER")
    assert 0 <= best.score <= 1 and best.lexical > 0
    assert len(marks) == 2 and len(marks[1]) == 1
    # lexical only for results outside dense_results; sentence vectors are cached by text
    lexical = scorer.highlight("citations training", [[TEXT]], dense_results=set())
    assert first_highlight(lexical[0])[1].dense == 0.0
    assert scorer.highlight("anything", [[""], []]) == [[[]], []]


def test_the_sentence_that_names_the_model_is_not_its_answer():
    """ "We call our model ZORBA ..." shares the query's name but only defines it: a setup cue, so the sentence
    saying how ZORBA uses links is the evidence (the README question's case, SPECTER's § 2.1)."""
    text = (
        "Venues and authors are left out. "
        "We use links: the model is pretrained so that linked documents are closer than others. "
        "We call our model ZORBA, which learns document vectors."
    )
    scorer = EvidenceScorer(HashingEmbedder(), max_highlights=1)
    index, best = first_highlight(scorer.highlight("how does ZORBA use links", [[text]])[0])
    assert text[best.start : best.end].startswith("We use links")
    assert best.prior == 0.0  # the answer carries no cue; the naming sentence carried the setup penalty


def _refs(n: int) -> list[Reference]:
    return [
        Reference(i, f"p{i}#1:0", f"p{i}", f"Paper {i}", f"Text {i}.", f"Evidence sentence {i}.")
        for i in range(1, n + 1)
    ]


def test_citation_check_refuses_sentences_that_cite_nothing_returned():
    kept, refused = check_citations(
        "SPECTER trains on citations [1]. It also cites a ghost [7]. No citation here. Both agree [1, 2]. "
        "A range works [1-2].",
        _refs(2),
    )
    assert [s.citations for s in kept] == [[1], [1, 2], [1, 2]]
    assert {r["text"] for r in refused} == {"It also cites a ghost [7].", "No citation here."}
    assert any("[7]" in r["reason"] for r in refused)


def test_extractive_overview_is_labelled_and_cites_each_top_result():
    overview = extractive_overview(_refs(4), max_sentences=3)
    assert overview.method == "extractive" and "Extractive" in overview.label
    assert [s.citations for s in overview.sentences] == [[1], [2], [3]]
    assert overview.text.startswith("Evidence sentence 1. [1]")
    assert build_overview("q", []).method == "none"


@dataclass
class _Reply:
    text: str


class _FakeLLM:
    is_offline = False
    label = "fake:model"
    model = "model"

    def __init__(self, text):
        self.text = text
        self.prompts = []

    def complete(self, prompt, **_):
        self.prompts.append(prompt)
        return _Reply(self.text)


def test_llm_overview_is_checked_and_falls_back_when_nothing_survives():
    good = _FakeLLM("Citations supervise SPECTER [1]. Venues are irrelevant [9].")
    overview = build_overview("how does SPECTER use citations", _refs(2), good)
    assert overview.method == "llm" and [s.text for s in overview.sentences] == [
        "Citations supervise SPECTER [1]."
    ]
    assert overview.refused[0]["text"] == "Venues are irrelevant [9]."
    assert "[2] (Paper 2) Text 2." in good.prompts[0]
    bad = build_overview("q", _refs(2), _FakeLLM("Nothing cited at all."))
    assert bad.method == "extractive" and bad.refused[0]["reason"] == "cites no returned passage"


def test_pinpoint_metric_counts_found_pairs_and_rationale_hits():
    abstract = "Background sentence here. The drug lowered mortality by half. Funding was public."
    contexts = {
        "does the drug lower mortality": [
            Context("Other", ["Unrelated words entirely."], paper_id="c:2"),
            Context("Trial", [abstract], paper_id="c:1"),
        ],
    }
    pairs = [
        RationalePair("1", "does the drug lower mortality", "1", ["The drug lowered  mortality by half."]),
        RationalePair("2", "does the drug lower mortality", "3", ["Missing."]),
    ]
    result = evaluate_pinpoint(
        lambda q, k: contexts[q], EvidenceScorer(HashingEmbedder()), pairs, lambda d: f"c:{d}"
    )
    summary = result.summary()
    assert summary["pairs"] == 2 and summary["found_at_10"] == 0.5
    assert summary["highlight_top1"] == 1.0 and summary["rationale_in_chunks"] == 1.0
    spans = rationale_spans(abstract, ["The drug lowered mortality by half."])
    assert spans and is_rationale(spans[0][0] + 2, spans[0][1], spans)
    assert not is_rationale(0, 20, spans)


class _Counting(HashingEmbedder):
    """Records every text encoded as a document (sentences), apart from queries."""

    def __init__(self):
        super().__init__()
        self.encoded: list[str] = []

    def encode(self, texts, **kwargs):
        self.encoded += list(texts)
        return super().encode(texts, **kwargs)

    def encode_queries(self, texts):
        return HashingEmbedder.encode(self, texts)


def _index(tmp_path, texts: dict[str, str], embedder, **config):
    import polars as pl

    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.parsing.chunking import passages_for_paper

    papers = [
        {"paper_id": p, "title": f"Paper {p}", "abstract": t, "source": "test"} for p, t in texts.items()
    ]
    rows = [
        r.to_row() for p, t in texts.items() for r in passages_for_paper(p, title=f"Paper {p}", abstract=t)
    ]
    frame = pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA))
    db = connect_lancedb(str(tmp_path / "lancedb"))
    indexing.index_corpus(db, frame, pl.DataFrame(papers), embedder, indexing.IndexConfig(**config))
    stored = indexing.open_table(db, indexing.PASSAGES_TABLE).to_arrow().to_pylist()
    return db, {r["passage_id"]: r["text"] for r in stored}


def test_sentence_vectors_stored_at_index_time_replace_request_time_encoding(tmp_path):
    from lumina_assets.indexing.sentence_vectors import SentenceVectors, index_sentences

    other = "Protein folding is predicted from contacts. Citations are rare in biology."
    embedder = _Counting()
    db, passages = _index(tmp_path, {"a": TEXT, "b": other}, embedder)
    ids = sorted(passages)
    results = [[passages[i]] for i in ids]
    query = "how does SPECTER use citations for training"

    plain = EvidenceScorer(HashingEmbedder()).highlight(query, results, passage_ids=[[i] for i in ids])
    embedder.encoded.clear()
    scorer = EvidenceScorer(embedder, stored=SentenceVectors(db, embedder.model_id))
    stored = scorer.highlight(query, results, passage_ids=[[i] for i in ids])
    assert embedder.encoded == []  # only the query was encoded (encode_queries)
    for got, want in zip(stored, plain, strict=True):  # float16 storage: same sentences, scores within 1e-3
        assert [(h.start, h.end) for p in got for h in p] == [(h.start, h.end) for p in want for h in p]
        assert all(
            abs(g.dense - w.dense) < 1e-3
            for p, q in zip(got, want, strict=True)
            for g, w in zip(p, q, strict=True)
        )

    # a passage whose text changed since indexing (stale hash) and an unknown id: encoded, not trusted
    changed = passages[ids[0]] + " A new sentence about citations."
    scorer.highlight(query, [[changed], ["Unindexed text here."]], passage_ids=[[ids[0]], ["zzz#abstract:0"]])
    assert (
        "A new sentence about citations." in embedder.encoded and "Unindexed text here." in embedder.encoded
    )
    assert len(embedder.encoded) == len(sentence_spans(changed)) + 1

    # incremental: the same passages again encode nothing; one new passage encodes only its sentences
    embedder.encoded.clear()
    again = index_sentences(db, ids, [passages[i] for i in ids], embedder, embedder.model_id)
    assert again["encoded_passages"] == 0 and embedder.encoded == []
    texts = [*(passages[i] for i in ids), "One more sentence. And two."]
    grown = index_sentences(db, [*ids, "c#abstract:0"], texts, embedder, embedder.model_id)
    assert grown["encoded_passages"] == 1  # shortest first (fewer padded tokens): the order is not the point
    assert sorted(embedder.encoded) == ["And two.", "One more sentence."]
    # a passage removed upstream loses its row; another model's rows are never used
    assert index_sentences(db, ids, texts[:-1], embedder, embedder.model_id)["deleted"] == 1
    assert SentenceVectors(db, "another-model").lookup({ids[0]: passages[ids[0]]}) == {}


def test_an_index_without_sentence_vectors_still_highlights_by_encoding(tmp_path):
    from lumina_assets.indexing.sentence_vectors import SentenceVectors

    embedder = _Counting()
    db, passages = _index(tmp_path, {"a": TEXT}, embedder, sentence_vectors=False)
    embedder.encoded.clear()
    scorer = EvidenceScorer(embedder, stored=SentenceVectors(db, embedder.model_id))
    ids = sorted(passages)
    marks = scorer.highlight("SPECTER citations training", [[passages[i] for i in ids]], passage_ids=[ids])
    assert first_highlight(marks[0]) is not None
    assert len(embedder.encoded) == sum(len(sentence_spans(passages[i])) for i in ids)

    # filled afterwards (what eval pinpoint / bench serve do for an older eval index): then nothing is encoded
    from lumina_assets.indexing.sentence_vectors import backfill_from_index

    filled = backfill_from_index(db, embedder)
    assert (
        filled["encoded_passages"] == len(ids) and backfill_from_index(db, embedder)["encoded_passages"] == 0
    )
    embedder.encoded.clear()
    fresh = EvidenceScorer(embedder, stored=SentenceVectors(db, embedder.model_id))  # no in-memory cache
    again = fresh.highlight("SPECTER citations training", [[passages[i] for i in ids]], passage_ids=[ids])
    assert first_highlight(again[0])[1].start == first_highlight(marks[0])[1].start
    assert embedder.encoded == []


def test_role_prior_prefers_findings_over_setup_and_late_sentences_in_abstracts():
    from lumina_assets.search.evidence import ScorerWeights

    # two sentences equally relevant to the query (same query terms): one sets the study up, one reports a finding
    text = "We aimed to determine whether aspirin lowers stroke risk. Aspirin lowers stroke risk by a third (p < 0.01)."
    scorer = EvidenceScorer(HashingEmbedder())
    marks = scorer.highlight("aspirin stroke risk", [[text]])
    index, best = first_highlight(marks[0])
    assert text[best.start : best.end].startswith("Aspirin lowers") and best.prior > 0
    neutral = EvidenceScorer(HashingEmbedder(), weights=ScorerWeights(finding=0, setup=0, position=0))
    assert first_highlight(neutral.highlight("aspirin stroke risk", [[text]])[0])[1].prior == 0.0

    # position counts only inside abstracts: the later of two otherwise equal sentences wins there
    same = "Graphs help retrieval. Graphs help retrieval."
    only_position = EvidenceScorer(HashingEmbedder(), weights=ScorerWeights(finding=0, setup=0, position=0.3))
    abstract = only_position.highlight("graphs retrieval", [[same]], passage_ids=[["p#abstract:0"]])
    body = only_position.highlight("graphs retrieval", [[same]], passage_ids=[["p#2.1:0"]])
    assert first_highlight(abstract[0])[1].start > 0 and first_highlight(body[0])[1].start == 0


def test_serve_background_fill_reports_a_failure_and_returns(tmp_path, capsys):
    """`lumina serve`'s sentence-vector fill runs beside the server: an unusable index location is one line, not a
    traceback in a dying thread, and the server keeps encoding per request."""
    from lumina_assets.cli.serve import _store_missing_sentence_vectors

    not_a_folder = tmp_path / "lancedb"
    not_a_folder.write_text("a file where the index should be")
    _store_missing_sentence_vectors(str(not_a_folder))
    err = capsys.readouterr().err
    assert "[sentence vectors] not stored (" in err and "encoded per request" in err
