"""The index-time tuner: on two real corpora whose best settings differ (dense vectors informative on one, noise on
the other) it adopts a different setting for each; a corpus too small to tell keeps the defaults and says so."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from lumina_assets.corpus.collections import load_beir, load_smart
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search import tuning
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.tuned_settings import TuningRecord

_WORD = re.compile(r"[a-z]{3,}")


class TopicEmbedder:
    """Dense vectors that know the corpus: a word's vector is the sum of random vectors of the papers it occurs
    in, divided by its document frequency squared, so a sentence points at its paper even once the sentence is
    withheld from that paper's passage (a dense retriever far better than BM25 on these pseudo-queries)."""

    def __init__(self, papers: dict[str, str], dimension: int = 96):
        rng = np.random.default_rng(0)
        paper_vectors = {p: rng.standard_normal(dimension) for p in papers}
        sums: dict[str, np.ndarray] = {}
        counts: dict[str, int] = {}
        for paper_id, text in papers.items():
            for word in set(_WORD.findall(text.lower())):
                sums[word] = sums.get(word, 0) + paper_vectors[paper_id]
                counts[word] = counts.get(word, 0) + 1
        # rare words dominate: a word of one paper points straight at it
        self.words = {word: vector / counts[word] ** 2 for word, vector in sums.items()}
        self.dimension = dimension

    def encode(self, texts, **_) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row] += self.words.get(word, 0)
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
        return out


class NoiseEmbedder:
    """Dense vectors that carry nothing: a random unit vector per text."""

    dimension = 96

    def encode(self, texts, **_) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimension)
            out[row] = vector / np.linalg.norm(vector)
        return out


def corpus_of(docs: dict[str, dict], prefix: str, embedder_for) -> tuple[tuning.TuningCorpus, object]:
    ids, papers, titles, texts = [], [], [], []
    for doc_id, doc in docs.items():
        for passage in passages_for_paper(f"{prefix}:{doc_id}", title=doc["title"], abstract=doc["text"]):
            ids.append(passage.passage_id)
            papers.append(f"{prefix}:{doc_id}")
            titles.append(doc["title"])
            texts.append(passage.text)
    embedder = embedder_for({f"{prefix}:{d}": f"{doc['title']} {doc['text']}" for d, doc in docs.items()})
    corpus = tuning.TuningCorpus(
        passage_ids=ids,
        passage_papers=papers,
        passage_titles=titles,
        passage_texts=texts,
        vectors=embedder.encode([f"{t}. {x}" for t, x in zip(titles, texts, strict=True)]),
        paper_ids=[f"{prefix}:{d}" for d in docs],
        paper_titles=[doc["title"] for doc in docs.values()],
        paper_abstracts=[doc["text"] for doc in docs.values()],
    )
    return corpus, embedder


@pytest.fixture(scope="module")
def scifact_docs(shared_data):
    corpus = load_beir(shared_data / "scifact", "train").corpus
    return dict(list(corpus.items())[:260])


@pytest.fixture(scope="module")
def cisi_docs(shared_data):
    corpus = load_smart(shared_data / "cisi").corpus
    return dict(list(corpus.items())[:400])


def dense_weight(setting: dict) -> float:
    return setting.get("weights", SearchConfig().weights)["passage_vectors"]


def test_tuner_adopts_a_different_setting_per_corpus(scifact_docs, cisi_docs):
    informative, topic = corpus_of(cisi_docs, "cisi", TopicEmbedder)
    noisy, noise = corpus_of(scifact_docs, "scifact", lambda papers: NoiseEmbedder())
    dense_wins = tuning.tune(informative, topic, limit=240)
    lexical_wins = tuning.tune(noisy, noise, limit=240)
    for record in (dense_wins, lexical_wins):
        assert record.queries >= tuning.MIN_QUERIES
        assert record.adopted, record.reason
        assert record.margin_low > 0 and record.score > record.default_score
        assert record.kinds == {"inverse_cloze": record.queries}
    default = dense_weight({})
    assert dense_weight(dense_wins.setting) > default > dense_weight(lexical_wins.setting)
    assert dense_wins.setting != lexical_wins.setting


def test_a_corpus_too_small_keeps_the_defaults_and_says_so(scifact_docs):
    small = dict(list(scifact_docs.items())[:40])
    corpus, embedder = corpus_of(small, "scifact", TopicEmbedder)
    record = tuning.tune(corpus, embedder)
    assert not record.adopted and record.setting == {}
    assert record.queries < tuning.MIN_QUERIES
    assert "too small" in record.reason and "defaults" in record.reason


def test_a_margin_within_noise_is_not_adopted():
    rng = np.random.default_rng(0)
    default = rng.random(300)
    # ten settings that differ from the default only by noise: whichever looks best on a half is not adopted
    per_setting = np.vstack([default] + [default + rng.normal(0, 0.05, 300) for _ in range(10)])
    assert not tuning.choose(per_setting, 0).adopted
    clearly_better = np.vstack([default, default + 0.05 + rng.normal(0, 0.02, 300)])
    choice = tuning.choose(clearly_better, 0)
    assert choice.adopted and choice.best == 1 and choice.margin_low > 0
    # better on one half only: the other half's check fails, nothing is adopted
    split = np.random.default_rng(0).permutation(300)[:150]
    lopsided = np.vstack([default, default.copy()])
    lopsided[1, split] += 0.2
    assert not tuning.choose(lopsided, 0).adopted


def test_retuning_follows_growth_not_every_increment():
    record = TuningRecord(passages=10_000)
    assert tuning.needs_tuning(None, 500)
    assert not tuning.needs_tuning(record, 10_400)
    assert tuning.needs_tuning(record, 12_500)
