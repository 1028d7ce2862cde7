"""Tables of the shared PDFs as answers: the header row stays with its table (not spliced into a text passage),
stacked tables keep their own rows, and every table passage carries its label, caption and column names with its
rows written as "column: value". Expected values were read off the PDFs' pages."""

from __future__ import annotations

import pytest

from lumina_assets.parsing.chunking import passages_for_paper, render_table, table_rows
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser

PDFS = [
    "0046d83a-edd6-4631-b57c-755cdcce8b7f",
    "2020.acl-main.207",
    "2020.acl-main.447",
    "2304.02623v1",
    "N18-3011",
    "papermage",
    "pasa",
]


@pytest.fixture(scope="module")
def parsed(shared_data):
    return {name: PyMuPdfParser().parse(shared_data / "pdfs" / f"{name}.pdf", name) for name in PDFS}


@pytest.fixture(scope="module")
def passages(parsed):
    return {name: passages_for_paper(name, parsed=paper) for name, paper in parsed.items()}


def _table(parsed, name, label):
    return next(e for e in parsed[name].elements if e.kind == "table" and e.label == label)


@pytest.mark.parametrize(
    ("name", "label", "header", "row"),
    [
        (
            "pasa",
            "Table 5",
            ["Method", "Crawler Recall", "Precision", "Recall", "Recall@100", "Recall@50", "Recall@20"],
            ["Google Scholar", "-", "-", "-", "0.1130", "0.0970", "0.0609"],
        ),
        (
            "pasa",
            "Table 6",
            ["Method", "Crawler Recall", "Precision", "Recall", "Recall@100", "Recall@50", "Recall@20"],
            ["Google Scholar", "-", "-", "-", "0.2809", "0.2155", "0.1514"],
        ),
        ("pasa", "Table 7", ["Method", "Precision", "Recall", "F1"], ["GPT-4o", "0.96", "0.69", "0.80"]),
        (
            "2020.acl-main.207",
            "Table 2",
            ["", "CLS", "USR", "CITE", "REC", "Avg."],  # no name over the row labels: an empty first cell
            ["SPECTER", "84.2", "88.4", "91.5", "36.9", "80.0"],
        ),
        ("2020.acl-main.447", "Table 3", ["Total papers", "81.1M"], ["Papers w/ PDF", "28.9M (35.6%)"]),
        (
            "2020.acl-main.447",
            "Table 4",
            ["Statistic", "GROBID", "LATEX"],
            ["Paragraphs (abstract)", "1.1", "-"],
        ),
        (
            "2020.acl-main.447",
            "Table 6",
            ["Evaluated task", "Title", "Authors"],
            ["Paper clustering", "0.93", "0.89"],
        ),
    ],
)
def test_tables_keep_their_header_and_their_own_rows(parsed, name, label, header, row):
    rows = table_rows(_table(parsed, name, label).content)
    assert rows[0] == header
    assert row in rows


def test_header_words_are_not_spliced_into_text(passages):
    """The header rows of PaSa's Tables 5 and 6 and SPECTER's Table 2 were text passage content ("...manual query
    submis- Method Crawler Recall Precision Recall Recall@100 Recall@50 Recall@20 sion, we evaluate...")."""
    spliced = {
        "pasa": "Recall@100 Recall@50 Recall@20",
        "2020.acl-main.207": "CLS USR CITE REC Avg.",
    }
    for name, words in spliced.items():
        text = [p for p in passages[name] if p.kind == "text"]
        assert text and not [p.passage_id for p in text if words in p.text]
    pasa_text = " ".join(p.text for p in passages["pasa"] if p.kind == "text")
    assert "Due to the need for manual query submission, we evaluate only 100 randomly sampled" in pasa_text


def test_the_answer_row_reads_as_column_value_pairs_beside_its_caption(passages):
    table5 = [p for p in passages["pasa"] if p.kind == "table" and p.section_title == "Table 5"]
    assert table5
    for passage in table5:
        assert passage.text.startswith("Table 5 Results on AutoScholarQuery test set.")
        assert (
            "Columns: Method | Crawler Recall | Precision | Recall | Recall@100 | Recall@50 | Recall@20."
            in (passage.text)
        )
    answer = [p for p in table5 if "0.0609" in p.text]
    assert len(answer) == 1
    assert (
        "Method: Google Scholar; Recall@100: 0.1130; Recall@50: 0.0970; Recall@20: 0.0609." in answer[0].text
    )


def test_every_table_passage_with_rows_opens_with_its_label(passages):
    checked = 0
    for name in PDFS:
        for passage in passages[name]:
            if passage.kind != "table" or not (
                " | " in passage.text or ": " in passage.text.split(". ", 1)[-1]
            ):
                continue
            if passage.text.startswith(passage.section_title):
                checked += 1
                continue
            # only a long caption's own continuation may open otherwise, and it holds no row
            assert " | " not in passage.text and "Columns:" not in passage.text, passage.passage_id
    assert checked >= 30  # the shared PDFs hold 33 such passages (whitespace tokens)


def test_render_table_groups_spanning_headers_and_leaves_prose_tables_alone():
    content = "\n".join(
        [
            " | AutoScholarQuery | RealScholarQuery",
            "Method",
            " | Recall | Precision | Recall | Precision",
            "PaSa-7b | 0.7931 | 0.1448 | 0.7071 | 0.5146",
        ]
    )
    heading, rows = render_table(content)
    assert (
        heading
        == "Columns: AutoScholarQuery | RealScholarQuery; Method; Recall | Precision | Recall | Precision."
    )
    assert rows == [
        "PaSa-7b; AutoScholarQuery Recall: 0.7931; AutoScholarQuery Precision: 0.1448; "
        "RealScholarQuery Recall: 0.7071; RealScholarQuery Precision: 0.5146."
    ]
    markdown = "|Model|F1|Recall@20|\n|---|---|---|\n|SciBERT|79.7|-|\n"
    assert render_table(markdown) == ("Columns: Model | F1 | Recall@20.", ["Model: SciBERT; F1: 79.7."])
    # a row whose cells do not line up with the names stays as printed
    assert render_table("Name | Value\nα | (Equation 1) | 1.5") == (
        "Columns: Name | Value.",
        ["α | (Equation 1) | 1.5."],
    )
    prompt = "Searched Paper:\nTitle: {title}\nAbstract: {abstract}"
    assert render_table(prompt) == ("", ["Searched Paper:.", "Title: {title}.", "Abstract: {abstract}."])


@pytest.mark.parametrize(
    ("name", "row"),
    [
        # a header row over the value columns only: the row labels keep no name
        ("2020.acl-main.207", "SPECTER; CLS: 84.2; USR: 88.4; CITE: 91.5; REC: 36.9; Avg.: 80.0."),
        # two header rows, "CS | Bio" spanning "prec. | yield" twice
        ("N18-3011", "Statistical; CS prec.: 98.4; CS yield: 712; Bio prec.: 94.4; Bio yield: 928."),
        ("2020.acl-main.447", "Statistic: Paragraphs (body); GROBID: 9.9; LATEX: 93.3*."),
    ],
)
def test_rows_are_named_by_the_columns_they_sit_under(passages, name, row):
    assert any(row in p.text for p in passages[name] if p.kind == "table")
