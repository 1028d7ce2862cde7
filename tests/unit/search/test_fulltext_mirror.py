"""The in-memory full-text mirror against LanceDB's own full-text index, built the way the indexer builds it: the
same tokens (stop words, stemming, long words, accents, compatibility characters) and the same BM25 scores, so
the small-corpus store may answer full-text queries from memory without changing a ranking."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from lumina_assets.indexing import table_ops
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.search.fulltext_mirror import FullTextMirror, analyze, analyze_word
from lumina_assets.search.stopwords import lancedb_english
from lumina_assets.search.stores import fts_text

EDGE_WORDS = [
    "hers",  # stems to a stop word: dropped
    "theirs",
    "betweenness",
    "above",  # a stop word whose stem ("abov") is not one: kept
    "because",
    "does",
    "x" * 39,  # LanceDB drops words of 40 bytes or more
    "y" * 40,
    "z" * 41,
    "é" * 19,  # 38 bytes: kept
    "è" * 20,  # 40 bytes: dropped although 20 characters
    "naïve",
    "naive",
    "Straße",
    "strasse",
    "µg",
    "μg",
    "r²",
    "r2",
    "h₂o₂",
    "h2o2",
    "ﬁnding",
    "finding",
    "¼",
    "14",
    "CAPS",
    "caps",
    "2018",
]


def _fulltext_table(tmp_path, texts: list[str]):
    table = connect_lancedb(str(tmp_path / "db")).create_table(
        "docs", data=[{"row": i, "search_text": text} for i, text in enumerate(texts)]
    )
    table_ops.ensure_fts(table, "search_text")  # exactly the indexer's tokenizer settings
    return table


def _lance_top(table, query: str, n: int) -> list[tuple[int, float]]:
    rows = table.search(query, query_type="fts", fts_columns="search_text").select(["row", "_score"]).limit(n)
    return [(r["row"], r["_score"]) for r in rows.to_list()]


@pytest.fixture(scope="module")
def scifact_texts(shared_data) -> list[str]:
    texts = []
    with (shared_data / "scifact" / "corpus.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            texts.append(f"{record['title']}\n{record['text']}")
            if len(texts) == 600:
                break
    return texts


def test_words_become_the_tokens_lancedb_makes(tmp_path, scifact_texts):
    """One word per row; a query for each word finds exactly the rows whose word the mirror reads as the same
    token (none when the mirror drops the word)."""
    corpus_words = sorted({w for text in scifact_texts[:40] for w in re.findall(r"[^\W_]+", text)})
    words = sorted(set(lancedb_english()) | set(EDGE_WORDS) | set(corpus_words))
    words = [w for w in words if re.fullmatch(r"[^\W_]+", w)]  # "don't" etc. are two words to both
    table = _fulltext_table(tmp_path, words)
    token_rows: dict[str, set[int]] = {}
    for row, word in enumerate(words):
        token = analyze_word(word)
        if token is not None:
            token_rows.setdefault(token, set()).add(row)
    dropped = 0
    for word in words:
        found = {hit for hit, _ in _lance_top(table, word, 50)}
        token = analyze_word(word)
        dropped += token is None
        assert found == (token_rows[token] if token is not None else set()), word
    assert dropped >= 100  # the stop words and long words were really exercised, not skipped


def test_scores_and_rankings_equal_lancedb(tmp_path, shared_data, scifact_texts):
    table = _fulltext_table(tmp_path, scifact_texts)
    mirror = FullTextMirror(scifact_texts)
    with (shared_data / "scifact" / "queries.jsonl").open() as handle:
        claims = [fts_text(json.loads(line)["text"]) for line, _ in zip(handle, range(60), strict=False)]
    claims.append("cancer cancer cells")  # a repeated word counts each time, in both
    identical = 0
    for claim in claims:
        theirs = _lance_top(table, claim, 100)
        ours = mirror.top(claim, 100)
        assert theirs, claim
        their_scores = np.asarray([score for _, score in theirs])
        our_scores = np.asarray([score for _, score in ours])
        # same score at every rank; the rows may differ only where scores tie (LanceDB orders ties its own way)
        assert np.allclose(our_scores, their_scores, rtol=1e-5), claim
        by_row = dict(ours)
        for row, score in theirs:
            if row in by_row:
                assert by_row[row] == pytest.approx(score, rel=1e-5)
            else:
                assert score == pytest.approx(their_scores[-1], rel=1e-5), "only a tie at the cut may differ"
        identical += [row for row, _ in ours] == [row for row, _ in theirs]
    assert identical >= len(claims) // 2


def test_filters_and_edges(scifact_texts):
    mirror = FullTextMirror([*scifact_texts[:50], None, ""])
    assert mirror.top("", 10) == [] and mirror.top("the of and", 10) == []  # stop words only
    assert mirror.top("cancer", 0) == []
    everything = mirror.top("cancer cells", 1000)
    admitted = np.zeros(mirror.size, dtype=bool)
    admitted[::2] = True
    filtered = mirror.top("cancer cells", 1000, admitted)
    assert filtered and all(row % 2 == 0 for row, _ in filtered)
    assert filtered == [(row, score) for row, score in everything if row % 2 == 0]
    assert analyze("Cancers of the cell_line") == ["cancer", "cell", "line"]
