"""Pseudo-queries from a small real collection: inverse cloze sentences and paraphrasing titles from SciFact
abstracts, citing sentences from GROBID TEI of real papers."""

from __future__ import annotations

import random

import pytest

from lumina_assets.corpus.collections import load_beir
from lumina_assets.indexing import pseudo_queries as pq
from lumina_assets.parsing.chunking import passages_for_paper, split_sentences
from lumina_assets.parsing.tei import parse_tei


@pytest.fixture(scope="module")
def scifact_slice(shared_data):
    collection = load_beir(shared_data / "scifact", "train")
    docs = list(collection.corpus.items())[:120]
    passages, papers = [], []
    for doc_id, doc in docs:
        paper_id = f"beir-scifact:{doc_id}"
        papers.append((paper_id, doc["title"], doc["text"]))
        for passage in passages_for_paper(paper_id, title=doc["title"], abstract=doc["text"]):
            passages.append(pq.PassageText(passage.passage_id, paper_id, passage.text))
    return passages, papers


def test_inverse_cloze_takes_one_prose_sentence_per_paper_and_withholds_it(scifact_slice):
    passages, _ = scifact_slice
    by_id = {p.passage_id: p for p in passages}
    queries = pq.inverse_cloze(passages, random.Random(0), 50)
    assert len(queries) == 50
    assert len({q.paper_id for q in queries}) == 50  # one per paper
    for query in queries:
        source = by_id[query.passage_id]
        assert query.kind == pq.INVERSE_CLOZE and query.paper_id == source.paper_id
        sentences = split_sentences(source.text)
        assert query.text in sentences and query.withheld == query.text
        assert len(sentences) >= pq.MIN_CONTEXT_SENTENCES  # the passage keeps context once it is taken out
        assert pq.MIN_QUERY_WORDS <= len(query.text.split()) <= pq.MAX_QUERY_WORDS
    # deterministic for a seed, another sample for another seed
    assert pq.inverse_cloze(passages, random.Random(0), 50) == queries
    other = pq.inverse_cloze(passages, random.Random(1), 50)
    assert {q.text for q in other} != {q.text for q in queries}


def test_title_queries_keep_only_titles_that_paraphrase_their_text(scifact_slice):
    _, papers = scifact_slice
    queries = pq.title_queries(papers, random.Random(0), 1000)
    kept = {q.paper_id for q in queries}
    assert 0 < len(kept) < len(papers)  # some SciFact titles copy their abstract's words, some do not
    texts = {paper_id: (title, text) for paper_id, title, text in papers}
    for query in queries:
        title, text = texts[query.paper_id]
        assert query.text == title and query.withheld == title and query.kind == pq.TITLE
    # a title whose words all recur in its abstract is refused
    copied = [(pid, t, x) for pid, t, x in papers if pid not in kept and len(t.split()) >= 3]
    assert copied
    paper_id, title, text = copied[0]
    assert pq.title_queries([(paper_id, title, f"{title}. {text}")], random.Random(0), 5) == []


def test_citing_sentences_query_for_the_cited_corpus_paper(shared_data):
    tei = shared_data / "grobid_tei" / "2020.acl-main.207.tei.xml"
    paper = parse_tei(tei.read_bytes(), "acl-2020-207")
    # the corpus: the works this paper cites, as a library holding them would list them (id, DOI, title)
    cited = [ref for ref in paper.references if ref.title]
    corpus = [(f"work-{ref.ref_id}", ref.doi, ref.title) for ref in cited]
    resolve = pq.reference_resolver(corpus)
    queries = pq.citation_queries([paper], resolve, random.Random(0), 100)
    assert len(queries) >= 10
    ids = {paper_id for paper_id, _, _ in corpus}
    markers = [c.marker for c in paper.citations if c.marker]
    for query in queries:
        assert query.kind == pq.CITATION and query.paper_id in ids
        assert not any(marker in query.text for marker in markers if len(marker) > 4)
        assert pq.MIN_QUERY_WORDS <= len(query.text.split())
    # the pair is right: the query sentence (markers restored) sits in a section citing that reference
    ref_of = {f"work-{ref.ref_id}": ref.ref_id for ref in cited}
    sections = {s.number: s.text for s in paper.sections}
    first = queries[0]
    citing = [c for c in paper.citations if c.ref_id == ref_of[first.paper_id]]
    assert any(first.text.split()[0] in sections[c.section_number] for c in citing)
    # a paper the corpus does not hold gives no query
    assert pq.citation_queries([paper], lambda ref: None, random.Random(0), 100) == []


def test_strip_citation_markers():
    sentence = "Dense retrievers beat BM25 (Karpukhin et al., 2020) on open QA [12, 14]."
    assert pq.strip_citation_markers(sentence) == "Dense retrievers beat BM25 on open QA."


def test_generate_mixes_citations_first_and_limits_titles(scifact_slice):
    passages, papers = scifact_slice
    citing = [
        pq.PseudoQuery(f"a citing sentence number {i} about something", papers[i][0], pq.CITATION)
        for i in range(10)
    ]
    queries = pq.generate(passages, papers, citing, limit=60, seed=0)
    assert len(queries) == 60
    assert queries[:10] == citing
    assert sum(q.kind == pq.TITLE for q in queries) <= 60 // 5
    assert sum(q.kind == pq.INVERSE_CLOZE for q in queries) >= 30
