"""Search results written as citation files: BibTeX, RIS and CSV (what `GET /api/export`, `lumina export` and the
page's "copy BibTeX" hand to a reference manager or a spreadsheet).

Input is the result list of `SearchService.search` (JSON-ready dicts). BibTeX is written with bibtexparser v2:
its `LatexEncodingMiddleware` (pylatexenc) escapes what TeX would read as markup (`{ } & % $ # _` and accents,
`Müller` -> `M\\"uller`) and its writer adds the enclosing braces; DOIs and URLs are left verbatim, as BibTeX
styles print them with `\\url`. RIS is written with rispy. CSV uses the standard library, with a cell that a
spreadsheet would run as a formula (`=`, `+`, `-`, `@` first) prefixed with `'`.

Citation keys are stable: first author's last name, year and the first significant title word in ASCII
(`muller2020deep`); when two papers of one export share a key, each gets a suffix derived from its paper id, so the
same paper keeps the same key whatever else the export holds.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from lumina_assets.core.names import last_name

CONFERENCE = re.compile(r"proceedings|conference|workshop|symposium|\bconf\b|meeting", re.I)
PREPRINT = re.compile(r"arxiv|biorxiv|medrxiv|chemrxiv|ssrn|preprint", re.I)
KEY_STOPWORDS = frozenset(
    "a an the of on in for and to with from by at as is are via towards toward using what how why when".split()
)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_COLUMNS = (
    "rank",
    "citation_key",
    "title",
    "authors",
    "year",
    "venue",
    "doi",
    "url",
    "cited_by_in_corpus",
    "score",
    "evidence_page",
    "evidence",
    "paper_id",
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


# ---------------------------------------------------------------- keys and fields


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()


def _clean(text) -> str:
    """One line of text: newlines and runs of spaces folded (an RIS or CSV value must not start a new record)."""
    return re.sub(r"\s+", " ", str(text or "")).strip()


def base_key(result: dict) -> str:
    authors = result.get("authors") or []
    surname = re.sub(r"[^a-z0-9]", "", _ascii(last_name(authors[0])).lower()) if authors else ""
    words = [
        w
        for w in re.findall(r"[a-z0-9]+", _ascii(result.get("title") or "").lower())
        if w not in KEY_STOPWORDS
    ]
    year = str(result.get("year") or "")
    return (surname or "anon") + year + (words[0] if words else "")


def citation_keys(results: list[dict]) -> list[str]:
    """One key per result (see the module docstring); distinct within the list."""
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


def _is_conference(venue: str) -> bool:
    return bool(CONFERENCE.search(venue))


def venue_kind(venue: str) -> str:
    """ "conference", "preprint" (arXiv and the like: BibTeX @misc, as reference managers export a preprint),
    "journal", or "" without a venue."""
    if not venue:
        return ""
    return "conference" if _is_conference(venue) else "preprint" if PREPRINT.search(venue) else "journal"


# ---------------------------------------------------------------- BibTeX


def _protect_capitals(encoded_title: str) -> str:
    """Words whose capitals matter (`BERT`, `SciBERT`, `iPhone`) in braces, so a BibTeX style that lower-cases
    titles keeps them; applied to words of letters and digits only, never inside a TeX command."""

    def protect(token: str) -> str:
        match = re.fullmatch(r"([A-Za-z0-9-]+)([:;,.?!]*)", token)
        if match and re.search(r"[A-Z]", match.group(1)[1:]):
            return "{" + match.group(1) + "}" + match.group(2)
        return token

    return " ".join(protect(t) for t in encoded_title.split(" "))


def bibtex_entry_parts(result: dict, key: str):
    """(bibtexparser Entry with the text fields, author names, verbatim fields) for one result; the names are
    fields `author0`, `author1`, ... until encoded, so each is escaped alone and joined afterwards."""
    from bibtexparser.model import Entry, Field

    venue = _clean(result.get("venue"))
    kind = {"conference": "inproceedings", "journal": "article"}.get(venue_kind(venue), "misc")
    venue_field = {"inproceedings": "booktitle", "article": "journal", "misc": "howpublished"}[kind]
    text = [Field("title", _clean(result.get("title")) or str(result.get("paper_id")))]
    names = [_clean(a) for a in result.get("authors") or [] if _clean(a)]
    text += [Field(f"author{i}", name) for i, name in enumerate(names)]
    if venue:
        text.append(Field(venue_field, venue))
    if result.get("year"):
        text.append(Field("year", str(result["year"])))
    # verbatim for BibTeX styles (\url), but `%` escaped: parsers read it as the start of a comment
    verbatim = [
        Field(name, value.replace("%", "\\%"))
        for name, value in (("doi", _doi(result)), ("url", _web_url(result)))
        if value
    ]
    return Entry(kind, key, text), len(names), verbatim


def _join_authors(entry, count: int) -> None:
    """The encoded `author<i>` fields joined into BibTeX's `author` ("A and B"), placed after the title; a name
    holding the word "and" (an organisation) is braced so it stays one author."""
    from bibtexparser.model import Field

    names = [entry.pop(f"author{i}").value for i in range(count)]
    if not names:
        return
    joined = " and ".join("{" + n + "}" if re.search(r"\band\b", n) else n for n in names)
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
        entry, authors, verbatim = bibtex_entry_parts(result, key)
        library.add(entry)
        parts.append((authors, verbatim))
    # escape the text fields only: keep_math=False, so a `$` in a title is a dollar sign, not TeX math
    library = LatexEncodingMiddleware(keep_math=False, enclose_urls=False).transform(library)
    for entry, (authors, verbatim) in zip(library.entries, parts, strict=True):
        _join_authors(entry, authors)
        title = entry.fields_dict["title"]
        title.value = _protect_capitals(title.value)
        for field in verbatim:
            entry.set_field(field)
    return bibtexparser.write_string(library)


# ---------------------------------------------------------------- RIS and CSV


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
            "title": _clean(result.get("title")) or str(result.get("paper_id")),
            "authors": [_clean(a) for a in result.get("authors") or [] if _clean(a)],
        }
        if venue:
            record["journal_name" if venue_kind(venue) == "journal" else "secondary_title"] = venue
        if result.get("year"):
            record["year"] = str(result["year"])
        if _doi(result):
            record["doi"] = _doi(result)
        if _web_url(result):
            record["urls"] = [_web_url(result)]
        evidence, page = best_evidence(result)
        if evidence:
            record["notes"] = [f"Evidence{f' (p. {page})' if page is not None else ''}: {evidence}"]
        records.append(record)
    return rispy.dumps(records)


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
