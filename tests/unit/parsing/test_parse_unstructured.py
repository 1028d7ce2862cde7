"""The unstructured parser never returns nothing silently: a missing PDF extra / spaCy model and an empty
partition are both raised with the reason. (Decision: the third-party spaCy re-upload is not added to the
`tables` extra, because the offline "fast" strategy it enables finds no tables; only hi_res does, and hi_res
needs layout models from the Hugging Face hub.)"""

from __future__ import annotations

import importlib.util

import pytest
import unstructured.documents.elements as elements  # the tables extra, installed by `make install`

from lumina_assets.parsing.base import ParseFailure, ParserUnavailable
from lumina_assets.parsing.parsers import get_parser
from lumina_assets.parsing.unstructured_parser import UnstructuredParser, check_unstructured_available

FULL_STACK = all(importlib.util.find_spec(m) for m in ("unstructured_inference", "en_core_web_sm"))


@pytest.mark.skipif(FULL_STACK, reason="unstructured's PDF stack and spaCy model are installed here")
def test_missing_pdf_stack_or_model_is_reported_not_silent(shared_data):
    with pytest.raises(ParserUnavailable) as missing:
        check_unstructured_available()
    assert "unstructured" in missing.value.detail
    with pytest.raises(ParserUnavailable) as failure:
        get_parser("unstructured").parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert failure.value.reason == "parser_unavailable"


def test_empty_partition_is_a_failure_with_the_likely_cause(shared_data):
    parser = UnstructuredParser(partition=lambda **kwargs: [])
    with pytest.raises(ParseFailure) as failure:
        parser.parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert failure.value.reason == "empty_result"
    assert "text layer" in failure.value.detail and "spaCy" in failure.value.detail


def test_elements_become_sections_and_tables(shared_data):
    def partition(**kwargs):
        assert kwargs["infer_table_structure"] and kwargs["strategy"] == "hi_res"
        page = elements.ElementMetadata(page_number=3)
        table_meta = elements.ElementMetadata(
            page_number=3, text_as_html="<table><tr><td>85.5</td></tr></table>"
        )
        return [
            elements.Title("Construction of the Literature Graph in Semantic Scholar"),
            elements.Title("1 Introduction", metadata=page),
            elements.NarrativeText(
                "The goal of this work is to facilitate algorithmic discovery.", metadata=page
            ),
            elements.Footer("Proceedings of NAACL-HLT 2018", metadata=page),
            elements.FigureCaption("Table 1: Results of the ScienceParse system.", metadata=page),
            elements.Table("title 85.5", metadata=table_meta),
        ]

    paper = UnstructuredParser(partition=partition).parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert paper.title.startswith("Construction of the Literature Graph")
    assert [(s.title, s.page_start) for s in paper.sections] == [("1 Introduction", 3)]
    assert "Proceedings" not in paper.sections[0].text
    table = next(e for e in paper.elements if e.kind == "table" and e.content)
    assert table.content.startswith("<table>") and table.page == 3
    assert paper.page_count == 8
