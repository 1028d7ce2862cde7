"""Which passages a result shows beside its best hits: the passages around a short hit (parent-document
expansion), and for a paper found only at paper level its passage closest to the query."""

from __future__ import annotations

import numpy as np


def with_neighbours(picks: list[str], rows: dict[str, dict], cfg) -> list[str]:
    """`picks`, each hit shorter than `cfg.neighbour_below_words` followed by up to `cfg.neighbour_window`
    passages before and after it (`rows`: passage id -> row with prev_id / next_id)."""
    widened = []
    for hit in picks:
        widened.append(hit)
        if len((rows[hit]["text"] or "").split()) >= cfg.neighbour_below_words:
            continue
        for direction in ("prev_id", "next_id"):
            current = hit
            for _ in range(cfg.neighbour_window):
                current = rows[current].get(direction)
                if not current or current not in rows:
                    break
                widened.append(current)
    return list(dict.fromkeys(widened))


def closest(rows: list[dict], vector: np.ndarray) -> str:
    """The passage id whose vector is closest to the query (ties: the first id)."""
    matrix = np.asarray([row["vector"] for row in rows], dtype=np.float32)
    scores = matrix @ vector
    best = min(range(len(rows)), key=lambda i: (-scores[i], rows[i]["passage_id"]))
    return rows[best]["passage_id"]
