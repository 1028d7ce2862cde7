"""Search tuned to a corpus by the corpus itself: at index time, pseudo-queries (`indexing.pseudo_queries`) are
searched with every candidate setting, and a setting replaces the global defaults only when it beats them on
pseudo-queries it was not chosen on, by more than sampling noise.

How a setting is scored: the corpus (or a sample of at most `MAX_TUNING_PASSAGES` of it) is held in memory with
each pseudo-query's source text left out of its passage (re-embedded without it) and out of its paper's full text;
each pseudo-query is run once through the same retrievers search uses (passage vectors, passage and paper BM25 with
LanceDB's tokenizer and scoring, `fulltext_mirror`), and each candidate setting fuses those runs with
`fusion.fuse`, exactly as the engine does. The score is nDCG@10 of the pseudo-query's paper.

Noise control (cross-fitting): each half of the pseudo-queries picks its best setting and the other half checks it
against the defaults; the setting best over all pseudo-queries is adopted only if both checks give a margin whose
95 % paired-bootstrap interval lies above zero. A corpus too small to
give `MIN_QUERIES` pseudo-queries keeps the defaults and says so.
"""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumina_assets.indexing import pseudo_queries
from lumina_assets.indexing.index_rows import passage_embed_text
from lumina_assets.indexing.lancedb_tables import PAPERS_TABLE, PASSAGES_TABLE
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.fulltext_mirror import FullTextMirror
from lumina_assets.search.fusion import Run, fuse, ranked
from lumina_assets.search.neighbour_graph import (
    GRAPH_TABLE,
    MAX_GRAPH_PAPERS,
    NeighbourGraph,
    graph_rows,
    write_graph,
)
from lumina_assets.search.stores import fts_text
from lumina_assets.search.tuned_settings import TUNER_VERSION, TuningRecord

MIN_QUERIES = 100  # fewer pseudo-queries cannot tell settings apart (nDCG@10 per query is 0 or 1/log2(r+1))
MAX_QUERIES = 400
MAX_TUNING_PASSAGES = 50_000  # larger indexes are tuned on a random sample of whole papers
RETUNE_GROWTH = 1.25  # an index tuned at N passages is tuned again once it holds this many times N
BOOTSTRAP_SAMPLES = 2000


def default_grid() -> list[dict[str, Any]]:
    """Candidate settings: the dense / lexical balance and the weight of the paper-level full text. Corpus-graph
    smoothing (`search.neighbour_graph`, on by default at search time) is not in it, and settings are compared
    without it: a pseudo-query has one relevant paper, and with the graph built from the same withheld-sentence
    vectors its gain on pseudo-queries was noise (docs/search-quality.md)."""
    grid: list[dict[str, Any]] = []
    for dense in (0.5, 0.7, 1.0, 1.4, 2.0):
        for paper_text in (0.0, 0.25, 0.5, 1.0):
            grid.append(
                {"weights": {"passage_vectors": dense, "passage_fulltext": 1.0, "paper_fulltext": paper_text}}
            )
    return grid


def smooths(setting: dict[str, Any]) -> bool:
    return float(setting.get("neighbour_smoothing", 0) or 0) > 0


@dataclass
class TuningCorpus:
    """What the tuning searches: passages (id, paper, title, text, vector) and papers (id, title, abstract)."""

    passage_ids: list[str]
    passage_papers: list[str]
    passage_titles: list[str]
    passage_texts: list[str]
    vectors: np.ndarray
    paper_ids: list[str]
    paper_titles: list[str]
    paper_abstracts: list[str]
    total_passages: int = 0  # in the whole index (more than len(passage_ids) when sampled)

    def __len__(self) -> int:
        return len(self.passage_ids)


