"""Search results written as citation files: BibTeX (bibtexparser), RIS (rispy) and CSV, with names split by
nameparser, stable citation keys, and no control character or terminal escape in any value (docs/search.md)."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

CONFERENCE = re.compile(r"proceedings|conference|workshop|symposium|\bconf\b|meeting", re.I)
PREPRINT = re.compile(r"arxiv|biorxiv|medrxiv|chemrxiv|ssrn|preprint", re.I)
KEY_STOPWORDS = frozenset(
    "a an the of on in for and to with from by at as is are via towards toward using what how why when".split()
)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_COLUMNS = tuple(
    "rank citation_key title authors year venue doi url cited_by_in_corpus score evidence_page evidence "
    "paper_id".split()
)


@dataclass(frozen=True)
class ExportFormat:
    media_type: str
    extension: str


FORMATS = {
    "bibtex": ExportFormat("application/x-bibtex; charset=utf-8", "bib"),
    "ris": ExportFormat("application/x-research-info-systems; charset=utf-8", "ris"),
    "csv": ExportFormat("text/csv; charset=utf-8", "csv"),
}


def export(results: list[dict], fmt: str) -> str:
    """`results` written in `fmt` (a key of FORMATS)."""
    writers = {"bibtex": to_bibtex, "ris": to_ris, "csv": to_csv}
    if fmt not in writers:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    return writers[fmt](results)


def export_filename(query: str, fmt: str) -> str:
    """`lumina-<query words>.<ext>`: a plain ASCII name for Content-Disposition and `lumina export`."""
    words = re.findall(r"[a-z0-9]+", _ascii(query).lower())
    return f"lumina-{'-'.join(words)[:60].strip('-') or 'results'}.{FORMATS[fmt].extension}"


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()


# whole escape sequences first (CSI "ESC [ ... m", OSC "ESC ] ... BEL" or "... ESC \\", their one-byte C1 forms and
# two-byte escapes), so no "]0;title" is left behind; then every other control character and the noncharacters
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]P^_X]|[\x9d\x90\x9e\x9f\x98])[^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?"
    r"|\x1b[ -~]?"
)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ufffe\uffff]")


def _clean(text) -> str:
    """One line of printable text: escape sequences and control characters removed, whitespace folded."""
    text = _ESCAPE_SEQUENCE.sub("", str(text or ""))
    text = _CONTROL.sub("", re.sub(r"[\s\x85]", " ", text))
    return re.sub(r"\s+", " ", text).strip()


ORGANISATION = re.compile(
    r"\b(?:institute|institut|university|universit[éàä]t?|consortium|collaboration|group|team|foundation|"
    r"association|society|organi[sz]ation|center|centre|laborator(?:y|ies)|labs?|committee|council|agency|inc|"
    r"ltd|llc|gmbh|corporation|corp|company|project|initiative|network|alliance|department|ministry|office|"
    r"board|trust|academy|programme|program|hospital|school|college|deepmind|openai|google|microsoft)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Name:
    """An author as citation files need it: `last` with its particles ("De Marchis"), `first` with middle names,
    `suffix` ("Jr."); an organisation is all `last`."""

    last: str
    first: str = ""
    suffix: str = ""
    organisation: bool = False

    def inverted(self) -> str:
        """ "Last, First" ("Last, Jr., First" with a suffix), as RIS's AU and BibTeX's name list take it."""
        if self.organisation or not self.first:
            return self.last
        return ", ".join(p for p in (self.last, self.suffix, self.first) if p)


def is_organisation(name: str) -> bool:
    """A name that is an organisation: an institution word, or an "and" or "&" inside ("Ernst & Young")."""
    return bool(ORGANISATION.search(name) or re.search(r"\s(?:and|&)\s", name))


@functools.lru_cache(maxsize=8192)
def parse_name(text: str) -> Name:
    """One author's name split into its parts (nameparser; an organisation stays whole)."""
    from nameparser import Parser

    name = _clean(text)
    if not name or is_organisation(name):
        return Name(name, organisation=bool(name))
    parsed = Parser().parse(name)
    first = " ".join(p for p in (parsed.given or parsed.title, parsed.middle) if p)
    last = parsed.family or ""
    if not last:  # a single word ("Plato"), or nothing nameparser could place
        return Name(name)
    return Name(last, first, parsed.suffix or "")


def _names(result: dict) -> list[Name]:
    return [n for n in (parse_name(a) for a in result.get("authors") or []) if n.last]


def base_key(result: dict) -> str:
    first = next(iter(_names(result)), None)
    surname = _ascii(first.last.split()[0] if first and first.organisation else first.last if first else "")
    surname = re.sub(r"[^a-z0-9]", "", surname.lower())
    words = [
        w
        for w in re.findall(r"[a-z0-9]+", _ascii(result.get("title") or "").lower())
        if w not in KEY_STOPWORDS
    ]
    year = str(result.get("year") or "")
    return (surname or "anon") + year + (words[0] if words else "")


