"""Library labels in the index: an index built before tags and collections existed gains the columns in place (no
paper re-embedded), and a tag / collection filter then finds exactly the labelled papers."""

from __future__ import annotations

import polars as pl
from hashing_embedder import HashingEmbedder

from lumina_assets.indexing import index_rows
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine

PAPERS = [
    ("p1", "Graph neural networks for citation recommendation", "Graphs of citations recommend references."),
    ("p2", "Citation graphs in scholarly search", "Citation graphs help scholarly search engines."),
    ("p3", "Protein folding with attention", "Attention predicts residue contacts."),
]


def tables(labels: dict[str, tuple[list[str], list[str]]]):
    papers = pl.DataFrame(
        [
            {
                "paper_id": pid,
                "title": title,
                "abstract": abstract,
                "tags": labels.get(pid, ([], []))[0],
                "collections": labels.get(pid, ([], []))[1],
            }
            for pid, title, abstract in PAPERS
        ],
        schema={
            "paper_id": pl.String,
            "title": pl.String,
            "abstract": pl.String,
            "tags": pl.List(pl.String),
            "collections": pl.List(pl.String),
        },
    )
    passages = pl.DataFrame(
        [
            p.to_row()
            for pid, title, abstract in PAPERS
            for p in passages_for_paper(pid, title=title, abstract=abstract)
        ]
    )
    return passages, papers


class Counting(HashingEmbedder):
    def __init__(self):
        super().__init__()
        self.texts: list[str] = []

    def encode(self, texts, **kwargs):
        self.texts += list(texts)
        return super().encode(texts, **kwargs)


def test_an_older_index_gains_label_columns_without_reembedding(tmp_path):
    uri = str(tmp_path / "db")
    db = connect_lancedb(uri)
    embedder = Counting()
    passages, papers = tables({})
    indexing.index_corpus(db, passages, papers, embedder)
    table = indexing.open_table(db, indexing.PAPERS_TABLE)
    table.drop_columns(["tags", "collections", "library_labels"])  # as an index built before they existed
    assert "library_labels" not in indexing.open_table(db, indexing.PAPERS_TABLE).schema.names

    embedder.texts = []
    passages, papers = tables({"p1": (["To-Read", "gnn"], ["Thesis/Related work"]), "p2": (["to-read"], [])})
    stats = indexing.index_corpus(db, passages, papers, embedder)
    assert embedder.texts == []  # labels are metadata: no passage or title embedded again
    assert any("tags / collections" in note for note in stats.notes)

    engine = SearchEngine(uri, HashingEmbedder(), SearchConfig(), refresh_seconds=0)
    assert {c.paper_id for c in engine.search("citation graphs tag:to-read", k=10)} == {"p1", "p2"}
    assert [c.paper_id for c in engine.search("citation graphs tag:GNN", k=10)] == ["p1"]
    assert [c.paper_id for c in engine.search('citation graphs collection:"Related work"', k=10)] == ["p1"]
    assert [c.paper_id for c in engine.search("citation graphs collection:thesis", k=10)] == ["p1"]
    assert engine.search("citation graphs tag:protein", k=10) == []
    assert engine.last_trace.message == "no paper tagged protein in the index"


def test_unlabelled_papers_keep_their_row_hashes():
    _, papers = tables({})
    rows = indexing.paper_rows(papers)
    assert rows["library_labels"].to_list() == [[], [], []]
    assert index_rows.library_labels(["A b"], ["X/Y"]) == [
        "collection:x",
        "collection:x/y",
        "collection:y",
        "tag:a b",
    ]
