"""Questions about the seven shared PDFs, each answered by one section or one passage (`section_questions.jsonl`,
`named_questions.jsonl`:
`target` is a passage id, or a passage id without its `:<n>` for a whole section; `title_words` says whether the
query shares a word with the section title), and where a search shows the answer: the passages of its results in
the order shown (results by rank, each result's passages best first)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lumina_assets.corpus.local import pdf_metadata
from lumina_assets.parsing.pymupdf_parser import PyMuPdfParser

QUESTIONS = Path(__file__).with_name("section_questions.jsonl")
# questions that name a paper ("how does S2ORC link ..."), written from the parsed sections before any search
NAMED_QUESTIONS = Path(__file__).with_name("named_questions.jsonl")


def parse_pdfs(folder: Path) -> list:
    """(paper record, parsed paper) for each PDF of `folder`, in name order."""
    parser = PyMuPdfParser()
    return [
        (paper, parser.parse(pdf, paper.paper_id))
        for pdf in sorted(folder.glob("*.pdf"))
        for paper in [pdf_metadata(pdf)]
    ]


def load_questions(path: Path = QUESTIONS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def answers(target: str, passage_id: str) -> bool:
    return passage_id == target or passage_id.rsplit(":", 1)[0] == target


def answer_rank(engine, question: dict, k: int = 10) -> int | None:
    """The 1-based position of the first passage of the target among the passages shown, None if not shown."""
    shown = [p for context in engine.search(question["query"], k=k) for p in context.ranked_passage_ids]
    return next((i for i, p in enumerate(shown, 1) if answers(question["target"], p)), None)


def summary(ranks: list[int | None]) -> dict[str, float]:
    """MRR and nDCG@10 over the questions (the target counts once, at its first passage shown), and how many
    targets were shown first."""
    n = len(ranks)
    return {
        "mrr": sum(1 / r for r in ranks if r) / n,
        "ndcg@10": sum(1 / math.log2(r + 1) for r in ranks if r and r <= 10) / n,
        "first": sum(r == 1 for r in ranks),
        "shown": sum(r is not None for r in ranks),
    }
