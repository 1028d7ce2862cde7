"""Local corpora: a folder of PDFs (metadata from the PDF, its first page and its file name) or a BEIR
directory (`corpus.jsonl` with `_id`, `title`, `text`). Bad items are reported by name, never fatal."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from lumina_assets.core.ids import normalize_arxiv_id, normalize_doi, paper_id_for
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.collections import is_beir_corpus, iter_corpus_records

_DOI_IN_TEXT = re.compile(r"(?:doi\s*[:.]?\s*|doi\.org/)(10\.\d{4,9}/[^\s\"<>,;]+)", re.IGNORECASE)
_ARXIV_IN_TEXT = re.compile(r"arXiv:\s*(\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
_ABSTRACT = re.compile(r"\babstract\b[\s.:—-]*", re.IGNORECASE)
_AFTER_ABSTRACT = re.compile(
    r"\n\s*(?:1\.?|I\.)?\s*(?:introduction|keywords|index terms|ccs concepts)\b", re.IGNORECASE
)


@dataclass
class LoadReport:
    papers: list[Paper] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kind: str = ""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_beir_papers(path: Path, *, corpus_name: str | None = None) -> LoadReport:
    """One Paper per corpus.jsonl record (read by `collections.iter_corpus_records`); bad lines become errors."""
    name = corpus_name or path.name
    report = LoadReport(kind="beir")
    for _, record, error in iter_corpus_records(path):
        if error:
            report.errors.append(error)
            continue
        doc_id = record["_id"]
        report.papers.append(
            Paper(
                paper_id=paper_id_for(corpus=f"beir-{name}", corpus_doc_id=doc_id),
                title=str(record.get("title") or "").strip(),
                abstract=str(record.get("text") or "").strip() or None,
                source="beir",
                source_id=doc_id,
            )
        )
    return report


def _first_page_text(document) -> str:
    return document[0].get_text("text") if document.page_count else ""


def _title_from_first_page(document) -> str:
    """The largest-font line in the top half of page one: what a reader sees as the title."""
    if not document.page_count:
        return ""
    page = document[0]
    best: tuple[float, str] = (0.0, "")
    for block in page.get_text("dict", flags=0)["blocks"]:
        for line in block.get("lines", []):
            if line["bbox"][1] > page.rect.height / 2:
                continue
            text = " ".join(span["text"] for span in line["spans"]).strip()
            size = max((span["size"] for span in line["spans"]), default=0.0)
            if len(text) > 8 and size > best[0] + 0.5:
                best = (size, text)
            elif len(text) > 3 and abs(size - best[0]) <= 0.5 and best[1]:
                best = (best[0], f"{best[1]} {text}")  # a title wrapped over several lines
    return best[1]


def _abstract_from_text(text: str) -> str | None:
    match = _ABSTRACT.search(text)
    if not match:
        return None
    rest = text[match.end() :]
    end = _AFTER_ABSTRACT.search(rest)
    abstract = re.sub(r"-\n(\w)", r"\1", rest[: end.start()] if end else rest[:2500])
    abstract = re.sub(r"\s+", " ", abstract).strip()
    return abstract if len(abstract) > 80 else None


def pdf_metadata(path: Path) -> Paper:
    """A Paper for one local PDF; raises ValueError naming the file when it cannot be opened."""
    import pymupdf

    sha = file_sha256(path)
    try:
        document = pymupdf.open(path)
    except Exception as exc:  # pymupdf raises several types for broken files
        raise ValueError(f"{path.name}: cannot open as PDF ({exc})") from exc
    with document:
        if document.needs_pass:
            raise ValueError(f"{path.name}: encrypted PDF")
        meta = document.metadata or {}
        first_page = _first_page_text(document)
        title_meta = (meta.get("title") or "").strip()
        title = (
            title_meta if len(title_meta) > 8 and not title_meta.lower().endswith((".pdf", ".dvi")) else ""
        )
        title = title or _title_from_first_page(document) or path.stem
        doi_match = _DOI_IN_TEXT.search(first_page)
        doi = normalize_doi(doi_match.group(1).rstrip(".")) if doi_match else None
        arxiv_match = _ARXIV_IN_TEXT.search(first_page)
        arxiv_id = normalize_arxiv_id(path.stem) or (arxiv_match.group(1) if arxiv_match else None)
        authors = [a.strip() for a in re.split(r"[;,]| and ", meta.get("author") or "") if a.strip()]
        year_match = re.match(r"D:(\d{4})", meta.get("creationDate") or "")
        return Paper(
            paper_id=paper_id_for(doi=doi, arxiv_id=arxiv_id, file_sha256=sha),
            title=re.sub(r"\s+", " ", title).strip(),
            doi=doi,
            arxiv_id=arxiv_id,
            authors=authors,
            year=int(year_match.group(1)) if year_match else None,
            abstract=_abstract_from_text(first_page),
            source="local_pdf",
            source_id=path.name,
            local_path=str(path.resolve()),
        )


def load_pdf_folder(folder: Path) -> LoadReport:
    report = LoadReport(kind="pdf_folder")
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf"):
        try:
            report.papers.append(pdf_metadata(path))
        except ValueError as exc:
            report.errors.append(str(exc))
    return report


def load_local_corpus(path: Path) -> LoadReport:
    """A BEIR directory or a folder of PDFs; a clear error for anything else."""
    if not path.exists():
        raise FileNotFoundError(f"LUMINA_CORPUS points to {path}, which does not exist")
    if is_beir_corpus(path):
        return load_beir_papers(path)
    if path.is_dir():
        return load_pdf_folder(path)
    if path.suffix.lower() == ".pdf":
        report = LoadReport(kind="pdf_folder")
        try:
            report.papers.append(pdf_metadata(path))
        except ValueError as exc:
            report.errors.append(str(exc))
        return report
    raise ValueError(
        f"LUMINA_CORPUS={path} is neither a folder of PDFs nor a BEIR directory with corpus.jsonl"
    )
