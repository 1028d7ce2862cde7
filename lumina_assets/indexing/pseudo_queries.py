"""Pseudo-queries a corpus gives for free, for tuning search to that corpus without relevance judgments.

Each pseudo-query is a piece of text that looks like something a reader would search for, paired with the paper it
came from (or points to), and the text the tuning index must leave out so the query is not found by copying:

- inverse cloze: a sentence of a passage queries for its paper, and the passage is searched without that
  sentence (a sentence left in place is found word for word by BM25, which teaches a tuner to trust BM25 only);
- title: a title queries for its paper, searched without its title; only titles that mostly paraphrase their
  text are kept (a title whose words all recur in the abstract is again a copy, and favours BM25);
- citation: a sentence that cites a paper queries for the cited paper (citation markers removed).

Every generator is deterministic for a given `random.Random`, and none reads anything but the corpus.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from lumina_assets.core.schemas import ParsedPaper, Reference
from lumina_assets.parsing.chunking import split_sentences

INVERSE_CLOZE = "inverse_cloze"
TITLE = "title"
CITATION = "citation"

MIN_QUERY_WORDS = 6  # shorter sentences are headings, captions or fragments, not questions
MAX_QUERY_WORDS = 45  # longer ones are run-on extractions (tables, reference lists)
MIN_CONTEXT_SENTENCES = 3  # a passage keeps at least two sentences once one is taken out
MAX_TITLE_OVERLAP = 0.5  # a title query at most this share of whose content words recur in its text
_WORD = re.compile(r"[^\W_]+")
_LETTER = re.compile(r"[^\W\d_]")
# bracketed or parenthesized citation markers: [12], [3, 5-7], (Smith et al., 2019; Lee, 2020)
_MARKER = re.compile(r"\[[^\]]{0,40}\]|\([^()]{0,80}\b(?:19|20)\d\d[a-z]?\)")


@dataclass(frozen=True)
class PseudoQuery:
    """`text` searched for `paper_id`; `withheld` is left out of `passage_id`'s text (or, for a title query, out of
    every passage and the paper record of `paper_id`) while tuning."""

    text: str
    paper_id: str
    kind: str
    passage_id: str | None = None
    withheld: str = ""


@dataclass(frozen=True)
class PassageText:
    passage_id: str
    paper_id: str
    text: str


def _content_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if len(w) > 2]


def _looks_like_prose(sentence: str) -> bool:
    words = sentence.split()
    if not MIN_QUERY_WORDS <= len(words) <= MAX_QUERY_WORDS:
        return False
    letters = len(_LETTER.findall(sentence))
    return letters >= 0.6 * len(sentence.replace(" ", ""))  # not a row of numbers or symbols


def inverse_cloze(
    passages: Iterable[PassageText], rng: random.Random, limit: int, per_paper: int = 1
) -> list[PseudoQuery]:
    """At most `per_paper` sentences per paper (spread over its passages), each from a passage of at least three
    sentences, papers drawn at random. Tuning takes one a paper (queries spread over the corpus); training an encoder takes
    more, since a small corpus has few papers."""
    by_paper: dict[str, list[PassageText]] = {}
    for passage in passages:
        by_paper.setdefault(passage.paper_id, []).append(passage)
    papers = sorted(by_paper)
    rng.shuffle(papers)
    queries: list[PseudoQuery] = []
    for paper_id in papers:
        if len(queries) >= limit:
            break
        candidates = by_paper[paper_id][:]
        rng.shuffle(candidates)
        eligible = []  # (passage, its usable sentences), read only as far as needed
        for passage in candidates:
            sentences = split_sentences(passage.text)
            usable = [s for s in sentences if _looks_like_prose(s)]
            if len(sentences) >= MIN_CONTEXT_SENTENCES and usable:
                eligible.append((passage, usable))
                if len(eligible) >= per_paper:
                    break
        taken = 0
        while eligible and taken < per_paper and len(queries) < limit:
            for passage, usable in list(eligible):  # one sentence a passage a round
                sentence = rng.choice(usable)
                usable.remove(sentence)
                queries.append(PseudoQuery(sentence, paper_id, INVERSE_CLOZE, passage.passage_id, sentence))
                taken += 1
                if not usable:
                    eligible.remove((passage, usable))
                if taken >= per_paper or len(queries) >= limit:
                    break
    return queries


def title_queries(
    papers: Iterable[tuple[str, str, str]], rng: random.Random, limit: int
) -> list[PseudoQuery]:
    """(paper id, title, text) -> title queries for the papers whose title mostly paraphrases the text."""
    kept = []
    for paper_id, title, text in papers:
        title = (title or "").strip()
        words = set(_content_words(title))
        if len(words) < 3 or not text:
            continue
        body = set(_content_words(text))
        if words and len(words & body) / len(words) <= MAX_TITLE_OVERLAP:
            kept.append(PseudoQuery(title, paper_id, TITLE, None, title))
    rng.shuffle(kept)
    return kept[:limit]


def strip_citation_markers(sentence: str, markers: Sequence[str] = ()) -> str:
    """The sentence without its citation markers (the parser's own markers first, then bracketed forms)."""
    for marker in markers:
        if marker:
            sentence = sentence.replace(marker, " ")
    sentence = _MARKER.sub(" ", sentence)
    return re.sub(r"\s+([,.;:])", r"\1", re.sub(r"\s{2,}", " ", sentence)).strip()


def citation_queries(
    parsed: Iterable[ParsedPaper],
    resolve: Callable[[Reference], str | None],
    rng: random.Random,
    limit: int,
) -> list[PseudoQuery]:
    """Citing sentences -> the corpus paper they cite. `resolve` maps a bibliography entry to a corpus paper id (by
    DOI or title), or None when the cited work is not in the corpus. A sentence citing several corpus papers is
    used once, for the first of them."""
    queries: list[PseudoQuery] = []
    for paper in parsed:
        references = {ref.ref_id: ref for ref in paper.references}
        sections = {section.number: section.text for section in paper.sections}
        used: set[str] = set()
        for link in paper.citations:
            reference = references.get(link.ref_id or "")
            cited = resolve(reference) if reference is not None else None
            if not cited or cited == paper.paper_id:
                continue
            for sentence in split_sentences(sections.get(link.section_number, "")):
                if link.marker and link.marker in sentence and sentence not in used:
                    markers = [c.marker for c in paper.citations if c.section_number == link.section_number]
                    text = strip_citation_markers(sentence, markers)
                    if _looks_like_prose(text):
                        used.add(sentence)
                        queries.append(PseudoQuery(text, cited, CITATION))
                    break
    rng.shuffle(queries)
    return queries[:limit]


def reference_resolver(
    papers: Iterable[tuple[str, str | None, str | None]],
) -> Callable[[Reference], str | None]:
    """(paper id, doi, title) of the corpus -> a resolver for `citation_queries`: by DOI, else by the title's words."""
    by_doi: dict[str, str] = {}
    by_title: dict[str, str] = {}
    for paper_id, doi, title in papers:
        if doi:
            by_doi[doi.lower()] = paper_id
        key = " ".join(_content_words(title or ""))
        if len(key) >= 12:
            by_title.setdefault(key, paper_id)

    def resolve(reference: Reference) -> str | None:
        if reference.doi and reference.doi.lower() in by_doi:
            return by_doi[reference.doi.lower()]
        return by_title.get(" ".join(_content_words(reference.title or "")))

    return resolve


def generate(
    passages: Sequence[PassageText],
    titles: Sequence[tuple[str, str, str]] = (),
    citations: Sequence[PseudoQuery] = (),
    *,
    limit: int = 300,
    seed: int = 0,
) -> list[PseudoQuery]:
    """The tuning set: citing sentences first (the most query-like), then inverse cloze sentences, and title
    queries for at most a fifth of the set."""
    rng = random.Random(seed)
    chosen = list(citations[: limit // 2])
    title_share = title_queries(titles, rng, limit // 5) if titles else []
    chosen += inverse_cloze(passages, rng, limit - len(chosen) - len(title_share))
    chosen += title_share
    return chosen[:limit]


def citation_queries_from_parsed(
    parsed_json: Iterable[str | None],
    papers: Iterable[tuple[str, str | None, str | None]],
    limit: int,
    seed: int = 0,
) -> list[PseudoQuery]:
    """`citation_queries` over stored parsed papers (`ParsedPaper.to_json` texts) and the corpus's (id, doi,
    title) rows."""
    documents = (ParsedPaper.from_json(text) for text in parsed_json if text)
    return citation_queries(documents, reference_resolver(papers), random.Random(seed), limit)