def citation_keys(results: list[dict]) -> list[str]:
    """One key per result, distinct within the list; a shared key gets a suffix from the paper id."""
    bases = [base_key(r) for r in results]
    shared = Counter(bases)
    keys = []
    for base, result in zip(bases, results, strict=True):
        if shared[base] > 1:
            base += "_" + hashlib.sha1(str(result.get("paper_id")).encode()).hexdigest()[:6]
        keys.append(base)
    return keys


def best_evidence(result: dict) -> tuple[str, int | None]:
    """(evidence sentence, its page) of the result's best highlight; else the start of its first passage."""
    best = None
    for passage in result.get("passages") or []:
        for mark in passage.get("highlights") or []:
            if best is None or mark["score"] > best[0]["score"]:
                best = (mark, passage)
    if best:
        mark, passage = best
        return _clean(passage["text"][mark["start"] : mark["end"]]), passage.get("page_start")
    passages = result.get("passages") or []
    if passages:
        return _clean(passages[0].get("text"))[:300], passages[0].get("page_start")
    return "", None


def _web_url(result: dict) -> str | None:
    url = _clean(result.get("url"))
    return url if re.match(r"https?://", url) and not re.search(r"[{}\s]", url) else None


def _doi(result: dict) -> str | None:
    doi = _clean(result.get("doi"))
    return doi if doi and not re.search(r"[{}\s]", doi) else None


_ARXIV_ID = r"(\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})"
_ARXIV_URL = re.compile(
    r"^https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/" + _ARXIV_ID + r"(?:v\d+)?(?:\.pdf)?$"
)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\." + _ARXIV_ID + "$", re.IGNORECASE)
_PRIMARY_CLASS = re.compile(r"^[a-z\-]+(?:\.[A-Za-z\-]+)?$")


def arxiv_id(result: dict) -> str | None:
    """The paper's arXiv identifier: its `arxiv_id`, else read from an arXiv DOI or an arxiv.org abs/pdf URL."""
    given = _clean(result.get("arxiv_id"))
    if re.fullmatch(_ARXIV_ID, given):
        return given
    for pattern, value in ((_ARXIV_DOI, _doi(result)), (_ARXIV_URL, _web_url(result))):
        match = pattern.match(value or "")
        if match:
            return match.group(1)
    return None


def arxiv_class(result: dict) -> str | None:
    """The primary arXiv category ("cs.IR") where the result knows it."""
    value = _clean(result.get("arxiv_primary_class"))
    return value if _PRIMARY_CLASS.match(value) else None


def page_range(result: dict) -> tuple[str, str] | None:
    """(first, last) page of the paper in its venue ("2270", "2282"; last is "" for a one-page or open range)."""
    text = _clean(result.get("pages"))
    match = re.fullmatch(r"([A-Za-z]?\d+)(?:\s*(?:-{1,2}|\u2013|\u2014)\s*([A-Za-z]?\d+))?", text)
    return (match.group(1), match.group(2) or "") if match else None


def venue_kind(venue: str) -> str:
    """ "conference", "preprint" (arXiv and the like: BibTeX @misc), "journal", or "" without a venue."""
    if not venue:
        return ""
    return "conference" if CONFERENCE.search(venue) else "preprint" if PREPRINT.search(venue) else "journal"


def _protect_capitals(encoded_title: str) -> str:
    """Words whose capitals matter (`SciBERT`, `iPhone`) in braces, so a BibTeX style that lower-cases titles keeps
    them (words of letters and digits only, never inside a TeX command)."""

    def protect(token: str) -> str:
        match = re.fullmatch(r"([A-Za-z0-9-]+)([:;,.?!]*)", token)
        if match and re.search(r"[A-Z]", match.group(1)[1:]):
            return "{" + match.group(1) + "}" + match.group(2)
        return token

    return " ".join(protect(t) for t in encoded_title.split(" "))


def bibtex_entry_parts(result: dict, key: str):
    """(bibtexparser Entry with the text fields, author names, verbatim fields) for one result; the names are
    fields `author0`, `author1`, ... until encoded, so each is escaped alone."""
    from bibtexparser.model import Entry, Field

    venue = _clean(result.get("venue"))
    eprint = arxiv_id(result)
    kind = {"conference": "inproceedings", "journal": "article"}.get(venue_kind(venue), "misc")
    venue_field = {"inproceedings": "booktitle", "article": "journal", "misc": "howpublished"}[kind]
    text = [Field("title", _clean(result.get("title")) or _clean(result.get("paper_id")))]
    names = _names(result)
    text += [Field(f"author{i}", name.inverted()) for i, name in enumerate(names)]
    if venue and not (eprint and venue_kind(venue) == "preprint"):  # an arXiv paper says so with `eprint`
        text.append(Field(venue_field, venue))
    if result.get("year"):
        text.append(Field("year", _clean(result["year"])))
    pages = page_range(result)
    if pages:
        text.append(Field("pages", "--".join(p for p in pages if p)))
    # verbatim for BibTeX styles (\url), but `%` escaped: parsers read it as the start of a comment
    verbatim = [
        Field(name, value.replace("%", "\\%"))
        for name, value in (("doi", _doi(result)), ("url", _web_url(result)))
        if value
    ]
    if eprint:
        verbatim += [Field("eprint", eprint), Field("archivePrefix", "arXiv")]
        verbatim += [Field("primaryClass", arxiv_class(result))] if arxiv_class(result) else []
    return Entry(kind, key, text), [n.organisation for n in names], verbatim


