"""A reference manager's export read into `LibraryItem`s: BibTeX (bibtexparser v2), RIS (rispy) or CSL-JSON, with
attached files resolved relative to the export's folder. A record that cannot be read is a problem naming it,
never fatal."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from lumina_assets.core.hygiene import clean_text
from lumina_assets.core.ids import normalize_arxiv_class, normalize_arxiv_id, normalize_doi, normalize_pages

YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
ARXIV_IN_TEXT = re.compile(r"arxiv\s*[:/]\s*([a-z\-]+/\d{7}|\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
EXPORT_SUFFIXES = {".bib": "bibtex", ".bibtex": "bibtex", ".ris": "ris", ".json": "csl_json"}


@dataclass
class LibraryItem:
    """One entry of a user's library, as the library states it (the strongest metadata source there is)."""

    key: str  # citation key (BibTeX), item key (Zotero database), or position (RIS / CSL-JSON)
    title: str = ""
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    abstract: str | None = None
    url: str | None = None
    pages: str | None = None  # "84--91" (core.ids.normalize_pages)
    arxiv_primary_class: str | None = None
    tags: list[str] = field(default_factory=list)
    collections: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # attachments, PDFs first


@dataclass
class Refused:
    """An attachment not taken, with the reason recorded in rejected_papers (its item still enters)."""

    item_key: str
    attachment_key: str
    reason: str
    message: str


@dataclass
class ExportRead:
    items: list[LibraryItem] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (item key or line, message)
    refused: list[Refused] = field(default_factory=list)  # attachments refused (outside storage, a link loop)
    # PDFs without a parent item: metadata from the PDF
    standalone: list[LibraryItem] = field(default_factory=list)
    # what was left out on purpose, and how the library was read
    notes: list[str] = field(default_factory=list)


def year_in(text) -> int | None:
    match = YEAR.search(str(text or ""))
    return int(match.group(1)) if match else None


def arxiv_in(*texts) -> str | None:
    for text in texts:
        match = ARXIV_IN_TEXT.search(str(text or ""))
        if match:
            return normalize_arxiv_id(match.group(1))
    return None


def unique(values) -> list[str]:
    return list(dict.fromkeys(v for v in (clean_text(str(x)).strip() for x in values) if v))


def pdfs_first(paths: list[Path]) -> list[Path]:
    return sorted(dict.fromkeys(paths), key=lambda p: p.suffix.lower() != ".pdf")


def resolve_file(raw: str, base: Path) -> Path:
    """An attachment path as the export wrote it: relative to the export's folder, or absolute."""
    path = Path(raw.strip()).expanduser()
    return path if path.is_absolute() else base / path


def split_unescaped(text: str, separator: str) -> list[str]:
    """Split on `separator` where no backslash escapes it; the parts keep their escapes."""
    return re.split(rf"(?<!\\){re.escape(separator)}", text)


def bibtex_files(value: str, base: Path) -> list[Path]:
    """The paths in a Zotero / JabRef `file` field (`description:path:mime type;...`) or Better BibTeX's bare
    `path;path`."""
    found = []
    for entry in split_unescaped(value, ";"):
        if not entry.strip():
            continue
        parts = split_unescaped(entry.strip(), ":")
        if len(parts) >= 3:
            raw = ":".join(parts[1:-1])  # an unescaped drive letter ("C:\\x.pdf") stays in the path
        else:
            raw = entry.strip()
        found.append(resolve_file(re.sub(r"\\(.)", r"\1", raw), base))  # "\;" -> ";"
    return found


@functools.cache
def _latex_decoder():
    """One pylatexenc decoder and macro table for every field (`latex_to_text` builds the table anew per call)."""
    from pylatexenc import latexwalker
    from pylatexenc.latex2text import LatexNodes2Text  # bibtexparser's own LaTeX decoder

    context = latexwalker.get_default_latex_context_db()
    decoder = LatexNodes2Text(math_mode="verbatim")
    return lambda text: decoder.nodelist_to_text(
        latexwalker.LatexWalker(text, latex_context=context).get_latex_nodes()[0]
    )


LATEX_MARKS = ("\\", "{", "}", "$", "~", "%", "&", "^", "_", "--", "``", "''")


@functools.lru_cache(maxsize=1 << 16)  # venues, authors and keywords repeat across a library
def _latex(text: str | None) -> str:
    if not text:
        return ""
    if not any(mark in text for mark in LATEX_MARKS):
        return re.sub(r"\s+", " ", clean_text(text)).strip()  # no LaTeX in it: nothing to decode
    try:
        decoded = _latex_decoder()(text)
    except Exception:  # pylatexenc raises its own parse errors on malformed LaTeX: keep the raw text
        decoded = text.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", clean_text(decoded)).strip()


