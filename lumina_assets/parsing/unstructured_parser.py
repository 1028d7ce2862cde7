"""unstructured's `partition_pdf` (optional `tables` extra), used above all for tables. Offline it would silently
return nothing (no spaCy model, no hub layout models): that is raised as ParserUnavailable with the fix."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from lumina_assets.core.schemas import Element, ParsedPaper, Section
from lumina_assets.parsing.base import ParseFailure, ParserUnavailable, ensure_unique_numbers
from lumina_assets.parsing.preflight import FileLimits

_SKIP = {"Header", "Footer", "PageNumber", "PageBreak", "Image"}
_TEXT = {"NarrativeText", "Text", "ListItem", "UncategorizedText", "Address", "EmailAddress", "CodeSnippet"}
STRATEGY = "hi_res"  # the offline "fast" strategy finds no tables


def check_unstructured_available() -> None:
    """Raise ParserUnavailable naming what is missing; cheap (imports only)."""
    if importlib.util.find_spec("unstructured") is None:
        raise ParserUnavailable("unstructured is not installed: pip install -e '.[tables]'")
    if importlib.util.find_spec("unstructured_inference") is None:
        raise ParserUnavailable(
            "unstructured's PDF partitioning needs unstructured-inference (the unstructured[pdf] extra), "
            "which is not installed here"
        )
    if importlib.util.find_spec("en_core_web_sm") is None:
        raise ParserUnavailable(
            "unstructured needs spaCy's en_core_web_sm model; without it, offline, partition_pdf returns no "
            "elements at all. Install it with `python -m spacy download en_core_web_sm`"
        )


@dataclass(kw_only=True, eq=False)
class UnstructuredParser(FileLimits):
    name: ClassVar[str] = "unstructured"
    version: ClassVar[str] = "1.0"
    partition: Callable | None = None  # injectable for tests of the empty-result guard

    def parse(self, path: Path | str, paper_id: str) -> ParsedPaper:
        with self.open_checked(path) as doc:
            page_count = doc.page_count
            has_text = any(page.get_text("text").strip() for page in doc)
        partition = self.partition
        if partition is None:
            check_unstructured_available()
            from unstructured.partition.pdf import partition_pdf as partition
        try:
            elements = partition(
                filename=str(path), strategy=STRATEGY, infer_table_structure=True, languages=["eng"]
            )
        except (OSError, ImportError, RuntimeError) as exc:
            # hi_res without its layout model (no network to the hub) and similar environment problems.
            raise ParserUnavailable(f"unstructured {STRATEGY} failed: {type(exc).__name__}: {exc}") from None
        if not elements:
            detail = "the PDF has a text layer" if has_text else "the PDF has no text layer either"
            raise ParseFailure(
                "empty_result",
                f"unstructured ({STRATEGY}) returned no elements although {detail}; "
                "this is what a missing spaCy model or layout model looks like offline",
            )
        paper = self._to_paper(elements, paper_id)
        paper.page_count = page_count
        return paper

    def _to_paper(self, elements, paper_id: str) -> ParsedPaper:
        sections: list[Section] = []
        current = Section(number="0", title="", text="")
        paragraphs: list[str] = []
        parsed_elements: list[Element] = []
        title = ""

        def close() -> None:
            current.text = "\n\n".join(paragraphs)
            if current.text or current.title:
                sections.append(current)

        for element in elements:
            category = getattr(element, "category", type(element).__name__)
            text = (getattr(element, "text", "") or "").strip()
            metadata = getattr(element, "metadata", None)
            page = getattr(metadata, "page_number", None)
            if category in _SKIP or not text:
                continue
            if category == "Title":
                if not title and not sections and not paragraphs:
                    title = text
                    continue
                close()
                current = Section(number="", title=text, text="", page_start=page, page_end=page)
                paragraphs = []
            elif category == "Table":
                html = getattr(metadata, "text_as_html", None)
                parsed_elements.append(
                    Element(
                        kind="table",
                        label=None,
                        caption="",
                        content=html or text,
                        page=page,
                        section_number=current.number or None,
                    )
                )
            elif category == "FigureCaption":
                kind = "table" if text.lower().startswith("table") else "figure"
                parsed_elements.append(Element(kind=kind, label=None, caption=text, page=page))
            elif category == "Formula":
                parsed_elements.append(
                    Element(kind="formula", label=None, caption="", content=text, page=page)
                )
            elif category in _TEXT:
                paragraphs.append(text)
                current.page_start = current.page_start or page
                current.page_end = page
        close()
        return ParsedPaper(
            paper_id=paper_id,
            parser=self.name,
            title=title,
            sections=ensure_unique_numbers(sections),
            elements=parsed_elements,
        )
