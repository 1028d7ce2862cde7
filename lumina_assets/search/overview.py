"""A short overview of the top results where every sentence cites [n] a returned passage (numbered 1..N in result
order). An LLM writes it when one is configured, else it quotes each top result's best highlighted sentence; either
way a sentence citing nothing or a passage not returned is refused (listed in `refused`, never shown)."""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field

from lumina_assets.parsing.sentences import sentence_spans
from lumina_assets.search.evidence import TABLE_LABEL, table_caption, table_sentences

log = logging.getLogger(__name__)

CITATION = re.compile(r"\[(\d+(?:\s*[,;–-]\s*\d+)*)\]")
# A paper's own numeric citations ("[8][9][14]", "[3]-[5]", "[2, 7]"): kept out of a quote so that only Lumina's
# [n] markers (the returned passages) remain as links.
PAPER_CITATION = re.compile(
    r"\s*\[\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\](?:\s*[–-]?\s*\[\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\])*"
)
_CAPTION = re.compile(
    r"^\s*(?:figure|fig\.|table|tab\.|algorithm|listing)\s*[\dIVX]+[a-z]?(?:\s*[:.|—–-]|(?-i:\s+[A-Z][a-z]))",
    re.I,
)  # "Table 2: ..." or "Table 2 Statistics of ..." (PDF captions often have no colon); not "Table 2 shows ..."
_TRANSITION = re.compile(
    r"^\s*(?:(?:in|as (?:described|discussed|shown|mentioned) in) (?:the|this) (?:previous|next|following|present|"
    r"current|last|preceding)?\s*(?:section|chapter|subsection|part|paper)s?\b(?!\s+\d)|the (?:rest|remainder) of "
    r"(?:this|the) (?:paper|article|section)|this (?:section|chapter) (?:describes|presents|introduces|discusses)|"
    r"(?:next|below|above|now|here|then|finally),? we (?:describe|present|discuss|introduce|turn|detail|outline|"
    r"explain|show how)|we (?:now|next) (?:turn|describe|present|discuss|introduce)|(?:see|cf\.?) (?:section|"
    r"appendix|figure|table)\b)",
    re.I,
)
_REFERENCE_ENTRY = re.compile(
    r"(?:\bet al\.|\bIn Proceedings\b|\bProc\.|\barXiv preprint\b|\bpp\. \d|\bvol\. \d|\bdoi:)", re.I
)
MIN_QUOTE_WORDS = 3  # "Results." or "Conclusion" is a heading, not a finding
# A later result is quoted only when its sentence's cosine to the query is at least this share of the first quote's
# (evidence scores are normalized within each result, so they cannot say an unrelated result is unrelated)
RELATIVE_COSINE_FLOOR = 0.6
MAX_QUOTE_WORDS = 70


def strip_paper_citations(text: str) -> str:
    """The text without the paper's own bracketed citation numbers (author-year citations stay: they read as text)."""
    text = PAPER_CITATION.sub("", text or "")
    return re.sub(r"\s+([.,;:!?)])", r"\1", text).strip()


def refusal_reason(sentence: str) -> str | None:
    """Why a sentence may not be quoted in an overview, or None: a caption, a heading, a transition, a reference list
    entry, or more than one sentence's worth of text."""
    text = CITATION.sub("", sentence or "").strip()
    words = text.split()
    if _CAPTION.match(text):
        return "a figure or table caption"
    if _TRANSITION.match(text):
        return "a transition sentence, not a finding"
    if re.search(r"\b(?:19|20)\d\d[a-z]?\b", text) and (
        len(_REFERENCE_ENTRY.findall(text)) >= 2 or text.count(",") >= 6 and _REFERENCE_ENTRY.search(text)
    ):
        return "a reference list entry"
    if len(words) < MIN_QUOTE_WORDS or not re.search(r"[.!?][\"'”’)\]]?$", text):
        return "a heading or fragment, not a sentence"
    if len(words) > MAX_QUOTE_WORDS:
        return f"longer than one sentence ({len(words)} words)"
    return None