def read_bibtex(path: Path) -> ExportRead:
    import bibtexparser
    from bibtexparser import middlewares

    read = ExportRead()
    text = path.read_text(encoding="utf-8", errors="replace")
    library = bibtexparser.parse_string(
        text, append_middleware=[middlewares.SeparateCoAuthors(), middlewares.SplitNameParts()]
    )
    for block in library.failed_blocks:
        line = getattr(block, "start_line", "?")
        read.problems.append((f"line {line}", f"{path.name} line {line}: not a readable BibTeX entry"))
    base = path.parent
    for entry in library.entries:
        try:
            read.items.append(_bibtex_item(entry, base))
        except Exception as error:  # noqa: BLE001 - one odd entry must not stop the others
            read.problems.append((entry.key, f"{path.name} entry {entry.key}: not readable ({_why(error)})"))
    return read


def _why(error: BaseException) -> str:
    return (
        "nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"[:200]
    )


def _bibtex_item(entry, base: Path) -> LibraryItem:
    """One parsed BibTeX entry as a LibraryItem (LaTeX decoded, attachments resolved against `base`)."""
    fields = {name.lower(): f.value for name, f in entry.fields_dict.items()}
    authors = []
    for name in fields.get("author") or []:
        parts = getattr(name, "first", []) + getattr(name, "von", []) + getattr(name, "last", [])
        authors.append(_latex(" ".join(parts) if parts else str(name)))
    venue = next(
        (fields[k] for k in ("journal", "journaltitle", "booktitle", "publisher", "school") if k in fields),
        None,
    )
    keywords = re.split(r"[;,]", fields.get("keywords") or "")
    groups = re.split(r"[;,]", fields.get("groups") or "")
    return LibraryItem(
        key=entry.key,
        title=_latex(fields.get("title")),
        authors=unique(authors),
        year=year_in(fields.get("year") or fields.get("date")),
        venue=_latex(venue) or None,
        doi=normalize_doi(fields.get("doi")),
        arxiv_id=normalize_arxiv_id(fields.get("eprint"))
        if (fields.get("archiveprefix") or fields.get("eprinttype") or "").lower() == "arxiv"
        else arxiv_in(fields.get("note"), fields.get("url"), fields.get("journal")),
        abstract=_latex(fields.get("abstract")) or None,
        url=(fields.get("url") or "").strip() or None,
        pages=normalize_pages(_latex(fields.get("pages"))),
        arxiv_primary_class=normalize_arxiv_class(_latex(fields.get("primaryclass"))),
        tags=unique(_latex(k) for k in keywords),
        collections=unique(_latex(g) for g in groups),
        files=pdfs_first(bibtex_files(fields.get("file") or "", base)),
    )


def read_ris(path: Path) -> ExportRead:
    import rispy

    read = ExportRead()
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    try:
        records = rispy.loads(
            text, list_tags=[*rispy.LIST_TYPE_TAGS, "L1", "L2", "L4"], skip_unknown_tags=True
        )
    except Exception as error:  # rispy raises IOError / IndexError on a malformed file
        read.problems.append((path.name, f"{path.name}: not a readable RIS file ({error})"))
        return read
    base = path.parent
    for number, record in enumerate(records, start=1):
        try:
            read.items.append(_ris_item(number, record, base))
        except Exception as error:  # noqa: BLE001 - one odd record must not stop the others
            read.problems.append(
                (f"record {number}", f"{path.name} record {number}: not readable ({_why(error)})")
            )
    return read


def _ris_item(number: int, record: dict, base: Path) -> LibraryItem:
    """One rispy record as a LibraryItem (attachments from L1 / L2 / L4 resolved against `base`)."""
    files = [
        resolve_file(raw, base)
        for tag in ("file_attachments1", "file_attachments2", "figure")
        for raw in record.get(tag) or []
        if raw and not raw.startswith(("http://", "https://"))
    ]
    venue = next(
        (record[k] for k in ("secondary_title", "journal_name", "alternate_title3") if record.get(k)),
        None,
    )
    return LibraryItem(
        key=record.get("id") or f"ris-{number}",
        title=clean_text(record.get("title") or record.get("primary_title") or "").strip(),
        authors=unique([*(record.get("authors") or []), *(record.get("first_authors") or [])]),
        year=year_in(record.get("year") or record.get("date") or record.get("publication_year")),
        venue=clean_text(venue).strip() if venue else None,
        doi=normalize_doi(record.get("doi")),
        arxiv_id=arxiv_in(*(record.get("urls") or []), record.get("notes")),
        abstract=clean_text(record.get("abstract") or record.get("notes_abstract") or "").strip() or None,
        url=(record.get("urls") or [None])[0],
        pages=normalize_pages(record.get("start_page"), record.get("end_page")),
        tags=unique(record.get("keywords") or []),
        files=pdfs_first(files),
    )


def _csl_name(name: dict) -> str:
    if isinstance(name.get("literal"), str) and name["literal"]:
        return name["literal"]
    parts = (name.get("given"), name.get("non-dropping-particle"), name.get("family"))
    return " ".join(p for p in parts if isinstance(p, str) and p)


