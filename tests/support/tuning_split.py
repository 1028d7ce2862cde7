"""The only SciFact queries a margin or tuning test may read: the tuning half of train (`corpus.splits`).

The held-out half is read by the benchmark run alone. Every margin, pin and ablation test builds its subset with
`tuning_qrels` / `tuning_queries`; tests/unit/search/test_tuning_split_guard.py fails when one of them sees a
held-out id.
"""

from __future__ import annotations

from pathlib import Path

from lumina_assets.corpus import collections, splits


def tuning_qrels(root: Path, split: str = "train") -> dict[str, dict[str, int]]:
    """query id -> {doc id: relevance} for the tuning half of `split`, in the file's order."""
    qrels = collections.read_qrels(Path(root) / "qrels" / f"{split}.tsv")
    return {qid: qrels[qid] for qid in splits.tuning_ids(qrels)}


def tuning_queries(root: Path) -> dict[str, str]:
    """query id -> text for the tuning-half queries only."""
    queries = collections.read_queries(Path(root))
    return {qid: queries[qid] for qid in splits.tuning_ids(queries)}


def held_out_in(query_ids) -> list[str]:
    """The held-out ids among `query_ids` (what a guard asserts is empty)."""
    return splits.held_out_ids(str(q) for q in query_ids)
