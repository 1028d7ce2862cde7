"""Which queries of a collection Lumina may be tuned on, and which are held out for the benchmark: a test or dev split
whole, else the train queries whose salted id hash is odd (docs/benchmark.md). Every tuning must use `tuning_ids`
only; `indexing`, `search` and `evals` all read this one rule."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

HOLDOUT_SALT = "lumina-holdout-v1"
HELD_OUT = "heldout"  # the held-out half of a train-only split
TUNING = "tuning"  # the other half: the only queries tuning may read
WHOLE = "all"  # every query of the split (a train split in full includes the tuning half)
SUBSETS = (HELD_OUT, TUNING, WHOLE)
HELD_OUT_SPLITS = ("test", "dev")  # splits held out by construction


def is_held_out(query_id: str) -> bool:
    """True for a query the benchmark holds out of tuning (SHA-256 of salt + id is odd)."""
    digest = hashlib.sha256(f"{HOLDOUT_SALT}:{query_id}".encode()).digest()
    return digest[-1] % 2 == 1


def held_out_ids(query_ids: Iterable[str]) -> list[str]:
    """The held-out queries, in the order given."""
    return [q for q in query_ids if is_held_out(str(q))]


def tuning_ids(query_ids: Iterable[str]) -> list[str]:
    """The queries tuning may use, in the order given."""
    return [q for q in query_ids if not is_held_out(str(q))]


def select(query_ids: Iterable[str], split: str, subset: str = HELD_OUT) -> tuple[list[str], bool]:
    """(the queries of `split` the benchmark asks, whether they are held out of tuning). A test or dev split is
    held out whole; a train split is cut by `subset` (heldout, tuning or all), and only its held-out half counts
    as held out."""
    ids = list(query_ids)
    if split in HELD_OUT_SPLITS:
        return ids, True
    if subset not in SUBSETS:
        raise ValueError(f"unknown subset {subset!r}; choose from {', '.join(SUBSETS)}")
    if subset == HELD_OUT:
        return held_out_ids(ids), True
    if subset == TUNING:
        return tuning_ids(ids), False
    return ids, False


def describe(split: str, subset: str = HELD_OUT) -> str:
    """The split as a set name suffix: `test`, `train-heldout`, `train-tuning`, `train` (the whole split)."""
    if split in HELD_OUT_SPLITS or subset == WHOLE:
        return split
    return f"{split}-{subset}"
