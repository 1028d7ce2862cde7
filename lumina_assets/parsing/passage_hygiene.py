"""What a paper's body contributes to retrieval: back matter, publication boilerplate and bare pointers stay out, and
a stub under `MIN_WORDS` real words joins a neighbour (docs/pdf-papers.md). Abstracts and titles are never touched.
`printed_number` hides the internal section numbers that only keep passage ids unique (`s6`, `3-2`, `figure-5`)."""

from __future__ import annotations

import re

MIN_WORDS = 10
_WORD = re.compile(r"[^\W\d_]{2,}")
_BACK_MATTER = re.compile(
    r"^(?:\d+(?:\.\d+)*\.?\s+)?(?:"
    r"acknowledge?ments?|acknowledge?ment of funding|funding(?: information| sources?| statement)?|"
    r"financial (?:support|disclosure)|author(?:s['’]?)? contributions?|contributions|competing interests?|"
    r"conflicts? of interests?|declaration of (?:competing|conflicting) interests?|declarations?|"
    r"ethics approval(?: and consent to participate)?|consent for publication|"
    r"availability of (?:data|supporting data)(?: and materials?)?|data availability(?: statement)?|"
    r"references|bibliography|literature cited|works cited|publisher['’]s note|author details|abbreviations"
    r")\s*[.:]?$",
    re.IGNORECASE,
)
_POINTER = re.compile(
    r"^(?:see|cf\.?|as shown in|shown in|refer to)?\s*(?:the\s+)?"
    r"(?:fig(?:ure)?s?\.?|tab(?:le)?s?\.?|appendix|section|sec\.|eq(?:uation)?s?\.?|algorithm|listing)\s*"
    r"[\dA-Z][\w.\-–]*",
    re.IGNORECASE,
)
_INTERNAL_NUMBER = re.compile(r"^(?:s\d+|abstract|title|(?:figure|table|formula)-\d+)$")
_DUPLICATE_SUFFIX = re.compile(r"^(.+)-\d+$")


def real_words(text: str) -> int:
    """Words of two or more letters: what a reader reads (formula symbols, numbers and table cells do not count)."""
    return len(_WORD.findall(text or ""))


def is_back_matter(title: str | None) -> bool:
    """Acknowledgments, funding, contributions, competing interests, declarations, references: not findings."""
    return bool(title) and bool(_BACK_MATTER.match(" ".join(title.split())))


POINTER_MAX_WORDS = 15


def is_bare_pointer(text: str) -> bool:
    """One short sentence that only points elsewhere: "See Figure 6.", "Table 12 shows the examples of queries and
    corresponding papers in RealScholarQuery."."""
    stripped = " ".join((text or "").split())
    one_sentence = len(re.findall(r"[.!?](?:\s|$)", stripped)) <= 1
    states_a_finding = re.search(r"\b(?:that|whether|because|than)\b", stripped, re.I)  # "shows that X ..."
    short = real_words(stripped) < (MIN_WORDS if states_a_finding else POINTER_MAX_WORDS)
    return short and one_sentence and bool(_POINTER.match(stripped))


# Publication boilerplate printed beside the body (copyright, venue footer, licence, author notes): metadata for
# pdf_metadata, but as passages junk that matches queries about the venue or the licence.
_BOILERPLATE = re.compile(
    r"(?:©|\bc\u20dd)\s*(?:19|20)\d\d|\(c\)\s*(?:19|20)\d\d\s+(?-i:[A-Z])|^\W*copyright\b"
    r"|^\W*(?:in\s+)?proceedings of\b.{0,200}?\b(?:pages?|pp\.)\s*\d"
    r"|this (?:article|work|paper) is (?:distributed|licensed) under|permission to make digital or hard copies"
    r"|full list of author information|^\W*(?:equal contribution|these authors contributed equally)"
    r"|^\W*corresponding author\b|^arxiv:\d{4}\.\d{4,5}",
    re.IGNORECASE,
)
BOILERPLATE_MAX_WORDS = 120  # a longer paragraph is prose that happens to mention a licence or a venue


def is_boilerplate(paragraph: str) -> bool:
    """A short paragraph of publication boilerplate ("Proceedings of NAACL-HLT 2018, pages 84–91", "© 2016 De
    Marchis et al. Open Access ...", "∗Equal contribution")."""
    text = " ".join((paragraph or "").split())
    return real_words(text) <= BOILERPLATE_MAX_WORDS and bool(_BOILERPLATE.search(text))


def without_boilerplate(text: str) -> str:
    """A body section's text without its boilerplate paragraphs (paragraphs are separated by blank lines)."""
    paragraphs = re.split(r"\n\s*\n", text or "")
    kept = [p for p in paragraphs if not is_boilerplate(p)]
    return text if len(kept) == len(paragraphs) else "\n\n".join(kept)


def is_stub(text: str) -> bool:
    return real_words(text) < MIN_WORDS


def printed_number(section_number: str | None) -> str:
    """The section number as the paper prints it ("2.1", "A"), or "" for an unnumbered section, an element or the
    abstract; repeated numbers lose the `-2` suffix that kept their ids apart."""
    number = (section_number or "").strip()
    if _INTERNAL_NUMBER.match(number):
        return ""
    duplicate = _DUPLICATE_SUFFIX.match(number)
    if duplicate and re.match(r"^(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)*|0)$", duplicate.group(1)):
        number = duplicate.group(1)
    return "" if number == "0" else number
