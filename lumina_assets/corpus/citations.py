"""In-corpus citations from parsed bibliographies: each reference of a paper matched to a catalogue paper by DOI,
then arXiv id, then normalized title (fuzzy), and every match an edge `citing -> cited`. The thresholds and how
they were chosen: docs/pdf-papers.md ("References and citations")."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from lumina_assets.core.ids import normalize_arxiv_id, normalize_doi
from lumina_assets.core.schemas import Reference

TITLE_THRESHOLD = 90.0
RAW_TEXT_THRESHOLD = 95.0
MIN_RAW_TITLE_WORDS = 4
MAX_YEAR_GAP = 1  # a preprint cited a year before (or after) its published version


def normalize_title(title: str | None) -> str:
    text = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode().lower()
    text = re.sub(r"(\w)-\s+(\w)", r"\1\2", text)  # "litera- ture" left by a line break
    return re.sub(r"[^a-z0-9]+", " ", text).strip()


def surname(name: str) -> str:
    parts = normalize_title(name).split()
    return parts[-1] if parts else ""


@dataclass(frozen=True)
class CataloguePaper:
    """What matching needs of one catalogue paper."""

    paper_id: str
    title: str
    doi: str | None = None
    arxiv_id: str | None = None
    year: int | None = None
    authors: tuple[str, ...] = ()


@dataclass(frozen=True)
class CitationMatch:
    citing: str
    cited: str
    ref_id: str
    how: str  # doi | arxiv | title | title_in_text
    score: float


class CatalogueIndex:
    """The catalogue's DOIs, arXiv ids and normalized titles, built once per matching run."""

    def __init__(self, papers: Iterable[CataloguePaper]):
        self.papers = list(papers)
        self.by_doi = {normalize_doi(p.doi): p for p in self.papers if normalize_doi(p.doi)}
        self.by_arxiv = {
            normalize_arxiv_id(p.arxiv_id): p for p in self.papers if normalize_arxiv_id(p.arxiv_id)
        }
        self.titles = [normalize_title(p.title) for p in self.papers]
        # raw-entry matching needs the first author's surname to agree, so it only looks at those papers
        self.by_first_author: dict[str, list[int]] = {}
        for position, paper in enumerate(self.papers):
            if paper.authors:
                self.by_first_author.setdefault(surname(paper.authors[0]), []).append(position)

    def _year_fits(self, paper: CataloguePaper, year: int | None) -> bool:
        return year is None or paper.year is None or abs(paper.year - year) <= MAX_YEAR_GAP

    def match(self, reference: Reference) -> tuple[CataloguePaper, str, float] | None:
        """(paper, how, score) for the catalogue paper this reference cites, or None."""
        doi = normalize_doi(reference.doi)
        if doi and doi in self.by_doi:
            return self.by_doi[doi], "doi", 100.0
        arxiv = normalize_arxiv_id(reference.arxiv_id)
        if arxiv and arxiv in self.by_arxiv:
            return self.by_arxiv[arxiv], "arxiv", 100.0
        if not self.titles:
            return None
        title = normalize_title(reference.title)
        if len(title) >= 8:
            found = process.extractOne(title, self.titles, scorer=fuzz.ratio, score_cutoff=TITLE_THRESHOLD)
            if found is not None:
                paper = self.papers[found[2]]
                if self._year_fits(paper, reference.year):
                    return paper, "title", float(found[1])
        return self._match_in_text(reference)

    def _match_in_text(self, reference: Reference) -> tuple[CataloguePaper, str, float] | None:
        """A catalogue title printed inside the raw entry (its title field was not parsed cleanly)."""
        text = normalize_title(reference.text)
        if not text:
            return None
        first = surname(reference.authors[0]) if reference.authors else ""
        if not first:
            return None
        for position in self.by_first_author.get(first, []):  # catalogue order, as before
            paper, title = self.papers[position], self.titles[position]
            if len(title.split()) < MIN_RAW_TITLE_WORDS:
                continue
            score = fuzz.partial_ratio(title, text)
            if score >= RAW_TEXT_THRESHOLD and self._year_fits(paper, reference.year):
                return paper, "title_in_text", float(score)
        return None


def match_references(citing: str, references: list[Reference], index: CatalogueIndex) -> list[CitationMatch]:
    """Edges from one paper's bibliography (one per cited paper, self-citations of the same record dropped)."""
    matches: dict[str, CitationMatch] = {}
    for reference in references:
        found = index.match(reference)
        if found is None:
            continue
        paper, how, score = found
        if paper.paper_id != citing and paper.paper_id not in matches:
            matches[paper.paper_id] = CitationMatch(citing, paper.paper_id, reference.ref_id, how, score)
    return list(matches.values())


def catalogue_papers(rows: Iterable[dict]) -> list[CataloguePaper]:
    """CataloguePaper records from `papers` table rows."""
    return [
        CataloguePaper(
            paper_id=row["paper_id"],
            title=row.get("title") or "",
            doi=row.get("doi"),
            arxiv_id=row.get("arxiv_id"),
            year=row.get("year"),
            authors=tuple(row.get("authors") or ()),
        )
        for row in rows
    ]


def references_from_json(parsed_json: str) -> list[Reference]:
    """A parsed paper's bibliography without building the rest of the document."""
    raw = json.loads(parsed_json or "{}").get("references") or []
    names = {f.name for f in dataclasses.fields(Reference)}
    return [Reference(**{k: v for k, v in item.items() if k in names}) for item in raw]


def bibliography_hash(references: list[Reference]) -> str:
    text = json.dumps([dataclasses.asdict(r) for r in references], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass
class EdgeUpdate:
    edges: list[CitationMatch]
    state: dict  # {"catalogue": [paper ids matched against], "bibliographies": {citing: hash}}
    rematched: int  # bibliographies matched against the whole catalogue (new or changed)
    extended: int  # unchanged bibliographies matched against the new catalogue papers only


def update_reference_edges(
    catalogue: list[CataloguePaper],
    bibliographies: dict[str, list[Reference]],
    previous: list[CitationMatch] | None = None,
    state: dict | None = None,
) -> EdgeUpdate:
    """Edges from parsed bibliographies, incrementally: a new or changed bibliography is matched against the whole
    catalogue; an unchanged one keeps its edges and is matched against the papers added since (so a paper that
    arrives later gets the edges of the papers that cite it); edges to papers no longer in the catalogue are gone."""
    state = state or {}
    known_ids = set(state.get("catalogue") or [])
    known_hashes = state.get("bibliographies") or {}
    present = {p.paper_id for p in catalogue}
    full = CatalogueIndex(catalogue)
    added = CatalogueIndex([p for p in catalogue if p.paper_id not in known_ids])
    kept: dict[str, list[CitationMatch]] = {}
    for edge in previous or []:
        if edge.cited in present and edge.citing in present:
            kept.setdefault(edge.citing, []).append(edge)
    edges: list[CitationMatch] = []
    hashes: dict[str, str] = {}
    rematched = extended = 0
    for citing, references in bibliographies.items():
        if citing not in present:
            continue
        digest = bibliography_hash(references)
        hashes[citing] = digest
        if known_hashes.get(citing) == digest:
            old = kept.get(citing, [])
            already = {e.cited for e in old}
            new = [m for m in match_references(citing, references, added) if m.cited not in already]
            edges += old + new
            extended += 1
        else:
            edges += match_references(citing, references, full)
            rematched += 1
    return EdgeUpdate(edges, {"catalogue": sorted(present), "bibliographies": hashes}, rematched, extended)
