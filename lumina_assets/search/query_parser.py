"""Heuristic query parsing: explicit author / year constraints and natural-language cues, separated from the topic."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lumina_assets.core.names import last_name
from lumina_assets.search.text import WORD, stopwords

_YEAR = r"(1[89]\d{2}|20\d{2})"
_YEAR_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(rf"\b(?:published\s+)?between\s+{_YEAR}\s+(?:and|&)\s+{_YEAR}\b", re.I), "between"),
    (re.compile(rf"\bfrom\s+{_YEAR}\s+(?:to|until|till|through)\s+{_YEAR}\b", re.I), "between"),
    (re.compile(rf"\b(?:years?\s*:?\s*)?{_YEAR}\s*(?:-|–|—|\.\.|to)\s*{_YEAR}\b", re.I), "between"),
    (re.compile(rf"\b(?:published\s+)?(?:before|prior\s+to|earlier\s+than|pre)\s+{_YEAR}\b", re.I), "before"),
    (
        re.compile(rf"\b(?:published\s+)?(?:until|up\s+to|through|no\s+later\s+than)\s+{_YEAR}\b", re.I),
        "until",
    ),
    (re.compile(rf"\b(?:published\s+)?(?:after|later\s+than|post)\s+{_YEAR}\b", re.I), "after"),
    (
        re.compile(rf"\b(?:published\s+)?(?:since|from|starting\s+(?:in|from)|as\s+of)\s+{_YEAR}\b", re.I),
        "since",
    ),
    (re.compile(rf"\byear\s*(>=|<=|>|<|=|:)\s*{_YEAR}\b", re.I), "op"),
    (re.compile(rf"\b(?:published\s+)?(?:in|during)\s+(?:the\s+year\s+)?{_YEAR}\b", re.I), "in"),
]
_NAME = r"[A-Z][a-zA-Z'\u00C0-\u024F\-]+"
_AUTHOR_EXPLICIT = re.compile(r"\bauthor\s*:\s*(\"[^\"]+\"|'[^']+'|\S+)", re.I)
_VENUE_EXPLICIT = re.compile(r"\b(venue)\s*:\s*(\"[^\"]+\"|'[^']+'|\S+)", re.I)
_LABEL_EXPLICIT = re.compile(r"\b(tag|collection)\s*:\s*(\"[^\"]+\"|'[^']+'|\S+)", re.I)  # a library's labels
# "Cohan et al.", "Cohan et al. 2020", "Cohan et al. (2020)", "Cohan et al., 2020": the first author, and the year
_AUTHOR_ET_AL = re.compile(
    rf"\b((?:{_NAME}\s+)?{_NAME})\s+et\s+al\.?(?:,?\s*\(?{_YEAR}[a-z]?\)?(?![\w-]))?", re.U
)
# "X et al." names the first author: a paper with X further down earns this share of the author boost
CO_AUTHOR_SHARE = 0.25
_AUTHOR_BY = re.compile(
    rf"\b(?:papers?\s+|work\s+|articles?\s+|studies\s+)?by\s+((?:[A-Z]\.\s*)*{_NAME}(?:\s+{_NAME})?)", re.U
)


_YEAR_SYNTAX = re.compile(r"\s*years?\s*(?::|>=|<=|>|<|=)", re.I)
_EXPLICIT_YEAR = re.compile(r"\b(?:published|year)\b", re.I)
_PUBLICATION_WORDS = re.compile(
    r"\b(?:papers?|articles?|studies|publications?|literature|reviews?|preprints?|works?|research|published)\b",
    re.I,
)


def _is_statement(query: str) -> bool:
    """A declarative sentence (a claim pasted as the query) rather than a search request: ends with a full stop,
    has at least six words and does not talk about publications. Its years are content, not date filters."""
    stripped = query.strip()
    return stripped.endswith(".") and len(stripped.split()) >= 6 and not _PUBLICATION_WORDS.search(stripped)


@dataclass
class ParsedQuery:
    """What the parser understood. `text` is what retrieval sees (constraint phrases removed)."""

    original: str
    text: str
    authors: list[str] = field(default_factory=list)
    year_min: int | None = None
    year_max: int | None = None
    keywords: list[str] = field(default_factory=list)
    year_explicit: bool = False  # `year:2020..2023`, `year>=2016`: a filter, not a cue to boost
    explicit_authors: list[str] = field(default_factory=list)  # `author:Cohan`: a filter
    explicit_venues: list[str] = field(default_factory=list)  # `venue:"Nature Medicine"`: a filter
    explicit_tags: list[str] = field(default_factory=list)  # `tag:to-read`: a filter (reference library)
    explicit_collections: list[str] = field(default_factory=list)  # `collection:"Thesis/Ch 2"`: a filter
    first_authors: list[str] = field(default_factory=list)  # "Cohan et al.": cited as the first author

    @property
    def has_year(self) -> bool:
        return self.year_min is not None or self.year_max is not None

    def in_years(self, year: int) -> bool:
        """Whether `year` lies in the asked range (an open end is unbounded)."""
        return (self.year_min is None or year >= self.year_min) and (
            self.year_max is None or year <= self.year_max
        )

    def filters_in_words(self) -> str:
        """The explicit author / venue / tag / collection filters, as "no paper <this> in the index" reads."""
        wanted = [f"by {', '.join(self.explicit_authors)}"] if self.explicit_authors else []
        wanted += [f"in venue {', '.join(self.explicit_venues)}"] if self.explicit_venues else []
        wanted += [f"tagged {', '.join(self.explicit_tags)}"] if self.explicit_tags else []
        wanted += (
            [f"in collection {', '.join(self.explicit_collections)}"] if self.explicit_collections else []
        )
        return " and ".join(wanted)


def year_syntax(low: int | None, high: int | None) -> str | None:
    """A year range as explicit filter syntax: `year:2010..2015`, `year>=2010` or `year<=2015`."""
    if low is not None and high is not None:
        return f"year:{low}..{high}"
    if low is not None:
        return f"year>={low}"
    return f"year<={high}" if high is not None else None


def unquote(value: str) -> str:
    """A filter value without its one pair of enclosing quotes: apostrophes that belong to the value (`'90s`,
    `"'quoted'"`, `O'Brien`) are kept."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return value.strip()