def corpus_from_index(db, max_passages: int = MAX_TUNING_PASSAGES, seed: int = 0) -> TuningCorpus | None:
    """The index's passages and papers, or a random sample of whole papers holding at most `max_passages`."""
    from lumina_assets.indexing.table_ops import open_table, read_columns, vectors_from_arrow

    passages, papers = open_table(db, PASSAGES_TABLE), open_table(db, PAPERS_TABLE)
    if passages is None or papers is None or not passages.count_rows():
        return None
    total = passages.count_rows()
    where = None
    if total > max_passages:
        ids = read_columns(papers, ["paper_id"])["paper_id"].to_pylist()
        random.Random(seed).shuffle(ids)
        keep = ids[: max(1, len(ids) * max_passages // total)]
        where = "paper_id IN (" + ", ".join("'" + p.replace("'", "''") + "'" for p in keep) + ")"
    rows = read_columns(passages, ["passage_id", "paper_id", "title", "text", "vector"], where)
    paper_rows = read_columns(papers, ["paper_id", "title", "abstract"], where)
    return TuningCorpus(
        passage_ids=rows["passage_id"].to_pylist(),
        passage_papers=rows["paper_id"].to_pylist(),
        passage_titles=[t or "" for t in rows["title"].to_pylist()],
        passage_texts=[t or "" for t in rows["text"].to_pylist()],
        vectors=vectors_from_arrow(rows["vector"]),
        paper_ids=paper_rows["paper_id"].to_pylist(),
        paper_titles=[t or "" for t in paper_rows["title"].to_pylist()],
        paper_abstracts=[t or "" for t in paper_rows["abstract"].to_pylist()],
        total_passages=total,
    )


def make_queries(
    corpus: TuningCorpus, limit: int = MAX_QUERIES, seed: int = 0, citations=()
) -> list[pseudo_queries.PseudoQuery]:
    passages = [
        pseudo_queries.PassageText(pid, paper, text)
        for pid, paper, text in zip(
            corpus.passage_ids, corpus.passage_papers, corpus.passage_texts, strict=True
        )
    ]
    known = set(corpus.paper_ids)
    cited = [q for q in citations if q.paper_id in known]
    return pseudo_queries.generate(passages, (), cited, limit=limit, seed=seed)


class TuningRuns:
    """Each pseudo-query's retriever runs over the corpus with the query's source text left out."""

    def __init__(
        self,
        corpus: TuningCorpus,
        queries: Sequence[pseudo_queries.PseudoQuery],
        embedder,
        depth: int,
        with_graph: bool = False,
        text_depth: int
        | None = None,  # hits of each full-text run (SearchConfig.fulltext_candidates); None: depth
    ):
        text_depth = text_depth or depth
        position = {pid: i for i, pid in enumerate(corpus.passage_ids)}
        paper_position = {pid: i for i, pid in enumerate(corpus.paper_ids)}
        texts = list(corpus.passage_texts)
        abstracts = list(corpus.paper_abstracts)
        changed: dict[int, str] = {}
        for query in queries:
            i = position.get(query.passage_id or "")
            if i is None or not query.withheld:
                continue
            texts[i] = texts[i].replace(query.withheld, " ")
            changed[i] = passage_embed_text(corpus.passage_titles[i], texts[i], embed_title=True)
            j = paper_position.get(query.paper_id)
            if j is not None:
                abstracts[j] = abstracts[j].replace(query.withheld, " ")
        vectors = corpus.vectors
        if changed:
            vectors = vectors.copy()
            keys = sorted(changed)
            vectors[keys] = np.asarray(embedder.encode([changed[i] for i in keys]), dtype=np.float32)
        query_vectors = np.asarray(embedder.encode([q.text for q in queries]), dtype=np.float32)
        # the graph from the same vectors (each pseudo-query's sentence left out), so it cannot leak the answer
        self.graph = NeighbourGraph.build(vectors, corpus.passage_papers) if with_graph else None
        passage_text = FullTextMirror(
            [f"{t}\n{x}" for t, x in zip(corpus.passage_titles, texts, strict=True)]
        )
        paper_text = FullTextMirror(
            [f"{t}\n{a}" for t, a in zip(corpus.paper_titles, abstracts, strict=True)]
        )
        self.runs: list[dict[str, Run]] = []
        ids, papers = corpus.passage_ids, corpus.passage_papers
        for query, vector in zip(queries, query_vectors, strict=True):
            words = fts_text(query.text)
            scores = vectors @ vector
            top = np.argpartition(-scores, min(depth, len(scores)) - 1)[:depth]
            top = top[np.argsort(-scores[top], kind="stable")]
            dense = Run([(ids[i], float(scores[i]), papers[i]) for i in top.tolist()])
            passage_hits = passage_text.top(words, text_depth) if words else []
            paper_hits = paper_text.top(words, text_depth) if words else []
            self.runs.append(
                {
                    "passage_vectors": dense.by_paper(),
                    "passage_fulltext": Run([(ids[i], s, papers[i]) for i, s in passage_hits]).by_paper(),
                    "paper_fulltext": Run(
                        [(corpus.paper_ids[i], s, corpus.paper_ids[i]) for i, s in paper_hits]
                    ),
                }
            )
        self.targets = [q.paper_id for q in queries]

    def scores(self, config: SearchConfig) -> np.ndarray:
        """nDCG@10 of each pseudo-query's paper under `config`'s fusion."""
        out = np.zeros(len(self.runs))
        for n, (runs, target) in enumerate(zip(self.runs, self.targets, strict=True)):
            fused = fuse(
                runs,
                config.weights,
                method=config.fusion,
                candidates=config.candidates,
                rrf_k=config.rrf_k,
            )
            if config.smooths() and self.graph is not None:
                fused = self.graph.smooth(fused, config.neighbour_smoothing, config.smoothing_neighbours)
            for rank, (paper_id, _) in enumerate(ranked(fused, 10)):
                if paper_id == target:
                    out[n] = 1.0 / np.log2(rank + 2)
                    break
        return out


def bootstrap_interval(
    differences: np.ndarray, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES
) -> tuple[float, float]:
    """95 % paired-bootstrap interval of the mean of per-query differences."""
    if not len(differences):
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = differences[rng.integers(0, len(differences), (samples, len(differences)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


@dataclass
class Choice:
    """The best setting on pseudo-queries and whether it is adopted over the default (see `choose`)."""

    best: int  # index of the best setting over all pseudo-queries
    adopted: bool
    margin: float  # out-of-sample margin over the default (mean of the two checks)
    margin_low: float  # the lower of the two checks' 95 % paired-bootstrap lower ends


def choose(per_setting: np.ndarray, default_index: int, seed: int = 0) -> Choice:
    """Cross-fitted choice: the pseudo-queries are split in two halves, each half picks its best setting and the
    other half checks it against the default (paired bootstrap over queries). Only when both checks put the
    margin above zero is the setting best over all pseudo-queries adopted. per_setting is (settings x queries)."""
    order = np.random.default_rng(seed).permutation(per_setting.shape[1])
    halves = (order[: len(order) // 2], order[len(order) // 2 :])
    checks = []
    for pick, check in (halves, halves[::-1]):
        picked = int(np.argmax(per_setting[:, pick].mean(axis=1)))
        differences = per_setting[picked, check] - per_setting[default_index, check]
        checks.append((float(differences.mean()), bootstrap_interval(differences, seed)[0]))
    best = int(np.argmax(per_setting.mean(axis=1)))
    margin = (checks[0][0] + checks[1][0]) / 2
    low = min(check_low for _, check_low in checks)
    return Choice(best, best != default_index and low > 0, margin, low)


def tune(
    corpus: TuningCorpus | None,
    embedder,
    *,
    defaults: SearchConfig | None = None,
    grid: Sequence[dict[str, Any]] | None = None,
    limit: int = MAX_QUERIES,
    seed: int = 0,
    citations=(),
    log_fn: Callable[[str], None] | None = None,
) -> TuningRecord:
    """Choose a setting for this corpus (see the module docstring); the defaults when it cannot tell."""
    started = time.perf_counter()
    say = log_fn or (lambda message: None)
    defaults = defaults or SearchConfig()
    grid = list(grid) if grid is not None else default_grid()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record = TuningRecord(tuned_at=stamp)
    if limit < MIN_QUERIES:
        record.reason = (
            f"tuning budget too small: {limit} pseudo-queries fit in a fifth of the embedding time "
            f"(at least {MIN_QUERIES} needed); global defaults"
        )
        return record
    if corpus is None or not len(corpus):
        record.reason = "empty index: global defaults"
        return record
    record.passages, record.sampled_passages = corpus.total_passages or len(corpus), len(corpus)
    queries = make_queries(corpus, limit, seed, citations)
    record.queries = len(queries)
    record.kinds = {kind: sum(q.kind == kind for q in queries) for kind in sorted({q.kind for q in queries})}
    if len(queries) < MIN_QUERIES:
        record.reason = (
            f"corpus too small to tune: {len(queries)} pseudo-queries (at least {MIN_QUERIES} needed); "
            "global defaults"
        )
        record.seconds = time.perf_counter() - started
        return record
    if not graph_allowed(corpus):  # a sampled or very large corpus: no exact neighbour graph to smooth with
        grid = [setting for setting in grid if not smooths(setting)]
    say(f"search tuning: {len(queries)} pseudo-queries over {len(corpus)} passages, {len(grid)} settings")
    runs = TuningRuns(
        corpus,
        queries,
        embedder,
        depth=defaults.candidates,
        text_depth=defaults.fulltext_candidates or defaults.candidates,
        with_graph=any(smooths(setting) for setting in grid),
    )
    configs = [defaults.replace(**_merged(defaults, setting)) for setting in grid]
    per_setting = np.stack([runs.scores(config) for config in configs])
    default_scores = runs.scores(defaults)
    per_setting = np.vstack([default_scores, per_setting])
    choice = choose(per_setting, 0, seed)
    best, margin, low = choice.best, choice.margin, choice.margin_low
    record.default_score = float(default_scores.mean())
    record.best = grid[best - 1] if best else {}
    record.best_score = float(per_setting[best].mean())
    record.margin, record.margin_low = margin, low
    record.adopted = choice.adopted
    record.setting = record.best if record.adopted else {}
    record.score = record.best_score if record.adopted else record.default_score
    if best == 0:
        record.reason = "the defaults scored best on pseudo-queries"
    elif record.adopted:
        record.reason = (
            f"beats the defaults on held-out pseudo-queries by {margin:+.3f} "
            f"(95 % interval from {low:+.3f}, both halves)"
        )
    else:
        record.reason = f"best setting's margin {margin:+.3f} is within noise (95 % interval from {low:+.3f}): defaults kept"
    record.seconds = time.perf_counter() - started
    return record


def graph_allowed(corpus: TuningCorpus) -> bool:
    """Smoothing is offered where the whole corpus was read (not a sample) and its exact graph is affordable."""
    whole = not corpus.total_passages or corpus.total_passages <= len(corpus)
    return whole and len(corpus.paper_ids) <= MAX_GRAPH_PAPERS


def _merged(defaults: SearchConfig, setting: dict[str, Any]) -> dict[str, Any]:
    """A grid setting as SearchConfig changes (weights merged over the defaults' weights)."""
    changes = dict(setting)
    if isinstance(changes.get("weights"), dict):
        changes["weights"] = {**defaults.weights, **changes["weights"]}
    return changes


def needs_tuning(record: TuningRecord | None, passages: int) -> bool:
    """Tune a new index, one that grew (or shrank) by `RETUNE_GROWTH` since it was tuned, or one tuned by another
    version of the tuner (an incremental run adding a few papers keeps its setting: tuning would cost more than
    the embedding it follows)."""
    if record is None or record.passages <= 0 or record.version != TUNER_VERSION:
        return passages > 0
    return passages >= RETUNE_GROWTH * record.passages or passages < record.passages / RETUNE_GROWTH


def query_budget(embed_seconds: float, passages_embedded: int, share: float = 0.15) -> int:
    """How many pseudo-queries keep tuning within `share` of the embedding time it follows (leaving room under a
    fifth). A pseudo-query costs about 1.65 passage embeddings: its source passage re-embedded without it, the query
    itself, its runs and the fusion grid (measured on CISI). An index run that embedded nothing (an existing index
    tuned for the first time) gets the full set."""
    if passages_embedded <= 0 or embed_seconds <= 0:
        return MAX_QUERIES
    per_query = 1.65 * embed_seconds / passages_embedded
    return int(min(MAX_QUERIES, share * embed_seconds / per_query))


def tune_index(
    db, embedder, *, limit: int = MAX_QUERIES, citations=(), force: bool = False, log_fn=None
) -> tuple[TuningRecord, bool]:
    """(the index's record, whether it was tuned now): tuned when new or grown by `RETUNE_GROWTH`, and recorded
    with the index (`tuned_settings`). `citations`: citation pseudo-queries, or a callable giving them (read only
    when tuning runs)."""
    from lumina_assets.indexing.table_ops import open_table
    from lumina_assets.search import tuned_settings

    recorded = tuned_settings.read_record(db)
    table = open_table(db, PASSAGES_TABLE)
    passages = table.count_rows() if table is not None else 0
    if not force and not needs_tuning(recorded, passages):
        keep_graph(db)  # papers added since tuning get their neighbours
        return recorded, False
    if not force and recorded is not None and limit < MIN_QUERIES:
        keep_graph(db)
        return recorded, False  # this run cannot afford a tuning set: the recorded setting stays
    if limit < MIN_QUERIES:  # no tuning set fits: the defaults, without reading the corpus
        record = tune(None, embedder, limit=limit)
        record.passages = passages
    else:
        citing = citations() if callable(citations) else citations
        record = tune(corpus_from_index(db), embedder, limit=limit, citations=citing, log_fn=log_fn)
    tuned_settings.write_record(db, record)
    keep_graph(db)
    return record, True


def keep_graph(db) -> bool:
    """Store the paper neighbour graph (`search.neighbour_graph`) for a corpus small enough for an exact one,
    when the stored graph does not cover every paper (new, or papers added since); True when it was written.
    Smoothing is a search option (`SearchConfig.neighbour_smoothing`), so the graph is kept whether or not the
    setting in force uses it."""
    from lumina_assets.indexing.table_ops import open_table

    papers = open_table(db, PAPERS_TABLE)
    count = papers.count_rows() if papers is not None else 0
    if count > MAX_GRAPH_PAPERS and graph_rows(db):
        # grown past the exact graph's size: a graph of the earlier papers would smooth them and not the new ones
        db.drop_table(GRAPH_TABLE)
        return False
    if not count or count > MAX_GRAPH_PAPERS or graph_rows(db) == count:
        return False
    corpus = corpus_from_index(db, max_passages=10**12)
    if corpus is None:
        return False
    write_graph(db, NeighbourGraph.build(corpus.vectors, corpus.passage_papers))
    return True
