"""Query parsing (authors, year constraints), tokenization, BM25 and acronym mining: no model needed."""

from __future__ import annotations

import numpy as np
import pytest

from lumina_assets.search.bm25 import BM25
from lumina_assets.search.fusion import Run, fuse
from lumina_assets.search.query_parser import parse_query
from lumina_assets.search.text import tokenize


@pytest.mark.parametrize(
    ("query", "year_min", "year_max"),
    [
        ("transformer pruning after 2019", 2020, None),
        ("transformer pruning since 2019", 2019, None),
        ("graph neural networks before 2015", None, 2014),
        ("graph neural networks until 2015", None, 2015),
        ("protein folding between 2010 and 2014", 2010, 2014),
        ("protein folding between 2014 and 2010", 2010, 2014),
        ("protein folding from 2001 to 2003", 2001, 2003),
        ("protein folding 2001-2003", 2001, 2003),
        ("dropout regularization published in 2014", 2014, 2014),
        ("dropout year>=2016", 2016, None),
        ("dropout year<2016", None, 2015),
        ("dropout regularization", None, None),
        ("1 in 5 million in UK have abnormal PrP positivity", None, None),
        # claims pasted as queries: their years are facts to match, not date filters
        ("Incidence of sepsis has fallen substantially from 2009 to 2014.", None, None),
        (
            "There was an estimated 30 million cases of pneumonia in young children worldwide in 2010.",
            None,
            None,
        ),
        # ... unless the sentence is about publications or says "published" / "year"
        ("Show me studies of sepsis incidence from 2009 to 2014.", 2009, 2014),
        ("Sepsis incidence has been studied in papers published since 2015.", 2015, None),
    ],
)
def test_year_constraints(query, year_min, year_max):
    parsed = parse_query(query)
    assert (parsed.year_min, parsed.year_max) == (year_min, year_max)
    if year_min or year_max:
        assert not any(str(y) in parsed.text for y in (year_min, year_max) if y)
    else:
        assert parsed.text == " ".join(query.split())  # nothing removed from the text


def test_author_syntaxes_and_text_cleanup():
    parsed = parse_query("Vaswani et al. attention mechanisms after 2016")
    assert parsed.authors == ["Vaswani"]
    assert parsed.year_min == 2017
    assert parsed.text == "attention mechanisms"
    assert "attention" in parsed.keywords and "mechanisms" in parsed.keywords

    explicit = parse_query('author:"Geoffrey Hinton" capsule networks')
    assert explicit.authors == ["Geoffrey Hinton"]
    assert explicit.text == "capsule networks"


def test_by_counts_as_author_only_for_known_authors():
    known = {"lecun"}
    parsed = parse_query("convolutional networks by Yann LeCun", known_authors=lambda n: n in known)
    assert parsed.authors == ["Yann LeCun"]
    assert parsed.text == "convolutional networks"
    # scientific prose: "activated by Notch" must stay in the query
    claim = parse_query("Macrophages are activated by Notch signaling", known_authors=lambda n: n in known)
    assert claim.authors == []
    assert "Notch" in claim.text


def test_tokenize_stems_and_drops_stopwords():
    assert tokenize("The studies of running mice") == ["studi", "run", "mice"]
    assert tokenize("the of and , . ?") == []
    assert tokenize("Ärzte untersuchen Krebszellen") != []  # non-English words survive as tokens


def test_bm25_prefers_the_matching_document_and_takes_weights():
    docs = [
        tokenize(t)
        for t in ("insulin resistance in obese mice", "dropout in neural networks", "mice and men")
    ]
    bm25 = BM25(docs)
    scores = bm25.scores({"insulin": 1.0, "mice": 1.0})
    assert int(np.argmax(scores)) == 0
    assert scores[1] == 0
    # a heavier weight on a term moves the ranking towards documents that have it
    heavy_mice = bm25.scores({"insulin": 0.1, "mice": 5.0})
    assert heavy_mice[2] > heavy_mice[0] * 0.5
    assert np.all(bm25.scores({"unknownterm": 1.0}) == 0)


def test_fusion_rrf_and_weighted_reward_agreement():
    a = Run([("d0", 3.0, "d0"), ("d1", 2.0, "d1"), ("d2", 1.0, "d2")])
    b = Run([("d3", 3.0, "d3"), ("d0", 2.9, "d0"), ("d1", 1.0, "d1")])
    for method in ("rrf", "weighted"):
        fused = fuse({"a": a, "b": b}, {"a": 1.0, "b": 1.0}, method=method, candidates=3, rrf_k=60)
        assert "d4" not in fused  # never retrieved
        assert max(fused, key=fused.get) == "d0"  # near the top of both lists beats the top of one
        assert fused["d1"] > fused["d2"]  # in both lists beats the bottom of one
    only_b = fuse({"a": a, "b": b}, {"a": 0.0, "b": 1.0}, method="weighted", candidates=3, rrf_k=60)
    assert max(only_b, key=only_b.get) == "d3"
    # a paper scores its best passage; candidates beyond the cut-off are not fused
    passages = Run([("p1#1:0", 0.9, "p1"), ("p2#1:0", 0.8, "p2"), ("p1#2:0", 0.7, "p1")])
    assert passages.by_paper().hits == [("p1", 0.9, "p1"), ("p2", 0.8, "p2")]
    assert set(fuse({"x": passages}, {}, method="weighted", candidates=2, rrf_k=60)) == {"p1#1:0", "p2#1:0"}
