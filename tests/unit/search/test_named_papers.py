"""A query word that names a paper ("how does ZORBA learn from links") picks the paper, not its passages: the passages
shown for that paper are chosen by the rest of the query, among its own passages, and paper ranking is the same
with or without this (`SearchConfig.passages_without_paper_name`)."""

from __future__ import annotations

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder

from lumina_assets.core.schemas import PASSAGE_SCHEMA, ParsedPaper, Section, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.query_parser import without_paper_name
from lumina_assets.search.request import SearchRequest
from lumina_assets.search.results import SearchService

ZORBA = "ZORBA: Document Vectors Trained on Links"
SECTIONS = {  # the answer (§ 2) never names the model; § 3 and § 4 name it again and again
    "2": (
        "Training Objective",
        "A link from one document to another suggests they are related, so the model "
        "learns from links: linked documents are pulled closer than unlinked ones.",
    ),
    "3": (
        "Inference",
        "At inference time ZORBA receives one document, and ZORBA outputs the ZORBA vector; "
        "how ZORBA does this does not need any link.",
    ),
    "4": (
        "Analysis",
        "We analyse ZORBA: how does ZORBA compare, and does ZORBA beat the baselines? ZORBA does.",
    ),
}
OTHER = (
    "Citation counts of journals",
    "Journals with more links between their papers were cited more often.",
)


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    parsed = ParsedPaper(
        "pdf:zorba",
        "test",
        title=ZORBA,
        sections=[Section(number, title, text) for number, (title, text) in SECTIONS.items()],
    )
    rows = [p.to_row() for p in passages_for_paper("pdf:zorba", parsed=parsed)]
    rows += [p.to_row() for p in passages_for_paper("pdf:other", title=OTHER[0], abstract=OTHER[1])]
    papers = [
        {"paper_id": "pdf:zorba", "title": ZORBA, "abstract": "", "authors": ["A Author"], "year": 2020},
        {
            "paper_id": "pdf:other",
            "title": OTHER[0],
            "abstract": OTHER[1],
            "authors": ["B Author"],
            "year": 2019,
        },
    ]
    uri = str(tmp_path_factory.mktemp("named") / "lancedb")
    indexing.index_corpus(
        connect_lancedb(uri),
        pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA)),
        pl.DataFrame(papers),
        HashingEmbedder(),
    )
    return uri


def _engine(uri: str, **changes) -> SearchEngine:
    return SearchEngine(uri, HashingEmbedder(), SearchConfig(**changes), background_loading=False)


@pytest.mark.parametrize("store", ["memory", "index"])
def test_the_word_naming_a_paper_does_not_choose_its_passages(uri, store):
    query = "how does ZORBA learn from links"
    named, kept = _engine(uri, store=store), _engine(uri, store=store, passages_without_paper_name=False)
    shown, before = named.search(query, k=2), kept.search(query, k=2)
    assert [c.paper_id for c in shown] == [c.paper_id for c in before] and shown[0].paper_id == "pdf:zorba"
    assert shown[0].ranked_passage_ids[0] == "pdf:zorba#2:0"
    assert before[0].ranked_passage_ids[0] != "pdf:zorba#2:0"  # the name's passages win with the name counted
    assert named.rank_documents(query) == kept.rank_documents(query)


def test_a_query_without_a_paper_name_is_untouched(uri):
    query = "how do links between documents train vectors"
    shown = _engine(uri).search(query, k=2)
    before = _engine(uri, passages_without_paper_name=False).search(query, k=2)
    assert [c.ranked_passage_ids for c in shown] == [c.ranked_passage_ids for c in before]


@pytest.mark.parametrize(
    ("text", "title", "expected"),
    [
        (
            "how does SPECTER use citations",
            "SPECTER: Document-level Representation Learning",
            "how does use citations",
        ),
        ("what is specter's loss", "SPECTER: Document-level Representation Learning", "what is loss"),
        (
            "how does S2ORC link entries",
            "S2ORC: The Semantic Scholar Open Research Corpus",
            "how does link entries",
        ),
        (
            "is S2ORC-SciBERT as good",
            "S2ORC: The Semantic Scholar Open Research Corpus",
            "is S2ORC-SciBERT as good",
        ),
        (
            "how is BERT pretrained",
            "Deep Bidirectional Transformers (BERT) for Language",
            "how is pretrained",
        ),
        (
            "beyond summarization tools",
            "Beyond Summarization: Designing AI Support",
            "beyond summarization tools",
        ),
        ("how does SPECTER work", "Citation graphs in 1999", "how does SPECTER work"),
    ],
)
def test_without_paper_name(text, title, expected):
    assert without_paper_name(text, title) == expected


def test_the_api_shows_the_passages_the_engine_chose(uri):
    service = SearchService(lambda: _engine(uri), pool_size=1)
    request = {"query": "how does ZORBA learn from links", "k": 2, "overview": False}
    answer = service.search(SearchRequest.from_mapping(request))
    first = answer["results"][0]
    assert first["paper_id"] == "pdf:zorba"
    assert [p["passage_id"] for p in first["passages"]] == _engine(uri).search(request["query"], k=2)[
        0
    ].passage_ids
    assert "pdf:zorba#2:0" in [p["passage_id"] for p in first["passages"]]
