"""What the index reads of a passage: a body passage's section heading goes into the full-text and embedded text
(after the paper title) and never into the text shown; abstracts, figures, tables, formulas and passages without a
section title are indexed byte for byte as before, so collections of abstracts (SciFact, CISI) index and rank as
they did."""

from __future__ import annotations

import polars as pl

from lumina_assets.indexing.index_rows import passage_rows
from lumina_assets.indexing.lancedb_tables import IndexConfig

TITLE = "SPECTER: Document-level Representation Learning using Citation-informed Transformers"
PASSAGES = [  # (kind, section title, text)
    (
        "text",
        "Citation-Based Pretraining Objective",
        "A citation from one document to another suggests relatedness.",
    ),
    ("abstract", "Abstract", "We propose SPECTER, a new method to generate document-level embeddings."),
    ("table", "Table 1", "Table 1 Results on the SciDocs benchmark. Columns: Model | CLS."),
    ("text", None, "A passage of a section the parser found no heading for."),
    ("text", "Inference", "Inference time needs no citations."),  # the text opens with its heading already
]


def _rows(config: IndexConfig | None = None) -> pl.DataFrame:
    passages = pl.DataFrame(
        {
            "passage_id": [f"p#{i}:0" for i in range(len(PASSAGES))],
            "paper_id": ["p"] * len(PASSAGES),
            "kind": [kind for kind, _, _ in PASSAGES],
            "section_number": [None] * len(PASSAGES),
            "section_title": [section for _, section, _ in PASSAGES],
            "text": [text for _, _, text in PASSAGES],
            "prev_id": [None] * len(PASSAGES),
            "next_id": [None] * len(PASSAGES),
        },
        schema_overrides={c: pl.String for c in ("section_number", "section_title", "prev_id", "next_id")},
    )
    papers = pl.DataFrame({"paper_id": ["p"], "title": [TITLE]})
    return passage_rows(passages, papers, config or IndexConfig(), "model")


def test_a_body_passage_is_indexed_under_its_section_heading_but_shown_without_it():
    row = _rows().row(0, named=True)
    text = PASSAGES[0][2]
    assert row["embed_text"] == f"{TITLE}. Citation-Based Pretraining Objective. {text}"
    assert row["search_text"] == f"{TITLE}\nCitation-Based Pretraining Objective\n{text}"
    assert row["text"] == text and row["section_title"] == "Citation-Based Pretraining Objective"


def test_passages_without_a_heading_are_indexed_exactly_as_before():
    """The index text of an abstract, a table, an untitled section and a passage that opens with its heading:
    the title-prefixed forms the index has always held, so their hashes (and vectors) do not change."""
    rows = _rows()
    for index in range(1, len(PASSAGES)):
        row = rows.row(index, named=True)
        assert row["embed_text"] == f"{TITLE}. {row['text']}", row["kind"]
        assert row["search_text"] == f"{TITLE}\n{row['text']}", row["kind"]
    assert rows["text_hash"].n_unique() == rows.height
