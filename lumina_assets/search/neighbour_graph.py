"""Corpus-graph score smoothing: `score'(p) = score(p) + alpha * the similarity-weighted mean fused score of p's k
nearest papers` (by the mean of their passage vectors). The graph is computed at index time and stored with the
index (`paper_neighbours`) for corpora up to `MAX_GRAPH_PAPERS` (docs/search-quality.md)."""

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
# only the best-fused papers are smoothed: smoothing every candidate ranked the same and cost three times as much
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
    """(neighbour rows, their cosine similarities), best first, for every row of a unit-vector matrix (exact, block
    by block)."""
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
    """Each paper's neighbours, best first, as arrays: `rows` (papers x stored neighbours) holds row numbers into
    `papers`, -1 where none, so an index's graph loads in a few vectorized steps."""

    def __init__(self, papers: list[str], rows: np.ndarray, sims: np.ndarray) -> None:
        self.papers = papers
        self.position = {p: i for i, p in enumerate(papers)}
        self.rows = rows
        self.sims = np.where(rows >= 0, sims, 0.0).astype(np.float32)

    @classmethod
    def build(cls, vectors: np.ndarray, passage_papers: Sequence[str], k: int = STORED_NEIGHBOURS):
        papers, matrix = paper_matrix(vectors, passage_papers)
        return cls(papers, *nearest(matrix, k))

    @property
    def neighbours(self) -> dict[str, tuple[list[str], list[float]]]:
        """The whole graph as ids (for writing it and for tests; search reads the arrays)."""
        return {
            p: (
                [self.papers[j] for j in row if j >= 0],
                [float(s) for j, s in zip(row, sims, strict=True) if j >= 0],
            )
            for p, row, sims in zip(self.papers, self.rows, self.sims, strict=True)
        }

    def smooth(
        self, scores: dict[str, float], alpha: float, k: int, depth: int = SMOOTHED_DEPTH
    ) -> dict[str, float]:
        """Each of the `depth` best-scored papers plus alpha x the similarity-weighted mean of its k neighbours'
        scores; the others keep theirs (smoothing only adds, so they stay below)."""
        if alpha <= 0 or not scores or k <= 0:
            return scores
        out = dict(scores)
        head = (
            heapq.nlargest(depth, scores.items(), key=lambda item: item[1])
            if depth < len(scores)
            else scores.items()
        )
        papers, position, get = self.papers, self.position, scores.get
        for paper_id, score in head:
            row = position.get(paper_id)
            if row is None:
                continue
            total = weight = 0.0
            for neighbour, similarity in zip(
                self.rows[row, :k].tolist(), self.sims[row, :k].tolist(), strict=True
            ):
                if neighbour >= 0 and similarity > 0:
                    total += similarity * get(papers[neighbour], 0.0)
                    weight += similarity
            if weight > 0:
                out[paper_id] = score + alpha * total / weight
        return out


def write_graph(db, graph: NeighbourGraph) -> None:
    """Replace the index's neighbour table."""
    neighbours = graph.neighbours
    data = pa.table(
        {
            "paper_id": list(neighbours),
            "neighbours": [ids for ids, _ in neighbours.values()],
            "similarities": pa.array([sims for _, sims in neighbours.values()], pa.list_(pa.float32())),
        }
    )
    db.create_table(GRAPH_TABLE, data=data, mode="overwrite")


def read_graph(db) -> NeighbourGraph | None:
    """The index's neighbour graph, or None (never built, or unreadable: search then does not smooth)."""
    import pyarrow.compute as pc

    from lumina_assets.indexing.table_ops import open_table

    try:
        table = open_table(db, GRAPH_TABLE)
        if table is None:
            return None
        rows = table.to_arrow()
        papers = rows["paper_id"].to_pylist()
        neighbours = rows["neighbours"].combine_chunks()
        similarities = rows["similarities"].combine_chunks()
        lengths = pc.list_value_length(neighbours).to_numpy(zero_copy_only=False)
        width = int(lengths.max()) if len(lengths) else 0
        # neighbour ids to row numbers in one vectorized lookup; a neighbour no longer in the graph: -1
        found = pc.index_in(pc.list_flatten(neighbours), value_set=rows["paper_id"].combine_chunks())
        flat = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        flat_sims = pc.list_flatten(similarities).to_numpy(zero_copy_only=False).astype(np.float32)
        matrix = np.full((len(papers), width), -1, dtype=np.int64)
        sims = np.zeros((len(papers), width), dtype=np.float32)
        row_of = np.repeat(np.arange(len(papers)), lengths)  # each list's entries, left-aligned in its row
        column = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        matrix[row_of, column] = flat
        sims[row_of, column] = flat_sims
        return NeighbourGraph(papers, matrix, sims)
    except Exception as error:  # an unreadable graph must not stop search: fusion alone answers
        log.warning("paper neighbour table unreadable, searching without smoothing: %s", error)
        return None


def graph_rows(db) -> int:
    """Papers the stored graph covers (0 when there is none)."""
    from lumina_assets.indexing.table_ops import open_table

    table = open_table(db, GRAPH_TABLE)
    return table.count_rows() if table is not None else 0


def keep_graph(db) -> bool:
    """Store the graph of a corpus small enough for an exact one when the stored graph misses papers; True when
    written."""
    from lumina_assets.indexing.lancedb_tables import PAPERS_TABLE, PASSAGES_TABLE
    from lumina_assets.indexing.table_ops import open_table, read_columns, vectors_from_arrow

    papers, passages = open_table(db, PAPERS_TABLE), open_table(db, PASSAGES_TABLE)
    count = papers.count_rows() if papers is not None else 0
    if count > MAX_GRAPH_PAPERS and graph_rows(db):
        # grown past the exact graph's size: a graph of the earlier papers would smooth them and not the new ones
        db.drop_table(GRAPH_TABLE)
        return False
    if not count or count > MAX_GRAPH_PAPERS or graph_rows(db) == count or passages is None:
        return False
    rows = read_columns(passages, ["paper_id", "vector"])
    if not len(rows["paper_id"]):
        return False
    write_graph(db, NeighbourGraph.build(vectors_from_arrow(rows["vector"]), rows["paper_id"].to_pylist()))
    return True


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