def _join_authors(entry, organisations: list[bool]) -> None:
    """The encoded `author<i>` fields joined into BibTeX's `author` after the title; an organisation is braced so
    BibTeX reads it as one last name."""
    from bibtexparser.model import Field

    names = [entry.pop(f"author{i}").value for i in range(len(organisations))]
    if not names:
        return
    joined = " and ".join("{" + n + "}" if org else n for n, org in zip(names, organisations, strict=True))
    fields = entry.fields
    fields.insert(1, Field("author", joined))
    entry.fields = fields


def to_bibtex(results: list[dict]) -> str:
    import bibtexparser
    from bibtexparser.library import Library
    from bibtexparser.middlewares import LatexEncodingMiddleware

    library = Library()
    parts = []
    for result, key in zip(results, citation_keys(results), strict=True):
        entry, organisations, verbatim = bibtex_entry_parts(result, key)
        library.add(entry)
        parts.append((organisations, verbatim))
    # escape the text fields only: keep_math=False, so a `$` in a title is a dollar sign, not TeX math
    library = LatexEncodingMiddleware(keep_math=False, enclose_urls=False).transform(library)
    for entry, (organisations, verbatim) in zip(library.entries, parts, strict=True):
        _join_authors(entry, organisations)
        title = entry.fields_dict["title"]
        title.value = _protect_capitals(title.value)
        for field in verbatim:
            entry.set_field(field)
    return bibtexparser.write_string(library)


@functools.cache
def _ris_writer():
    """rispy's writer as the RIS layout has it: a record opens with `TY  - ` (no `1.` line) and lines end in CR LF."""
    import rispy

    class RisRecords(rispy.RisWriter):
        NEWLINE = "\r\n"

        def set_header(self, count):
            return ""

    return RisRecords


def to_ris(results: list[dict]) -> str:
    import rispy

    records = []
    for result, key in zip(results, citation_keys(results), strict=True):
        venue = _clean(result.get("venue"))
        record = {
            "type_of_reference": {"conference": "CPAPER", "journal": "JOUR", "preprint": "UNPB"}.get(
                venue_kind(venue), "GEN"
            ),
            "id": key,
            "title": _clean(result.get("title")) or _clean(result.get("paper_id")),
            "authors": [name.inverted() for name in _names(result)],
        }
        if venue:
            record["journal_name" if venue_kind(venue) == "journal" else "secondary_title"] = venue
        if result.get("year"):
            record["year"] = _clean(result["year"])
        pages = page_range(result)
        if pages:
            record["start_page"] = pages[0]
            if pages[1]:
                record["end_page"] = pages[1]
        eprint = arxiv_id(result)
        doi = _doi(result) or (f"10.48550/arXiv.{eprint}" if eprint else None)
        if doi:
            record["doi"] = doi
        if eprint:
            record["accession_number"] = f"arXiv:{eprint}"
        if _web_url(result):
            record["urls"] = [_web_url(result)]
        evidence, page = best_evidence(result)
        if evidence:
            record["notes"] = [f"Evidence{f' (p. {page})' if page is not None else ''}: {evidence}"]
        records.append(record)
    return rispy.dumps(records, implementation=_ris_writer())


def _cell(value) -> str:
    text = _clean(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def to_csv(results: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for result, key in zip(results, citation_keys(results), strict=True):
        evidence, page = best_evidence(result)
        row = {
            "rank": result.get("rank"),
            "citation_key": key,
            "title": result.get("title"),
            "authors": "; ".join(_clean(a) for a in result.get("authors") or []),
            "year": result.get("year"),
            "venue": result.get("venue"),
            "doi": result.get("doi"),
            "url": result.get("url"),
            "cited_by_in_corpus": result.get("cited_by_count", 0),
            "score": result.get("score"),
            "evidence_page": page,
            "evidence": evidence,
            "paper_id": result.get("paper_id"),
        }
        writer.writerow([_cell(row[c]) if row[c] is not None else "" for c in CSV_COLUMNS])
    return out.getvalue()
