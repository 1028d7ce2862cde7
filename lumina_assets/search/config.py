"""`SearchConfig`: every stage of the search pipeline as a switch. A config remembers which fields its caller set
(`explicit`, for `explain`); `weights` given in part are merged over the default weights."""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from lumina_assets.core.schemas import Context

Store = Literal["auto", "memory", "index"]
Fusion = Literal["rrf", "weighted"]
YearMode = Literal["boost", "filter", "off"]
DEFAULT_WEIGHTS = {"passage_vectors": 1.0, "passage_fulltext": 1.0, "paper_fulltext": 0.5}


@dataclass(init=False)
class SearchConfig:
    """Every stage of the pipeline; defaults are the tuned offline configuration (no reranker)."""

    # parsing
    parse_query: bool = True
    # retrieval: `store` picks where vectors and metadata are read; auto: in memory below memory_max_passages
    store: Store = "auto"
    memory_max_passages: int = 150_000
    # IVF partitions scanned per query (ignored below the ANN threshold): at least `nprobes`, and at least
    # `ann_probe_share` of the partitions, so recall holds as the index grows (docs/search-at-scale.md)
    nprobes: int = 60
    ann_probe_share: float = 0.03
    refine_factor: int = 1  # > 0: limit * refine_factor ANN candidates re-scored on full vectors; 0 = off
    passage_vectors: bool = True
    passage_fulltext: bool = True
    paper_fulltext: bool = True
    candidates: int = 200  # papers per retriever that fusion sees
    fulltext_candidates: int = 0  # passages and papers each full-text run returns; 0: candidates
    # fusion
    fusion: Fusion = "weighted"  # weighted: min-max normalized scores over each retriever's candidates
    rrf_k: int = 60
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    # corpus-graph smoothing (`search.neighbour_graph`), weighted fusion only (docs/search-quality.md)
    neighbour_smoothing: float = 0.2
    smoothing_neighbours: int = 3  # k: how many nearest papers (of the 10 stored) are averaged
    # boosts and filters
    author_boost: float = 1.0
    year_mode: YearMode = "boost"  # natural-language years ("after 2019"); explicit ones always filter
    author_filter_max_papers: int = 10_000  # the most papers an explicit author / venue / label filter admits
    year_boost: float = 0.5
    recency_weight: float = 0.0  # e.g. 0.2 favours recent papers
    # results
    max_passages_per_paper: int = 2  # diversity: contexts hold at most this many hit passages
    passages_without_paper_name: bool = True  # a paper's passages are chosen without the query word naming it
    expand_neighbours: bool = True  # parent-document: add the passages around a short hit
    neighbour_window: int = 1
    neighbour_below_words: int = 60  # only hits shorter than this get neighbours
    rerank: Callable[[str, list[Context]], list[Context]] | None = (
        None  # `rerank.cross_encoder_reranker`; None = off
    )
    rerank_depth: int = 30  # how many fused papers the reranker sees (it can lift one into the top k)
    max_query_chars: int = 2000

    def __init__(self, **values: Any) -> None:
        for item in dataclasses.fields(self):
            default = item.default_factory() if item.default is dataclasses.MISSING else item.default
            setattr(self, item.name, default)
        self._explicit: frozenset[str] = frozenset()
        self._apply(values)

    def _apply(self, values: dict[str, Any]) -> None:
        """Set `values`, recorded as set explicitly (`weights.<retriever>` per weight), and check the modes."""
        unknown = sorted(values.keys() - _NAMES)
        if unknown:
            raise TypeError(f"SearchConfig has no field {', '.join(unknown)}")
        for name, value in values.items():
            setattr(self, name, {**self.weights, **value} if name == "weights" else value)
        self._explicit |= {f"weights.{name}" for name in values.get("weights", {})} | values.keys()
        for name, allowed in _MODES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"SearchConfig.{name}={getattr(self, name)!r}: one of {', '.join(allowed)}")

    @property
    def explicit(self) -> frozenset[str]:
        """The fields (and `weights.<retriever>` entries) the caller set, whatever their value."""
        return self._explicit

    def replace(self, **changes: Any) -> SearchConfig:
        """A copy with `changes`, which count as set explicitly (use this, not `dataclasses.replace`, which would
        mark every field explicit)."""
        new = copy.copy(self)
        new._apply(changes)
        return new

    def as_json(self) -> dict[str, Any]:
        """Every field as a JSON value; a model-backed stage (a callable) by its function's name, None when off."""
        out: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if callable(value):
                value = getattr(value, "__qualname__", type(value).__name__).split(".<locals>")[0]
            elif isinstance(value, dict):
                value = {str(k): v for k, v in value.items()}
            out[item.name] = value
        return out

    def explain(self) -> dict[str, Any]:
        """What a search ran with, for every answer (`explain`), `lumina search --explain` and `lumina status`:
        every field's value and the fields its caller set (the rest are the defaults)."""
        return {"config": self.as_json(), "explicit": sorted(self.explicit)}

    def smooths(self) -> bool:
        """Whether fused scores are smoothed over the corpus graph (where the index holds one)."""
        return self.neighbour_smoothing > 0 and self.fusion == "weighted"


_NAMES = frozenset(item.name for item in dataclasses.fields(SearchConfig))


_MODES = {
    name: typing.get_args(hint)
    for name, hint in typing.get_type_hints(SearchConfig).items()
    if typing.get_origin(hint) is Literal
}
