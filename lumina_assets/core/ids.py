"""Deterministic identifiers: the same paper or passage always gets the same id, so re-runs upsert."""

from __future__ import annotations

import hashlib
import re

_DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:")
_ARXIV_NEW = re.compile(r"(\d{4}\.\d{4,5})(v\d+)?$")
_ARXIV_OLD = re.compile(r"([a-z\-]+(?:\.[A-Z]{2})?/\d{7})(v\d+)?$", re.IGNORECASE)
_OPENALEX = re.compile(r"(W\d+)$", re.IGNORECASE)
_ARXIV_CLASS = re.compile(r"^[a-z][a-z\-]*(?:\.[A-Za-z][A-Za-z\-]*)?$")
# "84", "84-91", "84--91", "84–91" (en dash), "pp. 84 - 91", "e1002", "S12-S20"; a range's separator is any dash
_PAGE = r"([A-Za-z]{0,2}\d{1,7})"
_PAGES = re.compile(
    r"^(?:pp?\.?|pages?)?\s*" + _PAGE + r"(?:\s*(?:-{1,3}|[\u2010-\u2015\u2212])\s*" + _PAGE + r")?\.?$",
    re.IGNORECASE,
)


def normalize_doi(value: str | None) -> str | None:
    """Lower-case bare DOI (`10.x/y`) from a URL or prefixed form; None when it is not a DOI."""
    if not value:
        return None
    text = value.strip()
    lowered = text.lower()
    for prefix in _DOI_PREFIXES:
        if lowered.startswith(prefix):
            text = text[len(prefix) :]
            break
    text = text.strip().lower()
    return text if text.startswith("10.") and "/" in text else None


def normalize_arxiv_id(value: str | None) -> str | None:
    """Bare arXiv id without version (`2304.02623`, `hep-th/9901001`) from an id, abs/pdf URL or `arXiv:` form."""
    if not value:
        return None
    text = value.strip()
    text = re.sub(r"^(arxiv:)", "", text, flags=re.IGNORECASE)
    text = re.sub(r"^https?://(export\.)?arxiv\.org/(abs|pdf)/", "", text)
    text = re.sub(r"\.pdf$", "", text)
    for pattern in (_ARXIV_NEW, _ARXIV_OLD):
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


def normalize_arxiv_class(value: str | None) -> str | None:
    """An arXiv category as arXiv writes it ("cs.IR", "hep-th", "cond-mat.mes-hall"); None for anything else."""
    text = (value or "").strip()
    return text if len(text) <= 32 and _ARXIV_CLASS.match(text) else None


def normalize_openalex_id(value: str | None) -> str | None:
    """`W123` from `https://openalex.org/W123` or `W123`."""
    if not value:
        return None
    match = _OPENALEX.search(value.strip())
    return match.group(1).upper() if match else None


def normalize_pages(first: object, last: object = None) -> str | None:
    """A paper's pages in its venue as BibTeX writes them: "84--91" for a range, "84" for one page or an article
    number. Takes a printed range ("84–91", "pp. 84-91") or a first and a last page (OpenAlex `biblio`); a last
    page written short ("1234-56") is expanded. None for what is not a page range (a list of ranges, a backwards
    range, free text)."""
    text = str(first).strip() if first not in (None, "") else ""
    if last not in (None, ""):
        text = f"{text}-{str(last).strip()}" if text else ""
    match = _PAGES.match(text)
    if not match:
        return None
    start, end = match.group(1), match.group(2)
    if end and start.isdigit() and end.isdigit() and len(end) < len(start):
        end = start[: len(start) - len(end)] + end  # "1234-56" is 1234--1256
    if not end or end == start:
        return start
    if start.isdigit() and end.isdigit() and int(end) < int(start):
        return None
    return f"{start}--{end}"


def short_hash(*parts: str, length: int = 16) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:length]


def paper_id_for(
    *,
    doi: str | None = None,
    arxiv_id: str | None = None,
    openalex_id: str | None = None,
    corpus: str | None = None,
    corpus_doc_id: str | None = None,
    file_sha256: str | None = None,
) -> str:
    """Paper id from the strongest identifier available: DOI, arXiv id, OpenAlex id, corpus doc id, file hash."""
    if (norm := normalize_doi(doi)) is not None:
        if norm.startswith("10.48550/arxiv."):  # arXiv's DataCite DOI: the same paper as its arXiv id
            return f"arxiv:{normalize_arxiv_id(norm.split('arxiv.', 1)[1])}"
        return f"doi:{norm}"
    if (norm := normalize_arxiv_id(arxiv_id)) is not None:
        return f"arxiv:{norm}"
    if (norm := normalize_openalex_id(openalex_id)) is not None:
        return f"openalex:{norm}"
    if corpus and corpus_doc_id:
        return f"{corpus}:{corpus_doc_id}"
    if file_sha256:
        return f"pdf:{file_sha256[:16]}"
    raise ValueError("a paper needs a DOI, arXiv id, OpenAlex id, corpus doc id or file hash for its id")


def passage_id_for(paper_id: str, section_number: str, index: int) -> str:
    """Passage id from its paper, section number and position within the section."""
    return f"{paper_id}#{section_number or '0'}:{index}"


def reading_key(passage_id: str) -> tuple:
    """Sort key from `<paper>#<section>:<index>`: abstract first, then section numbers naturally, then index."""
    _, _, tail = passage_id.rpartition("#")
    section, _, index = tail.rpartition(":")
    parts = [
        (0, int(x)) if x.isdigit() else (1 if section != "abstract" else -1, x)
        for x in re.split(r"[.\-]", section)
    ]
    return (parts, int(index) if index.isdigit() else 0)
