"""Which paper of the collection a provider's result is: by catalogue id, DOI, arXiv id, Semantic Scholar corpus
id (SciFact), exact then fuzzy normalized title (`TITLE_THRESHOLD`; short or shared titles match exactly or not at
all). docs/benchmark.md, "Matching results to the collection", says why."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from rapidfuzz import fuzz, process

from evals.providers import doi_from_text
from lumina_assets.core.ids import normalize_arxiv_id, normalize_doi
from lumina_assets.core.schemas import Context
from lumina_assets.corpus.citations import normalize_title

TITLE_THRESHOLD = 95.0
MIN_FUZZY_CHARS = 20
S2_CORPUS_ID_COLLECTIONS = frozenset({"scifact"})
METHODS = ("catalogue id", "DOI", "arXiv id", "S2 corpus id", "title", "fuzzy title")

_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^\s?#]+?)(?:\.pdf)?(?:[?#]|$)", re.IGNORECASE)
_S2_CORPUS = re.compile(
    r"(?:s2-corpus:|CorpusId:|semanticscholar\.org/p/|semanticscholar\.org/CorpusID:)(\d+)", re.IGNORECASE
)
_ELLIPSIS = re.compile(r"(?:\.\.\.|…)\s*$")


@dataclass(frozen=True)
class Match:
    """The collection paper a result is (None: outside the collection) and how it was found."""

    paper_id: str | None
    method: str | None = None
    score: float = 100.0


def context_doi(context: Context) -> str | None:
    for text in (context.doi, context.url, context.paper_id):
        if not text:
            continue
        found = normalize_doi(text) or normalize_doi(doi_from_text(text))
        if found:
            return found
    return None


def context_arxiv_id(context: Context) -> str | None:
    doi = context_doi(context)
    if doi and doi.startswith("10.48550/arxiv."):
        return normalize_arxiv_id(doi.split("arxiv.", 1)[1])
    if context.paper_id and context.paper_id.lower().startswith("arxiv:"):
        return normalize_arxiv_id(context.paper_id)
    match = _ARXIV_URL.search(context.url or "")
    return normalize_arxiv_id(match.group(1)) if match else None


def context_s2_corpus_id(context: Context) -> str | None:
    for text in (context.paper_id, context.url):
        match = _S2_CORPUS.search(text or "")
        if match:
            return match.group(1)
    return None


def collection_of(paper_id: str) -> str | None:
    """`scifact` for `beir-scifact:123`: the BEIR collection a catalogue paper was loaded from."""
    if paper_id.startswith("beir-") and ":" in paper_id:
        return paper_id[len("beir-") :].split(":", 1)[0]
    return None


@dataclass
class PaperMatcher:
    """The collection's papers by every identifier a provider can give; `match(context)` finds one."""

    catalogue: set[str] = field(default_factory=set)
    by_doi: dict[str, str] = field(default_factory=dict)
    by_arxiv: dict[str, str] = field(default_factory=dict)
    by_s2_corpus: dict[str, str] = field(default_factory=dict)
    by_title: dict[str, str] = field(default_factory=dict)
    titles: list[str] = field(default_factory=list)
    title_ids: list[str] = field(default_factory=list)
    ambiguous_titles: set[str] = field(default_factory=set)

    @classmethod
    def from_papers(cls, papers: pl.DataFrame | None) -> PaperMatcher:
        """From the papers table (paper_id, title, doi, arxiv_id, source, source_id: whichever it has)."""
        matcher = cls()
        if papers is not None:
            matcher.add(papers.to_dicts())
        return matcher

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        counts: Counter[str] = Counter()
        titled: list[tuple[str, str]] = []
        for row in rows:
            paper_id = row["paper_id"]
            self.catalogue.add(paper_id)
            if doi := normalize_doi(row.get("doi")):
                self.by_doi.setdefault(doi, paper_id)
            if paper_id.startswith("doi:"):
                self.by_doi.setdefault(paper_id[4:], paper_id)
            arxiv = normalize_arxiv_id(row.get("arxiv_id")) or (
                normalize_arxiv_id(paper_id) if paper_id.startswith("arxiv:") else None
            )
            if arxiv:
                self.by_arxiv.setdefault(arxiv, paper_id)
            if collection_of(paper_id) in S2_CORPUS_ID_COLLECTIONS and row.get("source_id"):
                self.by_s2_corpus.setdefault(str(row["source_id"]), paper_id)
            title = normalize_title(row.get("title"))
            if title:
                counts[title] += 1
                titled.append((title, paper_id))
        for title, paper_id in titled:
            if counts[title] > 1:
                self.ambiguous_titles.add(title)
                self.by_title.pop(title, None)
            elif title not in self.ambiguous_titles:
                self.by_title[title] = paper_id
        self.titles = list(self.by_title)
        self.title_ids = [self.by_title[t] for t in self.titles]

    def match(self, context: Context) -> Match:
        if context.paper_id and context.paper_id in self.catalogue:
            return Match(context.paper_id, "catalogue id")
        doi = context_doi(context)
        if doi and doi in self.by_doi:
            return Match(self.by_doi[doi], "DOI")
        arxiv = context_arxiv_id(context)
        if arxiv and arxiv in self.by_arxiv:
            return Match(self.by_arxiv[arxiv], "arXiv id")
        corpus_id = context_s2_corpus_id(context)
        if corpus_id and corpus_id in self.by_s2_corpus:
            return Match(self.by_s2_corpus[corpus_id], "S2 corpus id")
        return self._match_title(context.title or "")

    def paper_of(self, context: Context) -> str:
        """The collection paper a context is; its own id (or an `unmatched:` key) when it is none of them."""
        return self.match(context).paper_id or context.paper_id or f"unmatched:{context_key(context)}"

    def _match_title(self, raw: str) -> Match:
        truncated = bool(_ELLIPSIS.search(raw))
        title = normalize_title(_ELLIPSIS.sub("", raw))
        if not title or title in self.ambiguous_titles:
            return Match(None)
        if not truncated and title in self.by_title:
            return Match(self.by_title[title], "title")
        if len(title) < MIN_FUZZY_CHARS or not self.titles:
            return Match(None)
        # a title cut short with an ellipsis (Google Scholar does) is compared with the same length of each title
        choices = [t[: len(title)] for t in self.titles] if truncated else self.titles
        found = process.extractOne(title, choices, scorer=fuzz.ratio, score_cutoff=TITLE_THRESHOLD)
        if found is None:
            return Match(None)
        return Match(self.title_ids[found[2]], "fuzzy title", float(found[1]))


