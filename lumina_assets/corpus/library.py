"""A user's reference library as a corpus: a Zotero data folder or an export (BibTeX, RIS, CSL-JSON) with its attached
files. The library's metadata wins over what is read from the attached PDF (`metadata_sources` says `title:zotero`);
the PDF gives the full text, its hash and what the library left empty (docs/library-and-alerts.md).
`load_local_corpus` reads whatever LUMINA_CORPUS names: a library, or a BEIR directory or PDFs (corpus.local)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lumina_assets.core.hygiene import cap_metadata, clean_text, display_name, path_text
from lumina_assets.core.ids import paper_id_for
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.collections import is_beir_corpus
from lumina_assets.corpus.local import Enricher, LoadReport, load_beir_papers, load_one_pdf, load_pdf_folder
from lumina_assets.corpus.normalize import Rejection
from lumina_assets.corpus.zotero_export import EXPORT_SUFFIXES, ExportRead, LibraryItem, read_export
from lumina_assets.corpus.zotero_sqlite import is_data_folder, read_data_folder
from lumina_assets.parsing.preflight import PDF_MAGIC, PdfLimits

SOURCE = "zotero"
# what a library item states about its paper (labelled `<field>:zotero` in `metadata_sources`)
LIBRARY_FIELDS = [f.name for f in dataclasses.fields(LibraryItem) if f.name not in ("key", "url", "files")]


def is_library(path: Path) -> bool:
    """A Zotero data folder, or a file with an export's suffix (.bib, .ris, .json)."""
    return is_data_folder(path) or (path.is_file() and path.suffix.lower() in EXPORT_SUFFIXES)


def library_paper(item: LibraryItem, pdf: Paper | None, library_name: str) -> Paper:
    """One catalogue record: the item's fields, and the PDF's where the item has none."""
    base = pdf or Paper(paper_id="", title="")
    doi = item.doi or base.doi
    arxiv_id = item.arxiv_id or base.arxiv_id
    if doi or arxiv_id:
        paper_id = paper_id_for(doi=doi, arxiv_id=arxiv_id)
    elif pdf is not None:
        paper_id = pdf.paper_id  # the file's hash
    else:
        paper_id = paper_id_for(corpus=f"{SOURCE}-{library_name}", corpus_doc_id=item.key)
    sources = [f"{name}:{SOURCE}" for name in LIBRARY_FIELDS if getattr(item, name)]
    taken = {entry.split(":", 1)[0] for entry in sources}
    sources += [entry for entry in base.metadata_sources if entry.split(":", 1)[0] not in taken]
    paper = Paper(
        paper_id=paper_id,
        title=item.title or base.title,
        doi=doi,
        arxiv_id=arxiv_id,
        authors=list(item.authors) or list(base.authors),
        year=item.year or base.year,
        venue=item.venue or base.venue,
        abstract=item.abstract or base.abstract,
        pages=item.pages or base.pages,
        arxiv_primary_class=item.arxiv_primary_class
        or (base.arxiv_primary_class if arxiv_id == base.arxiv_id else None),
        pdf_urls=[item.url] if item.url and item.url.lower().endswith(".pdf") else [],
        source=SOURCE,
        source_id=item.key,
        local_path=base.local_path,
        tags=list(item.tags),
        collections=list(item.collections),
        metadata_sources=sources,
    )
    cap_metadata(paper)
    return paper


ADVICE = {
    "zotero_data_folder": "restore it from Zotero's own backup (zotero.sqlite.bak beside it: close Zotero, copy it "
    "over zotero.sqlite), or point LUMINA_CORPUS at an export (File -> Export Library)",
    "export": "export the library again from Zotero (File -> Export Library), or point LUMINA_CORPUS at the Zotero "
    "data folder",
}


def _read(path: Path) -> tuple[ExportRead, str]:
    if is_data_folder(path):
        return read_data_folder(path), "zotero_data_folder"
    kind = EXPORT_SUFFIXES[path.suffix.lower()]
    return read_export(path), f"zotero_{kind}"


def _unreadable(path: Path, kind: str, error: BaseException) -> LoadReport:
    """The whole library refused as one `unreadable_corpus` row naming the file, the problem and what to do; the
    caller's other sources (the inbox) still come in."""
    report = LoadReport(kind=kind)
    detail = clean_text(str(error)) or type(error).__name__
    if isinstance(error, RecursionError):
        detail = "nested too deeply to read"
    advice = ADVICE["zotero_data_folder" if kind == "zotero_data_folder" else "export"]
    shown = display_name(path)
    message = detail if detail.startswith(shown) else f"{shown}: {detail}"
    report.reject(
        f"corpus:{path_text(path)}", shown, SOURCE, "unreadable_corpus", f"{message}. What to do: {advice}"
    )
    return report


