"""Questions about the seven shared PDFs, each answered by one section (tests/support/section_questions.jsonl),
searched with the bundled MiniLM over the same passages indexed twice: as Lumina indexes them (a body passage's
section heading in its full-text and embedded text) and with the headings left out. The headings must bring the
answers up, and must not push down the answers to questions that share no word with their section's title.

Questions that name a paper (named_questions.jsonl, "how does S2ORC link ...") are searched on the headed index
with and without `passages_without_paper_name`: the word naming a paper must not choose its passages, and the
papers' ranking must not change."""

from __future__ import annotations

import polars as pl
import pytest
from section_questions import NAMED_QUESTIONS, answer_rank, load_questions, parse_pdfs, summary

from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.embedding import Embedder
from lumina_assets.parsing.chunking import model_token_counter, passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine

pytestmark = pytest.mark.slow
SETS = {"sections": load_questions(), "named": load_questions(NAMED_QUESTIONS)}


@pytest.fixture(scope="module")
def searched(shared_data, tmp_path_factory) -> dict[str, dict]:
    """{"headings" | "no headings", each also ", name counted": {"sections" | "named": answer ranks, "papers":
    each question's paper ranking}}."""
    count, papers, rows = model_token_counter(), [], []
    for paper, parsed in parse_pdfs(shared_data / "pdfs"):
        papers.append(
            {k: getattr(paper, k) for k in ("paper_id", "title", "abstract", "authors", "year", "doi")}
        )
        rows += [p.to_row() for p in passages_for_paper(paper.paper_id, parsed=parsed, count_tokens=count)]
    passages = pl.from_arrow(rows_to_table(rows, PASSAGE_SCHEMA))
    embedder, found = Embedder(), {}
    every = [q["query"] for questions in SETS.values() for q in questions]
    for name, frame in {
        "headings": passages,
        "no headings": passages.with_columns(pl.lit(None, dtype=pl.String).alias("section_title")),
    }.items():
        uri = str(tmp_path_factory.mktemp("sections") / "lancedb")
        indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder)
        configs = {
            name: SearchConfig(),
            f"{name}, name counted": SearchConfig(passages_without_paper_name=False),
        }
        for label, config in configs.items():
            engine = SearchEngine(uri, embedder, config, background_loading=False)
            found[label] = {s: [answer_rank(engine, q) for q in qs] for s, qs in SETS.items()}
            found[label]["papers"] = [engine.rank_documents(query) for query in every]
    return found


def test_section_headings_bring_the_answer_sections_up(searched):
    """Measured with the paper name counted, as before names were set aside: without its heading, § 2.4 loses
    to passages that name SPECTER; with names set aside (the default) headings still add their share."""
    questions = SETS["sections"]
    ranks = {name: searched[f"{name}, name counted"]["sections"] for name in ("headings", "no headings")}
    default = {name: summary(searched[name]["sections"])["mrr"] for name in ("headings", "no headings")}
    assert default["headings"] >= default["no headings"] + 0.03, default
    assert len(questions) >= 20
    with_headings, without = summary(ranks["headings"]), summary(ranks["no headings"])
    assert with_headings["mrr"] >= without["mrr"] + 0.03, (with_headings, without)
    assert with_headings["first"] > without["first"], (with_headings, without)
    untitled = [i for i, q in enumerate(questions) if not q["title_words"]]
    assert len(untitled) >= 5
    assert (
        summary([ranks["headings"][i] for i in untitled])["mrr"]
        >= summary([ranks["no headings"][i] for i in untitled])["mrr"]
    )
    distractors = next(  # § 2.4 Selecting Negative Distractors: its title holds the question's words
        i for i, q in enumerate(questions) if q["query"].startswith("how are negative distractors")
    )
    assert ranks["headings"][distractors] == 1 and ranks["no headings"][distractors] != 1


def test_the_readme_question_shows_specter_section_2_3(searched):
    """§ 2.3 never names SPECTER; with the name counted, § 2.5 and § 6 (three "SPECTER"s each) are shown."""
    readme = next(i for i, q in enumerate(SETS["sections"]) if q["query"] == "how does SPECTER use citations")
    assert searched["headings"]["sections"][readme] is not None
    assert searched["headings"]["sections"][readme] <= 2
    assert searched["headings, name counted"]["sections"][readme] is None


def test_a_paper_named_in_the_question_does_not_choose_its_passages(searched):
    assert len(SETS["named"]) >= 8
    for questions in ("named", "sections"):
        now, before = (
            summary(searched["headings"][questions]),
            summary(searched["headings, name counted"][questions]),
        )
        assert now["mrr"] >= before["mrr"] + (0.1 if questions == "named" else 0.0), (questions, now, before)
        assert now["first"] >= before["first"] + (2 if questions == "named" else 0), (questions, now, before)
    assert (
        searched["headings"]["papers"] == searched["headings, name counted"]["papers"]
    )  # paper ranking untouched