def context_key(context: Context) -> str:
    """A result's identity for counting: its provider's id, else DOI, URL or title."""
    return context.paper_id or context.doi or context.url or normalize_title(context.title) or ""


MATCH_COUNT_SCHEMA = {
    "provider": pl.String,
    "results": pl.Int64,
    "matched": pl.Int64,
    "unmatched": pl.Int64,
    **{f"by {method}": pl.Int64 for method in METHODS},
}


def match_counts(recursive: pl.DataFrame, matcher: PaperMatcher) -> pl.DataFrame:
    """Per provider: distinct (question, result) pairs, how many matched a collection paper, by which identifier."""
    from evals.providers import contexts_from_rows

    seen: dict[str, dict[tuple[str, str], Match]] = {}
    for row in recursive.iter_rows(named=True):
        if row.get("error"):
            continue
        found = seen.setdefault(row["provider"], {})
        for context in contexts_from_rows(row["contexts"] or []):
            key = (row["question_id"], context_key(context))
            if key not in found:
                found[key] = matcher.match(context)
    rows = []
    for provider, matches in sorted(seen.items()):
        methods = Counter(m.method for m in matches.values() if m.paper_id)
        matched = sum(methods.values())
        rows.append(
            {
                "provider": provider,
                "results": len(matches),
                "matched": matched,
                "unmatched": len(matches) - matched,
                **{f"by {method}": methods.get(method, 0) for method in METHODS},
            }
        )
    return pl.DataFrame(rows, schema=MATCH_COUNT_SCHEMA)


def qrels_exclusions(counts: pl.DataFrame) -> dict[str, str]:
    """Provider -> why it is left out of the qrels measures: none of its results matched a paper of the collection.
    A provider that returned nothing is scored: it found nothing."""
    reasons = {}
    for row in counts.iter_rows(named=True):
        if row["results"] and not row["matched"]:
            reasons[row["provider"]] = (
                f"none of its {row['results']} results matched a paper of the collection by catalogue id, DOI, "
                f"arXiv id, S2 corpus id or title (fuzzy >= {TITLE_THRESHOLD:.0f}): qrels cannot score it"
            )
    return reasons