CSL_MAX_DEPTH = 32  # CSL-JSON items nest 4 levels deep (issued -> date-parts -> [[y, m, d]])
_CSL_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
CSL_TEXT = ("title", "container-title", "DOI", "URL", "abstract", "note", "keyword")


def csl_item_spans(text: str) -> tuple[list[tuple[int, int, int]], str | None]:
    """([(start, end, deepest nesting)] of each element of a top-level JSON array, problem): a scan of brackets
    outside strings, so an item nested too deep for the JSON parser is named and skipped while the others are
    read."""
    spans: list[tuple[int, int, int]] = []
    depth, deepest, start = 0, 0, None
    for token in _CSL_TOKENS.finditer(text):
        mark = token.group()
        if mark[0] == '"':
            if depth == 1:  # a bare string as an item: read below, refused as not an object
                spans.append((token.start(), token.end(), 0))
            continue
        if mark in "[{":
            depth += 1
            if depth == 1 and mark == "{":
                return [], "CSL-JSON must be a list of items"
            if depth == 2 and start is None:
                start, deepest = token.start(), 2
            deepest = max(deepest, depth)
        else:
            depth -= 1
            if depth == 1 and start is not None:
                spans.append((start, token.end(), deepest - 1))
                start = None
            if depth < 0:
                return spans, "unbalanced brackets"
    if depth == 0 and not spans and not text.strip().startswith("["):
        return [], "CSL-JSON must be a list of items"
    return spans, None if depth == 0 else "the file ends inside an item (truncated?)"


def _csl_problem(record: dict) -> str | None:
    """What is wrongly typed in one CSL-JSON item (a field Lumina reads), or None."""
    for name in CSL_TEXT:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name} must be text (got {type(value).__name__})"
    for name in ("id", "number", "page"):
        value = record.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
            return f"{name} must be text or a number (got {type(value).__name__})"
    issued = record.get("issued")
    if issued is not None:
        parts = issued.get("date-parts") if isinstance(issued, dict) else None
        if not isinstance(issued, dict) or (
            parts is not None and not (isinstance(parts, list) and all(isinstance(p, list) for p in parts))
        ):
            return 'issued must be a date object ({"date-parts": [[2020, 5]]})'
    for name, kind in (("author", dict), ("file", str)):
        value = record.get(name)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, kind) for v in value)):
            return f"{name} must be a list of {'names' if kind is dict else 'paths'}"
    return None


def read_csl_json(path: Path) -> ExportRead:
    """Each item of the array is read on its own: one that is not JSON, nests too deep or has a wrongly typed
    field is a problem naming it, and the others come in."""
    read = ExportRead()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        read.problems.append((path.name, f"{path.name}: not readable ({error.strerror or error})"))
        return read
    spans, problem = csl_item_spans(text)
    if problem:
        read.problems.append((path.name, f"{path.name}: {problem}"))
    base = path.parent
    for number, (start, end, depth) in enumerate(spans, start=1):
        where = f"item {number}"
        if depth > CSL_MAX_DEPTH:
            read.problems.append(
                (where, f"{path.name} item {number}: nested deeper than {CSL_MAX_DEPTH} levels")
            )
            continue
        try:
            record = json.loads(text[start:end])
        except ValueError as error:
            read.problems.append((where, f"{path.name} item {number}: not JSON ({error})"))
            continue
        if not isinstance(record, dict):
            read.problems.append((where, f"{path.name} item {number}: not an object"))
            continue
        wrong = _csl_problem(record)
        if wrong:
            shown = f" (id {record['id']})" if isinstance(record.get("id"), str | int) else ""
            read.problems.append((where, f"{path.name} item {number}{shown}: {wrong}"))
            continue
        issued = record.get("issued") or {}
        parts = issued.get("date-parts") or [[None]]
        year = parts[0][0] if parts and parts[0] else None
        keywords = record.get("keyword") or ""
        files = [resolve_file(f, base) for f in record.get("file") or []]
        read.items.append(
            LibraryItem(
                key=str(record.get("id") or f"csl-{number}"),
                title=clean_text(record.get("title") or "").strip(),
                authors=unique(_csl_name(a) for a in record.get("author") or []),
                year=year if isinstance(year, int) else year_in(year or issued.get("raw")),
                venue=clean_text(record.get("container-title") or "").strip() or None,
                doi=normalize_doi(record.get("DOI")),
                arxiv_id=arxiv_in(record.get("URL"), record.get("number"), record.get("note")),
                abstract=clean_text(record.get("abstract") or "").strip() or None,
                url=record.get("URL"),
                pages=normalize_pages(record.get("page")),
                tags=unique(re.split(r"[;,]", keywords)),
                files=pdfs_first(files),
            )
        )
    return read


def read_export(path: Path) -> ExportRead:
    readers = {"bibtex": read_bibtex, "ris": read_ris, "csl_json": read_csl_json}
    kind = EXPORT_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path.name}: not a library export (.bib, .ris or CSL .json)")
    return readers[kind](path)
