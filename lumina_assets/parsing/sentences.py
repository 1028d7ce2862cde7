"""Sentences of a text: the one segmenter every stage uses (chunking, sentence vectors, evidence, the judge)."""

from __future__ import annotations


def split_sentences(text: str) -> list[str]:
    """Sentences via sentencex (Wikimedia's rule-based segmenter: keeps "et al.", "Fig. 3", "e.g." and decimals
    inside their sentence), whitespace-trimmed, empties dropped."""
    import sentencex

    text = text.strip()
    if not text:
        return []
    return [s.strip() for s in sentencex.segment("en", text) if s.strip()]


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


def last_sentence(text: str) -> str:
    """The last complete sentence of `text` (what introduces a display formula), at most 400 characters."""
    sentences = split_sentences(" ".join((text or "").split())[-2000:])
    return sentences[-1][-400:] if sentences else ""
