"""Corpus-graph score smoothing: a paper's fused score plus a share of its nearest neighbours' fused scores.

The cluster hypothesis (papers close to each other answer the same questions) turned into one step after fusion:
`score'(p) = score(p) + alpha * mean over p's k nearest papers of their fused score` (weighted by cosine
similarity; a neighbour no retriever returned counts 0). The neighbours come from the corpus's own vectors (a
paper's vector: the mean of its passage vectors), computed once at index time and stored with the index
(`paper_neighbours` table), so a query only looks them up.

Whether it helps depends on the corpus: where a question has many relevant papers that resemble each other it
lifts them together (CISI, 1,460 abstracts, ~41 relevant per question: nDCG@10 +0.014 at k = 3, alpha = 0.3);
where a question has one relevant paper it changes little (SciFact train: -0.002 to +0.002). So it is off by
default (`SearchConfig.neighbour_smoothing`). The index-time tuner cannot choose it: its pseudo-queries have one
relevant paper each, and with the graph built from their own withheld-sentence vectors the gain they show is noise
(-0.004 to +0.008 between samples on both collections). The graph is kept for corpora up to `MAX_GRAPH_PAPERS`.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

GRAPH_TABLE = "paper_neighbours"
STORED_NEIGHBOURS = 10  # neighbours kept per paper; smoothing reads the first `smoothing_neighbours` of them
MAX_GRAPH_PAPERS = 50_000  # above this the exact graph costs too much at index time; smoothing is not offered
# only the best-fused papers are smoothed (the top 50 or all ~300 candidates gave the same nDCG@10 on SciFact and
# CISI): 0.4 instead of 1.2 ms a query
SMOOTHED_DEPTH = 100


def paper_matrix(vectors: np.ndarray, passage_papers: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """(paper ids, one unit vector per paper: the mean of its passage vectors), papers in first-seen order."""
    position: dict[str, int] = {}
    rows = np.fromiter(
        (position.setdefault(p, len(position)) for p in passage_papers),
        dtype=np.int64,
        count=len(passage_papers),
    )
    sums = np.zeros((len(position), vectors.shape[1]), dtype=np.float32)
    np.add.at(sums, rows, np.asarray(vectors, dtype=np.float32))
    sums /= np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return list(position), sums


def nearest(
    matrix: np.ndarray, k: int = STORED_NEIGHBOURS, block: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """(neighbour rows, their cosine similarities), best first, for every row of a unit-vector matrix (exact,
    computed block by block so memory stays at block x rows)."""
    n = len(matrix)
    k = max(0, min(k, n - 1))
    ids = np.zeros((n, k), dtype=np.int64)
    sims = np.zeros((n, k), dtype=np.float32)
    if k == 0:
        return ids, sims
    for start in range(0, n, block):
        part = matrix[start : start + block] @ matrix.T
        part[np.arange(len(part)), np.arange(start, start + len(part))] = -np.inf  # not its own neighbour
        top = np.argpartition(-part, k - 1, axis=1)[:, :k]
        values = np.take_along_axis(part, top, 1)
        order = np.argsort(-values, axis=1, kind="stable")
        ids[start : start + len(part)] = np.take_along_axis(top, order, 1)
        sims[start : start + len(part)] = np.take_along_axis(values, order, 1)
    return ids, sims


class NeighbourGraph:
    """paper id -> (neighbour ids, similarities), best first."""

    def __init__(self, neighbours: dict[str, tuple[list[str], list[float]]]) -> None:
        self.neighbours = neighbours

    @classmethod
    def build(cls, vectors: np.ndarray, passage_papers: Sequence[str], k: int = STORED_NEIGHBOURS):
        papers, matrix = paper_matrix(vectors, passage_papers)
        ids, sims = nearest(matrix, k)
        return cls(
            {p: ([papers[j] for j in row], s.tolist()) for p, row, s in zip(papers, ids, sims, strict=True)}
        )

    def __len__(self) -> int:
        return len(self.neighbours)

    def smooth(
        self, scores: dict[str, float], alpha: float, k: int, depth: int = SMOOTHED_DEPTH
    ) -> dict[str, float]:
        """Each of the `depth` best-scored papers plus alpha x the similarity-weighted mean of its k neighbours'
        scores; the others keep theirs (smoothing only adds, so they stay below)."""
        if alpha <= 0 or not scores:
            return scores
        out = dict(scores)
        head = (
            heapq.nlargest(depth, scores.items(), key=lambda item: item[1])
            if depth < len(scores)
            else scores.items()
        )
        for paper_id, score in head:
            ids, sims = self.neighbours.get(paper_id, ((), ()))
            total = weight = 0.0
            for neighbour, similarity in zip(ids[:k], sims[:k], strict=False):
                if similarity > 0:
                    total += similarity * scores.get(neighbour, 0.0)
                    weight += similarity
            out[paper_id] = score + alpha * total / weight if weight > 0 else score
        return out


def write_graph(db, graph: NeighbourGraph) -> None:
    """Replace the index's neighbour table."""
    papers = list(graph.neighbours)
    data = pa.table(
        {
            "paper_id": papers,
            "neighbours": [graph.neighbours[p][0] for p in papers],
            "similarities": pa.array([graph.neighbours[p][1] for p in papers], pa.list_(pa.float32())),
        }
    )
    db.create_table(GRAPH_TABLE, data=data, mode="overwrite")


def read_graph(db) -> NeighbourGraph | None:
    """The index's neighbour graph, or None (never built, or unreadable: search then does not smooth)."""
    from lumina_assets.indexing.table_ops import open_table

    try:
        table = open_table(db, GRAPH_TABLE)
        if table is None:
            return None
        rows = table.to_arrow()
        return NeighbourGraph(
            {
                p: (n, s)
                for p, n, s in zip(
                    rows["paper_id"].to_pylist(),
                    rows["neighbours"].to_pylist(),
                    rows["similarities"].to_pylist(),
                    strict=True,
                )
            }
        )
    except Exception as error:  # an unreadable graph must not stop search: fusion alone answers
        log.warning("paper neighbour table unreadable, searching without smoothing: %s", error)
        return None


def graph_rows(db) -> int:
    """Papers the stored graph covers (0 when there is none)."""
    from lumina_assets.indexing.table_ops import open_table

    table = open_table(db, GRAPH_TABLE)
    return table.count_rows() if table is not None else 0


class GraphCache:
    """The graph of an engine's index, re-read only when the table's version changes."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self.graph: NeighbourGraph | None = None

    def get(self, db) -> NeighbourGraph | None:
        from lumina_assets.indexing.table_ops import open_table

        try:
            table = open_table(db, GRAPH_TABLE)
            key = None if table is None else (id(db), table.version)
        except Exception:
            key = None
        if key != self._key:
            self._key, self.graph = key, (read_graph(db) if key is not None else None)
        return self.graph
