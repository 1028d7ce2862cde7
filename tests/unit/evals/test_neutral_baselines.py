"""The baselines are what their names say: `bm25` is BEIR's document BM25 (one document per paper, title +
abstract, stated k1 and b) and `dense` is nothing but passage vectors; their configurations are pinned and printed
in the report's setup section."""

from __future__ import annotations

import polars as pl

from evals import disclosure
from evals.providers import BM25Provider, bm25_config
from evals.registry import dense_config
from evals.report_sections import disclosure_section


def _tables(abstracts: dict[str, str] | None = None):
    passages = pl.DataFrame(
        {
            "passage_id": ["A#0", "A#1", "B#0", "C#0"],
            "paper_id": ["A", "A", "B", "C"],
            "text": [
                "a randomised trial of vitamin supplements in elderly adults",
                "hip fractures were recorded over five years of follow up",
                "vitamin levels",
                "colds and zinc lozenges",
            ],
        }
    )
    papers = pl.DataFrame(
        {
            "paper_id": ["A", "B", "C"],
            "title": ["Supplements in the elderly", "Serum levels", "Fractures of the wrist"],
            "doi": ["10.1/a", None, None],
            "abstract": [(abstracts or {}).get(p) for p in ("A", "B", "C")],
        },
        schema_overrides={"abstract": pl.String},
    )
    return passages, papers


def test_bm25_ranks_papers_as_whole_documents_not_by_their_best_passage():
    """A has both query terms in two passages; B has one of them in one short passage. Ranked by best passage B
    would lead; as one document per paper (BEIR) A does."""
    passages, papers = _tables()
    provider = BM25Provider(passages, papers)
    best_passage = provider.passage_index.search("vitamin fractures", 1)[0][0]
    assert passages["paper_id"][best_passage] == "B"  # the per-passage ranking this baseline no longer uses
    contexts = provider.search("vitamin fractures", 3)
    assert contexts[0].paper_id == "A"
    # the context is the paper's passages, the best-scoring one against the query first
    scores = provider.passage_index.scores("vitamin fractures")
    order = sorted([0, 1], key=lambda i: -float(scores[i]))
    assert contexts[0].passage_ids == [passages["passage_id"][i] for i in order]


def test_bm25_document_is_title_plus_abstract():
    """The title is part of the document (C matches only by its title) and the catalogue's abstract is the body
    when there is one (B's abstract, not its passage, decides whether it matches)."""
    passages, papers = _tables({"B": "bone fractures in athletes"})
    provider = BM25Provider(passages, papers)
    assert (
        provider.documents[provider.paper_ids.index("C")] == "Fractures of the wrist colds and zinc lozenges"
    )
    assert provider.documents[provider.paper_ids.index("B")] == "Serum levels bone fractures in athletes"
    found = {c.paper_id for c in provider.search("wrist", 3)}
    assert found == {"C"}
    assert {c.paper_id for c in provider.search("athletes", 3)} == {"B"}


def test_baseline_configurations_are_pinned(monkeypatch):
    assert bm25_config() == {
        "method": "Okapi BM25, one document per paper (BEIR's BM25 baseline)",
        "document": "title + abstract (the paper's passages in order where it has no abstract)",
        "k1": 1.2,
        "b": 0.75,
        "idf": "ln(1 + (N - n + 0.5) / (n + 0.5))",
        "tokenizer": "lumina_assets.search.text.tokenize (lower-cased \\w+ words, English stop words, Snowball)",
        "context": "the paper's passages, best passage BM25 score first, at most 3",
    }
    from evals import lexical

    built = []
    real = lexical.BM25
    monkeypatch.setattr(lexical, "BM25", lambda docs, **kw: built.append(kw) or real(docs, **kw))
    BM25Provider(*_tables())
    assert built == [{"k1": 1.2, "b": 0.75}] * 2  # the document index and the passage index behind contexts
    dense = dense_config().as_json()
    retrievers = ("passage_vectors", "passage_fulltext", "paper_fulltext")
    assert {name: dense[name] for name in retrievers} == {
        "passage_vectors": True,
        "passage_fulltext": False,
        "paper_fulltext": False,
    }
    assert dense["neighbour_smoothing"] == 0.0
    assert dense["rerank"] is None


def test_setup_section_prints_each_baselines_configuration_and_hashes():
    provider = BM25Provider(*_tables())
    dense = dense_config().as_json()
    run = {
        "provider_setup": {
            "bm25": provider.describe(),
            "dense": {
                "search_config": dense,
                "config_hash": disclosure.config_hash(dense),
                "ranking_code_hash": disclosure.ranking_code_hash(),
            },
        }
    }
    text = "\n".join(disclosure_section(run))
    assert "k1 `1.2`" in text and "b `0.75`" in text and "title + abstract" in text
    assert f"config_hash `{disclosure.config_hash(dense)}`" in text
    assert '"neighbour_smoothing": 0.0' in text
    assert "Defaults informed by" in text and "held-out half" in text


def test_hashes_change_with_the_configuration_and_the_code(tmp_path):
    base = dense_config().as_json()
    assert disclosure.config_hash(base) == disclosure.config_hash(dict(reversed(list(base.items()))))
    assert disclosure.config_hash(base) != disclosure.config_hash({**base, "neighbour_smoothing": 0.2})
    (tmp_path / "ranker").mkdir()
    (tmp_path / "ranker" / "rank.py").write_text("K = 1\n")
    before = disclosure.ranking_code_hash(["ranker"], root=tmp_path)
    (tmp_path / "ranker" / "rank.py").write_text("K = 2\n")
    assert disclosure.ranking_code_hash(["ranker"], root=tmp_path) != before


def test_the_headline_says_which_split_its_questions_come_from():
    from evals.report_sections import split_note

    shipped = {"question_sources": {"beir": "BEIR queries with human qrels, held out (scifact/test)"}}
    half = {"question_sources": {"beir": "BEIR queries with human qrels, held out (scifact/train-heldout)"}}
    assert "own held-out split" in split_note(shipped)
    assert "held-out half of the train split" in split_note(half) and "ships no test split" in split_note(
        half
    )
    assert split_note({}) == ""
