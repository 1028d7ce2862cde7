"""Turn raw records from every source into one clean paper per work: deduplicate (DOI, then arXiv id, then
fuzzy title + first author), merge what each source knows, and filter (language, no abstract and no full text).
Every dropped record is kept with its reason."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from lumina_assets.core.hygiene import cap_metadata
from lumina_assets.core.ids import paper_id_for
from lumina_assets.core.schemas import Paper

# whose metadata wins a merge: the user's own library first (corpus.library), then the PDF's record
SOURCE_PRIORITY = {"zotero": -1, "local_pdf": 0, "openalex": 1, "arxiv": 2, "beir": 3}
FUZZY_TITLE_THRESHOLD = 93.0


@dataclass
class Rejection:
    paper_id: str
    title: str
    source: str
    reason: str
    duplicate_of: str | None = None


@dataclass
class NormalizeResult:
    papers: list[Paper] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def normalize_title(title: str | None) -> str:
    text = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", " ", text).strip()


def first_author_key(paper: Paper) -> str | None:
    if not paper.authors:
        return None
    name = normalize_title(paper.authors[0]).split()
    return name[-1] if name else None


def _clean(paper: Paper) -> Paper:
    paper.title = re.sub(r"\s+", " ", paper.title or "").strip()
    if paper.abstract is not None:
        paper.abstract = re.sub(r"\s+", " ", paper.abstract).strip() or None
    paper.authors = [re.sub(r"\s+", " ", a).strip() for a in paper.authors if a and a.strip()]
    cap_metadata(paper)  # whatever the source: a title lands in every passage row of its paper
    return paper


def merge(primary: Paper, other: Paper) -> Paper:
    """Fill the primary record's gaps from another record of the same work; lists are unioned."""
    merged = dataclasses.replace(primary)
    for f in dataclasses.fields(Paper):
        mine, theirs = getattr(merged, f.name), getattr(other, f.name)
        if isinstance(mine, list):
            setattr(merged, f.name, mine + [x for x in theirs if x not in mine])
        elif mine in (None, "") and theirs not in (None, ""):
            setattr(merged, f.name, theirs)
    if other.abstract and (not primary.abstract or len(other.abstract) > 1.5 * len(primary.abstract)):
        merged.abstract = other.abstract  # a PDF's first page often yields a truncated abstract
    merged.crawl_depth = min(primary.crawl_depth, other.crawl_depth)
    return merged


def same_title(a: str, b: str) -> bool:
    """Near-identical normalized titles, or one long title contained in the other ("ChemCrow: <title>")."""
    if fuzz.ratio(a, b) >= FUZZY_TITLE_THRESHOLD:
        return True
    shorter = min(len(a.split()), len(b.split()))
    return shorter >= 5 and fuzz.token_set_ratio(a, b) >= 97


def _group_duplicates(papers: list[Paper]) -> tuple[list[list[int]], dict[int, str]]:
    """The records of each work (indices, in order; works by their first record), and why each link was made."""
    from scipy.cluster.hierarchy import DisjointSet

    groups = DisjointSet(range(len(papers)))
    why: dict[int, str] = {}
    for attribute, reason in (
        ("doi", "duplicate_doi"),
        ("arxiv_id", "duplicate_arxiv_id"),
        ("openalex_id", "duplicate_openalex_id"),
        ("paper_id", "duplicate_id"),
    ):
        first_index: dict[str, int] = {}
        for i, paper in enumerate(papers):
            value = getattr(paper, attribute)
            if not value:
                continue
            if value in first_index:
                if not groups.connected(i, first_index[value]):
                    why.setdefault(i, reason)
                groups.merge(first_index[value], i)
            else:
                first_index[value] = i
    by_author: dict[str, list[int]] = defaultdict(list)
    for i, paper in enumerate(papers):
        key = first_author_key(paper)
        if key:
            by_author[key].append(i)
    for members in by_author.values():
        titles = [normalize_title(papers[i].title) for i in members]
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                if groups.connected(members[a], members[b]) or not titles[a] or not titles[b]:
                    continue
                if same_title(titles[a], titles[b]):
                    why.setdefault(members[b], "duplicate_title_author")
                    groups.merge(members[a], members[b])
    works: dict[int, list[int]] = defaultdict(list)
    for i in range(len(papers)):
        works[groups[i]].append(i)
    return list(works.values()), why


def deduplicate(papers: list[Paper]) -> NormalizeResult:
    result = NormalizeResult()
    papers = [_clean(dataclasses.replace(p)) for p in papers]
    works, why = _group_duplicates(papers)
    for indices in works:
        ranked = sorted(indices, key=lambda i: (SOURCE_PRIORITY.get(papers[i].source, 9), i))
        kept = papers[ranked[0]]
        sources = {kept.source}
        for i in ranked[1:]:
            kept = merge(kept, papers[i])
            sources.add(papers[i].source)
        if kept.doi or kept.arxiv_id or kept.openalex_id:
            # the strongest id any member had wins: a DOI found through OpenAlex upgrades an arXiv-only record
            kept.paper_id = paper_id_for(doi=kept.doi, arxiv_id=kept.arxiv_id, openalex_id=kept.openalex_id)
        kept.source = ",".join(sorted(sources, key=lambda s: SOURCE_PRIORITY.get(s, 9)))
        result.papers.append(kept)
        for i in ranked[1:]:
            result.rejected.append(
                Rejection(
                    papers[i].paper_id,
                    papers[i].title,
                    papers[i].source,
                    why.get(i, "duplicate"),
                    kept.paper_id,
                )
            )
    order = {p.paper_id: n for n, p in enumerate(papers)}
    result.papers.sort(key=lambda p: order.get(p.paper_id, len(order)))
    return result


def detect_language(text: str) -> str | None:
    """ISO 639-1 code from title + abstract (py3langid); None when the text is too short to tell."""
    if len(text.strip()) < 40:
        return None
    import py3langid

    language, _ = py3langid.classify(text)
    return language


def filter_papers(
    papers: list[Paper], *, languages: list[str] | None = ("en",), require_abstract: bool = True
) -> NormalizeResult:
    """Drop works in other languages, and works with neither an abstract nor any full text to parse."""
    result = NormalizeResult()
    allowed = set(languages or [])
    for paper in papers:
        reason = None
        if not paper.title and not paper.abstract:
            reason = "no_title_or_abstract"
        elif require_abstract and not paper.abstract and not (paper.local_path or paper.pdf_urls):
            reason = "missing_abstract"  # nor any full text to parse
        else:
            if paper.language is None:
                paper.language = detect_language(f"{paper.title}. {paper.abstract or ''}")
            if allowed and paper.language and paper.language not in allowed:
                reason = f"language_{paper.language}"
        if reason:
            result.rejected.append(Rejection(paper.paper_id, paper.title, paper.source, reason))
        else:
            result.papers.append(paper)
    return result


def normalize(
    papers: list[Paper], *, languages: list[str] | None = ("en",), require_abstract: bool = True
) -> NormalizeResult:
    deduped = deduplicate(papers)
    filtered = filter_papers(deduped.papers, languages=languages, require_abstract=require_abstract)
    return NormalizeResult(filtered.papers, deduped.rejected + filtered.rejected)
