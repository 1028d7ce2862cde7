"""PDF titles without spacing artefacts: letter-spaced logos and arXiv stamps stay out, a title's short last line
stays in; checked on every PDF in ../shared/data/pdfs through both title paths (local metadata and the parser)."""

from __future__ import annotations

import pytest

from lumina_assets.corpus.local import pdf_metadata
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser
from lumina_assets.parsing.titles import (
    clean_title,
    collapse_letter_spacing,
    is_letter_spaced,
    usable_title_line,
)

EXPECTED = {
    "0046d83a-edd6-4631-b57c-755cdcce8b7f.pdf": "Multi-contact functional electrical stimulation for hand opening: "
    "electrophysiologically driven identification of the optimal stimulation site",
    "2020.acl-main.207.pdf": "SPECTER: Document-level Representation Learning using Citation-informed Transformers",
    "2020.acl-main.447.pdf": "S2ORC: The Semantic Scholar Open Research Corpus",
    "2304.02623v1.pdf": "Beyond Summarization: Designing AI Support for Real-World Expository Writing Tasks",
    "N18-3011.pdf": "Construction of the Literature Graph in Semantic Scholar",
    "papermage.pdf": "PaperMage: A Unified Toolkit for Processing, Representing, and Manipulating Visually-Rich "
    "Scientific Documents",
    "pasa.pdf": "PaSa: An LLM Agent for Comprehensive Academic Paper Search",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_titles_of_the_shared_pdfs(shared_data, name):
    path = shared_data / "pdfs" / name
    assert pdf_metadata(path).title == EXPECTED[name]
    assert PyMuPdfParser().parse(path, "p").title == EXPECTED[name]


def test_title_hygiene_helpers():
    assert is_letter_spaced(["Pa", "per", " S", "e", "a", "rch"])
    assert not is_letter_spaced(["PaSa:", " ", "An LLM Agent for Comprehensive Academic Paper Search"])
    assert not usable_title_line("arXiv:2501.10120v1 [cs.IR] 17 Jan 2025")
    assert not usable_title_line("A rotated line", direction=(0.0, -1.0))
    assert clean_title("Pa Sa arXiv:2501.10120v1 [cs.IR] 17 Jan 2025") == "Pa Sa"
    assert collapse_letter_spacing("D E E P  L E A R N I N G") == "DEEP LEARNING"
    assert collapse_letter_spacing("A Study of It in AI") == "A Study of It in AI"