OVERVIEW_PROMPT = """You write a short overview (2 to 4 sentences) answering a researcher's search using only the
numbered passages below. Every sentence must end with the number(s) of the passage(s) it rests on, in square
brackets, e.g. [1] or [2, 3]. Cite only the numbers listed. Do not add facts the passages do not state.

Search: {query}

Passages:
{passages}

Overview:"""


@dataclass
class Reference:
    """A returned passage as the overview may cite it."""

    number: int
    passage_id: str
    paper_id: str
    title: str
    text: str
    evidence: str = ""  # its best highlighted sentence, if any
    evidence_score: float = 0.0
    evidence_cosine: float = 0.0  # that sentence's cosine to the query (0: not scored by the model)


@dataclass
class OverviewSentence:
    text: str
    citations: list[int]


@dataclass
class Overview:
    method: str  # "llm" | "extractive" | "none"
    label: str
    sentences: list[OverviewSentence] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)  # {"text", "reason"}
    model: str | None = None

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)

    def to_dict(self) -> dict:
        return {**asdict(self), "text": self.text}


def _numbers(group: str) -> list[int]:
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group):
        bounds = re.split(r"\s*[–-]\s*", part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            low, high = int(bounds[0]), int(bounds[1])
            numbers += list(range(low, high + 1)) if 0 < high - low < 20 else [low, high]
        elif part.isdigit():
            numbers.append(int(part))
    return numbers


def split_overview_sentences(text: str) -> list[str]:
    """Sentences of an overview; a citation after the full stop ("... done. [2]") stays with its sentence."""
    from lumina_assets.parsing.sentences import split_sentences

    merged: list[str] = []
    for sentence in split_sentences(text):
        if merged and re.fullmatch(r"(?:\[[\d,;\s–-]+\]\s*)+\.?", sentence):
            merged[-1] = f"{merged[-1]} {sentence}"
        else:
            merged.append(sentence)
    return merged


def check_citations(text: str, references: list[Reference]) -> tuple[list[OverviewSentence], list[dict]]:
    """(kept, refused): a sentence is kept only when it cites at least one passage and every number it cites is a
    returned passage's."""
    valid = {r.number for r in references}
    kept: list[OverviewSentence] = []
    refused: list[dict] = []
    for sentence in split_overview_sentences(text):
        cited = [n for group in CITATION.findall(sentence) for n in _numbers(group)]
        if not cited:
            refused.append({"text": sentence, "reason": "cites no returned passage"})
        elif any(n not in valid for n in cited):
            bad = sorted({n for n in cited if n not in valid})
            refused.append(
                {"text": sentence, "reason": f"cites [{', '.join(map(str, bad))}], not a returned passage"}
            )
        else:
            kept.append(OverviewSentence(sentence, list(dict.fromkeys(cited))))
    return kept, refused


def quotable_sentence(evidence: str) -> tuple[str | None, str | None]:
    """(sentence, None) for the first quotable sentence of an evidence span (the paper's own citation numbers removed),
    or (None, reason) when none is."""
    from lumina_assets.parsing.sentences import split_sentences

    reason = "no sentence"
    for sentence in split_sentences(strip_paper_citations(evidence)) or []:
        reason = refusal_reason(sentence)
        if reason is None:
            return sentence, None
    return None, reason


def table_row_quote(reference: Reference) -> str | None:
    """A table row quoted whole after its table's label and caption ("Table 5 (Results on X): Method: A; F1: 0.6."),
    so the figure says which table it is from; None when the evidence is not a table row."""
    spans, roles = table_sentences(reference.text)
    evidence = reference.evidence.strip()
    if "row" not in roles or not any(
        role == "row" and reference.text[start:end].strip() == evidence
        for (start, end), role in zip(spans, roles, strict=True)
    ):
        return None
    caption = table_caption(reference.text)
    label = TABLE_LABEL.match(caption)
    first = next(iter(sentence_spans(caption[label.end() :])), None) if label else None
    words = caption[label.end() :][first[0] : first[1]].strip(" .…").split() if first else []
    title = " ".join(words[:12]) + (" …" if len(words) > 12 else "")
    row = strip_paper_citations(evidence)
    if not label or len(row.split()) > MAX_QUOTE_WORDS:
        return None
    return f"{label.group(0).strip()} ({title}): {row}" if title else f"{label.group(0).strip()}: {row}"


def extractive_overview(references: list[Reference], max_sentences: int = 3) -> Overview:
    """The best quotable highlighted sentence of the first `max_sentences` results (one per paper), each citing its
    passage; a refused sentence makes the paper's next best passage tried (`refusal_reason`,
    `RELATIVE_COSINE_FLOOR`)."""
    candidates: dict[str, list[Reference]] = {}  # per paper, in result order
    for reference in references:
        if reference.evidence:
            candidates.setdefault(reference.paper_id, []).append(reference)
    kept: list[OverviewSentence] = []
    refused: list[dict] = []
    first_cosine = 0.0  # of the first quote; later quotes must come close to it
    for options in candidates.values():
        for reference in sorted(options, key=lambda r: -r.evidence_score):
            sentence = table_row_quote(reference)
            reason = None
            if sentence is None:
                sentence, reason = quotable_sentence(reference.evidence)
            if sentence is None:
                refused.append({"text": reference.evidence.strip(), "reason": reason})
                continue
            if kept and first_cosine > 0 and reference.evidence_cosine < RELATIVE_COSINE_FLOOR * first_cosine:
                refused.append(
                    {
                        "text": sentence,
                        "reason": f"less related to the search than the first quote (cosine "
                        f"{reference.evidence_cosine:.2f} against {first_cosine:.2f})",
                    }
                )
                continue  # another passage of the paper may be closer to the search (scores are not cosines)
            if not kept:
                first_cosine = reference.evidence_cosine
            kept.append(OverviewSentence(f"{sentence} [{reference.number}]", [reference.number]))
            break
        if len(kept) >= max_sentences:
            break
    return Overview(
        method="extractive",
        label="Extractive overview: the best highlighted sentence of each top result, quoted (no LLM configured)",
        sentences=kept,
        refused=refused,
    )


def llm_overview(client, query: str, references: list[Reference], max_chars: int = 700) -> Overview:
    """The LLM's overview, checked; falls back to the extractive one when the call fails or nothing survives."""
    listing = "\n".join(
        f"[{r.number}] ({r.title}) {strip_paper_citations(r.text)[:max_chars]}" for r in references
    )
    try:
        reply = client.complete(
            OVERVIEW_PROMPT.format(query=query, passages=listing), temperature=0.0, max_tokens=400
        )
    except Exception as error:  # an LLM failure never fails a search
        log.warning("overview LLM failed (%s): extractive overview instead", error)
        fallback = extractive_overview(references)
        fallback.refused.append({"text": "", "reason": f"LLM call failed: {type(error).__name__}"})
        return fallback
    kept, refused = check_citations(reply.text.strip(), references)
    screened = []
    for sentence in kept:  # the same rules as for a quote
        reason = refusal_reason(sentence.text)
        if reason is None:
            screened.append(sentence)
        else:
            refused.append({"text": sentence.text, "reason": reason})
    kept = screened
    if not kept:
        fallback = extractive_overview(references)
        fallback.refused = refused + fallback.refused
        return fallback
    return Overview(
        method="llm",
        label=f"Overview written by {getattr(client, 'label', 'an LLM')}; every sentence cites a returned passage",
        sentences=kept,
        refused=refused,
        model=getattr(client, "model", None),
    )


def build_overview(query: str, references: list[Reference], client=None) -> Overview:
    if not references:
        return Overview(method="none", label="No overview: nothing was returned")
    if client is not None and not getattr(client, "is_offline", False):
        return llm_overview(client, query, references)
    return extractive_overview(references)