def _refused_attachment(report: LoadReport, item: LibraryItem, loaded: LoadReport) -> None:
    """A refused attachment as a rejected_papers row naming its item (the item keeps its library metadata)."""
    for rejection, error in zip(loaded.rejected, loaded.errors, strict=True):
        report.rejected.append(
            Rejection(
                f"{SOURCE}:{item.key}:attachment", rejection.title, SOURCE, f"attachment_{rejection.reason}"
            )
        )
        report.errors.append(f"{item.key}: {error} (metadata kept)")


def load_library(
    path: Path,
    *,
    limits: PdfLimits | None = None,
    store_root: Path | None = None,
    enricher: Enricher | None = None,
) -> LoadReport:
    """Every item of the library as a Paper. Never fatal: an unreadable library is one `unreadable_corpus` row with
    advice; an unreadable entry or a refused attachment is a row of its own, and the item keeps its metadata."""
    kind = "zotero_data_folder" if is_data_folder(path) else "zotero_export"
    try:
        read, kind = _read(path)
    except Exception as error:  # noqa: BLE001 - a user's file, read by sqlite3, json and parsers with many error types
        return _unreadable(path, kind, error)
    report = LoadReport(kind=kind)
    name = display_name(path.stem if path.is_file() else path.name)
    report.repairs += read.notes
    for where, message in read.problems:
        report.reject(f"{SOURCE}:{where}", where, SOURCE, "unreadable_entry", message)
    for refused in read.refused:
        kept = f"{refused.message} (metadata kept)"
        report.reject(
            f"{SOURCE}:{refused.item_key}:attachment", refused.attachment_key, SOURCE, refused.reason, kept
        )
    for item in read.standalone:
        _load_standalone(item, report, limits, store_root, enricher, name)
    for item in read.items:
        if not item.title and not item.abstract and not item.files:
            empty = f"{item.key}: empty library item"
            report.reject(f"{SOURCE}:{item.key}", item.key, SOURCE, "no_title_or_abstract", empty)
            continue
        pdf = None
        for attachment in item.files:
            if not _is_pdf(attachment):
                continue
            if not _is_file(attachment):
                report.repairs.append(
                    f"{item.key}: attachment {display_name(attachment)} not found (metadata kept)"
                )
                continue
            loaded = _load_pdf(attachment, limits, store_root, enricher)
            if loaded.papers:
                pdf = loaded.papers[0]
                break
            _refused_attachment(report, item, loaded)
        report.papers.append(library_paper(item, pdf, name))
    return report


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a symbolic link loop, a name too long, a NUL byte in the name
        return False


def _is_pdf(path: Path) -> bool:
    """Named .pdf, or a file that starts as one: a library may store a PDF under any name ("Full Text")."""
    if path.suffix.lower() == ".pdf":
        return True
    if not _is_file(path):  # never open a FIFO or a device to look
        return False
    try:
        with path.open("rb") as handle:
            return PDF_MAGIC in handle.read(1024)
    except (OSError, ValueError):
        return False


def _load_pdf(path: Path, limits, store_root, enricher) -> LoadReport:
    """One attachment the library holds as a PDF, whatever its name; the preflight refuses what is not one."""
    report = LoadReport(kind="pdf_folder")
    load_one_pdf(path, limits or PdfLimits(), report, store_root, enricher)
    return report


def _load_standalone(item, report, limits, store_root, enricher, name) -> None:
    """A PDF in the library without a parent item: a paper described by the PDF, or a row saying why not."""
    attachment = item.files[0] if item.files else None
    if attachment is None:
        return  # refused above with its reason
    item_id, shown = f"{SOURCE}:{item.key}", display_name(attachment.name)
    if not _is_file(attachment):
        missing = f"{item.key}: top-level attachment {display_name(attachment)} not found"
        report.reject(item_id, shown, SOURCE, "standalone_attachment_missing", missing)
        return
    loaded = _load_pdf(attachment, limits, store_root, enricher)
    if not loaded.papers:
        for rejection, error in zip(loaded.rejected, loaded.errors, strict=True):
            report.reject(
                item_id, rejection.title, SOURCE, rejection.reason, f"{item.key}: top-level {error}"
            )
        return
    report.papers.append(library_paper(item, loaded.papers[0], name))


def load_local_corpus(
    path: Path,
    *,
    limits: PdfLimits | None = None,
    store_root: Path | None = None,
    enricher: Enricher | None = None,
) -> LoadReport:
    """A BEIR directory, a reference library (Zotero data folder or BibTeX / RIS / CSL-JSON export) or a folder
    of PDFs; a clear error for anything else."""
    if not path.exists():
        raise FileNotFoundError(f"LUMINA_CORPUS points to {display_name(path)}, which does not exist")
    if is_library(path):
        return load_library(path, limits=limits, store_root=store_root, enricher=enricher)
    if is_beir_corpus(path):
        return load_beir_papers(path)
    if path.is_dir():
        return load_pdf_folder(path, limits=limits, store_root=store_root, enricher=enricher)
    if path.suffix.lower() == ".pdf":
        return _load_pdf(path, limits, store_root, enricher)
    raise ValueError(
        f"LUMINA_CORPUS={display_name(path)} is neither a folder of PDFs nor a BEIR directory with corpus.jsonl"
    )
