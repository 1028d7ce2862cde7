"""A user's reference library as a corpus: a Zotero data folder (`zotero.sqlite` + `storage/`) or an export (BibTeX,
RIS, CSL-JSON) with its attached files. `LUMINA_CORPUS` may name either (with or without a `zotero:` prefix); the
catalogue records its papers under the origin `zotero:<absolute path>`, and like a corpus folder it only grows.

The library's own metadata (title, authors, venue, year, DOI, abstract, tags, collections) is the strongest
source there is: it wins over what the PDF heuristics (or GROBID) read from the attached PDF, and each field says
so in `metadata_sources` (`title:zotero`). The PDF still gives the full text, its hash and whatever the library
left empty. An item without a PDF enters with its abstract; one with neither is left to the catalogue's filters.
Each PDF is opened in a limited child process, as a corpus folder's are (`corpus.local`)."""

from __future__ import annotations

from pathlib import Path

from lumina_assets.core.hygiene import cap_metadata, display_name
from lumina_assets.core.ids import paper_id_for
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.local import Enricher, LoadReport, load_local_corpus
from lumina_assets.corpus.zotero_export import EXPORT_SUFFIXES, ExportRead, LibraryItem, read_export
from lumina_assets.corpus.zotero_sqlite import is_data_folder, read_data_folder
from lumina_assets.parsing.preflight import PdfLimits

SOURCE = "zotero"
LIBRARY_FIELDS = ("title", "authors", "year", "venue", "doi", "arxiv_id", "abstract", "tags", "collections")


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


def _read(path: Path) -> tuple[ExportRead, str]:
    if is_data_folder(path):
        return read_data_folder(path), "zotero_data_folder"
    kind = EXPORT_SUFFIXES[path.suffix.lower()]
    return read_export(path), f"zotero_{kind}"


def load_library(
    path: Path,
    *,
    limits: PdfLimits | None = None,
    store_root: Path | None = None,
    enricher: Enricher | None = None,
) -> LoadReport:
    """Every item of the library as a Paper; unreadable entries and attachments that are missing or refused are
    reported with their reason (the item still enters with the library's metadata)."""
    read, kind = _read(path)
    report = LoadReport(kind=kind)
    name = display_name(path.stem if path.is_file() else path.name)
    for where, message in read.problems:
        report.reject(f"{SOURCE}:{where}", where, SOURCE, "unreadable_entry", message)
    for item in read.items:
        if not item.title and not item.abstract and not item.files:
            report.reject(
                f"{SOURCE}:{item.key}",
                item.key,
                SOURCE,
                "no_title_or_abstract",
                f"{item.key}: empty library item",
            )
            continue
        pdf = None
        for attachment in item.files:
            if attachment.suffix.lower() != ".pdf":
                continue
            if not attachment.is_file():
                report.repairs.append(
                    f"{item.key}: attachment {display_name(attachment)} not found (metadata kept)"
                )
                continue
            loaded = load_local_corpus(attachment, limits=limits, store_root=store_root, enricher=enricher)
            if loaded.papers:
                pdf = loaded.papers[0]
                break
            report.repairs += [f"{item.key}: {error} (metadata kept)" for error in loaded.errors]
        report.papers.append(library_paper(item, pdf, name))
    return report