def author_match(parsed: ParsedQuery, paper_authors) -> float:
    """How much of the author boost a paper earns: 1 when a cued author is among its authors (as the first author
    where the query cites "X et al."), `CO_AUTHOR_SHARE` when an "X et al." author is only a later author, else 0."""
    names = [last_name(a) for a in paper_authors or []]
    wanted = {last_name(a) for a in parsed.authors} - {""}
    if not names or not wanted & set(names):
        return 0.0
    first = {last_name(a) for a in parsed.first_authors}
    if names[0] in wanted or (wanted - first) & set(names):
        return 1.0
    return CO_AUTHOR_SHARE


_PAPER_NAME = re.compile(r"\s*([^\s:]{2,})\s*:\s|.*?\(([A-Z][^\s()]+)\)")


def without_paper_name(text: str, title: str | None) -> str:
    """`text` without the paper's short name: the one word before its title's colon ("SPECTER" in "SPECTER:
    Document-level …") or an acronym its title defines ("… Transformers (BERT)"); `text` itself when it has none."""
    match = _PAPER_NAME.match(title or "")
    if not match:
        return text
    name = re.escape(match.group(1) or match.group(2))
    rest = re.sub(rf"(?<![\w-]){name}(?:['’]s)?(?![\w-])", " ", text, flags=re.I)
    return re.sub(r"\s+", " ", rest).strip() if rest != text else text


def citation_only(parsed: ParsedQuery) -> bool:
    """Whether the query is an author citation and nothing else ("Cohan et al. 2020"): no topic words to match."""
    return bool(parsed.first_authors) and not parsed.keywords and not parsed.explicit_authors


def library_labels(parsed: ParsedQuery) -> list[str]:
    """The `tag:` / `collection:` filters as the index's library labels (indexing.index_rows.library_labels)."""
    tags = [f"tag:{t.strip().lower()}" for t in parsed.explicit_tags]
    paths = [
        "/".join(p.strip() for p in c.lower().split("/") if p.strip()) for c in parsed.explicit_collections
    ]
    return tags + [f"collection:{path}" for path in paths if path]


