"""Enrichment of a local PDF's record by the identifier it prints: OpenAlex by DOI, else arXiv by arXiv id. An API
field replaces a weaker source (GROBID, the PDF's own text or Info dictionary), never a library export's, and is
labelled `<api>_enriched` in `metadata_sources`; offline, or for an unknown work, the record stays as it was."""

from __future__ import annotations

import dataclasses
import logging

from lumina_assets.core.schemas import Paper

log = logging.getLogger(__name__)

# sources an API answer may overwrite (GROBID, what the PDF itself said, or nothing)
WEAKER_SOURCES = {"grobid", "pdf_text", "pdf_info", "pdf_info_date", "arxiv_stamp", "file_name", None}
ENRICHED_FIELDS = ("title", "authors", "year", "publication_date", "venue", "abstract", "doi", "arxiv_id")
FILLED_FIELDS = (
    "openalex_id",
    "keywords",
    "citation_count",
    "pdf_urls",
    "references",
    "language",
    "pages",
    "arxiv_primary_class",
)


def sources_of(paper: Paper) -> dict[str, str]:
    """`metadata_sources` as {field: source} (the first entry of a field wins: the strongest source comes first)."""
    out: dict[str, str] = {}
    for entry in paper.metadata_sources:
        name, _, source = entry.partition(":")
        out.setdefault(name, source)
    return out


def merge_enrichment(paper: Paper, found: Paper, label: str) -> Paper:
    """`paper` with the fields `found` has, where the paper's own source is weaker; ids and lists it lacks filled."""
    sources = sources_of(paper)
    merged = dataclasses.replace(paper)
    for name in ENRICHED_FIELDS:
        value = getattr(found, name)
        if value in (None, "", []) or sources.get(name) not in WEAKER_SOURCES:
            continue
        if name == "abstract" and paper.abstract and len(value) < len(paper.abstract) * 0.5:
            continue  # a truncated API abstract does not replace the PDF's whole one
        setattr(merged, name, value)
        sources[name] = label
    for name in FILLED_FIELDS:
        if getattr(merged, name) in (None, "", []) and getattr(found, name) not in (None, "", []):
            setattr(merged, name, getattr(found, name))
            sources[name] = label
    merged.metadata_sources = [f"{name}:{source}" for name, source in sources.items()]
    return merged


def enrich_paper(paper: Paper, *, openalex=None, arxiv=None) -> Paper:
    """The record enriched by OpenAlex (DOI, an OpenAlexClient) or arXiv (arXiv id, an ArxivClient) when a client
    is given and answers; unchanged otherwise."""
    from lumina_assets.corpus.openalex import work_to_paper

    try:
        if paper.doi and openalex is not None:
            work = openalex.work(paper.doi)
            if work:
                return merge_enrichment(paper, work_to_paper(work), "openalex_enriched")
        if paper.arxiv_id and arxiv is not None:
            found = [p for p in arxiv.by_ids([paper.arxiv_id]).papers if p.arxiv_id == paper.arxiv_id]
            if found:
                return merge_enrichment(paper, found[0], "arxiv_enriched")
    # offline, a 5xx after retries, a body that is not a work: the PDF's fields stand
    except Exception as error:
        log.warning("enrichment of %s skipped: %s", paper.paper_id, error)
    return paper