def parse_query(query: str, known_authors: Callable[[str], bool] | None = None) -> ParsedQuery:
    """Heuristic parse: explicit author syntax, "X et al.", "by X", year ranges. "by X" is ambiguous ("activated by
    Notch"), so it counts only when `known_authors(last_name)` says the index has such an author."""
    text, cited = _read_authors(query, known_authors)
    text, labels = _read_labels(text)
    text, year_min, year_max, year_explicit = _read_years(text, statement=_is_statement(query))
    if cited.year is not None and year_min is None and year_max is None:
        year_min = year_max = cited.year
    text = re.sub(r"\s+", " ", text).strip(" ,;")
    keywords = [w for w in WORD.findall(text.lower()) if w not in stopwords() and len(w) > 1]
    # "Cohan et al. 2020" alone: its names and year are what there is to match
    if not keywords and cited.first:
        text = re.sub(r"\s+", " ", re.sub(r"\bet\s+al\.?,?|[()]", " ", query)).strip(" ,;")
    return ParsedQuery(
        query,
        text,
        cited.all,
        year_min,
        year_max,
        keywords,
        year_explicit=year_explicit,
        explicit_authors=cited.explicit,
        explicit_venues=[v for v in labels["venue"] if v],
        explicit_tags=[t for t in labels["tag"] if t],
        explicit_collections=[c for c in labels["collection"] if c],
        first_authors=cited.first,
    )


@dataclass
class _Authors:
    """The authors a query names: all of them, the `author:` filters, the "X et al." first authors, and the
    year of the first "X et al. 2020" citation (a year cue for the cited paper)."""

    all: list[str] = field(default_factory=list)
    explicit: list[str] = field(default_factory=list)
    first: list[str] = field(default_factory=list)
    year: int | None = None


def _read_authors(text: str, known_authors: Callable[[str], bool] | None) -> tuple[str, _Authors]:
    """`author:X`, "X et al. (2020)" and "by X" (X a known author), each removed from the text."""
    found = _Authors()
    for pattern, kind in ((_AUTHOR_EXPLICIT, "explicit"), (_AUTHOR_ET_AL, "et_al"), (_AUTHOR_BY, "by")):
        for match in list(pattern.finditer(text)):
            name = unquote(match.group(1))
            if kind == "by" and (known_authors is None or not known_authors(last_name(name))):
                continue
            found.all.append(name)
            if kind == "explicit":
                found.explicit.append(name)
            if kind == "et_al":
                found.first.append(name)
                if match.group(2) and found.year is None:
                    found.year = int(match.group(2))
            text = text.replace(match.group(0), " ", 1)
    return text, found


def _read_labels(text: str) -> tuple[str, dict[str, list[str]]]:
    """`venue:X`, then `tag:X` / `collection:X` filters (a reference library's labels), removed from the text."""
    labels: dict[str, list[str]] = {"venue": [], "tag": [], "collection": []}
    for pattern in (_VENUE_EXPLICIT, _LABEL_EXPLICIT):
        for match in list(pattern.finditer(text)):
            labels[match.group(1).lower()].append(unquote(match.group(2)))
            text = text.replace(match.group(0), " ", 1)
    return text, labels


def _read_years(text: str, *, statement: bool) -> tuple[str, int | None, int | None, bool]:
    """Year ranges and cues ("between 2010 and 2015", "after 2018", `year>=2016`), removed from the text.
    Returns (text, year_min, year_max, year_explicit); a statement's years are content, not filters."""
    year_min = year_max = None
    year_explicit = False
    for pattern, kind in _YEAR_PATTERNS:
        match = pattern.search(text)
        if not match:
            continue
        if statement and not _EXPLICIT_YEAR.search(match.group(0)):
            continue  # "incidence fell from 2009 to 2014." states a fact: its years are content, not a filter
        year_min, year_max = _year_bounds(kind, match, year_min, year_max)
        year_explicit = year_explicit or bool(_YEAR_SYNTAX.match(match.group(0)))
        text = text.replace(match.group(0), " ", 1)
        if kind in ("between", "in", "op"):
            break
    return text, year_min, year_max, year_explicit


# (year_min, year_max) after a one-year cue; the bound it does not set is kept
_ONE_YEAR = {
    "before": lambda year, low, high: (low, year - 1),
    "until": lambda year, low, high: (low, year),
    "after": lambda year, low, high: (year + 1, high),
    "since": lambda year, low, high: (year, high),
    "in": lambda year, low, high: (year, year),
}
_OPERATORS = {">=": "since", ">": "after", "<=": "until", "<": "before"}  # `=` and `:` read as "in"


def _year_bounds(kind: str, match: re.Match, year_min: int | None, year_max: int | None):
    """(year_min, year_max) after one year pattern of `kind` matched."""
    if kind == "between":
        return tuple(sorted((int(match.group(1)), int(match.group(2)))))
    if kind == "op":
        kind, year = _OPERATORS.get(match.group(1), "in"), int(match.group(2))
    else:
        year = int(match.group(1))
    return _ONE_YEAR[kind](year, year_min, year_max)
