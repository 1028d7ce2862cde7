"""`SearchConfig`: every stage of the search pipeline as a switch, so evaluations can measure each one's share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from lumina_assets.core.schemas import Context
from lumina_assets.search.query_parser import ParsedQuery


@dataclass
class SearchConfig:
    """Every stage of the pipeline; defaults are the tuned offline configuration (no LLM, no reranker)."""

    # parsing
    parse_query: bool = True
    llm_parser: Callable[[str], ParsedQuery] | None = (
        None  # e.g. evals' LLM wrapper, used instead of the heuristic
    )
    llm_multi_query: Callable[[str], list[str]] | None = None  # extra phrasings, each embedded and fused
    # retrieval: candidates always come from indexes; `store` picks where vectors and metadata are read
    store: str = "auto"  # auto (memory up to memory_max_passages, else index) | memory | index
    # below this many passages search holds vectors, display columns and full-text mirrors in memory
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
    # the setting the index records (`search.tuned_settings`, chosen from the corpus at index time) replaces the
    # defaults of weights / candidates / fusion fields left unset here; False: the global defaults alone
    index_tuning: bool = True
    # fusion
    fusion: str = "weighted"  # rrf | weighted (min-max normalized scores over each retriever's candidates)
    rrf_k: int = 60
    weights: dict[str, float] = field(
        default_factory=lambda: {"passage_vectors": 1.0, "passage_fulltext": 1.0, "paper_fulltext": 0.5}
    )
    # corpus-graph smoothing (`search.neighbour_graph`): a paper's fused score plus this share of its nearest
    # papers' fused scores, where the index holds the graph. Weighted fusion only: RRF's flat scores would let
    # the neighbours' share dominate (docs/search-quality.md)
    neighbour_smoothing: float = 0.2
    smoothing_neighbours: int = 3  # k: how many nearest papers (of the 10 stored) are averaged
    # boosts and filters
    author_boost: float = 1.0
    year_mode: str = (
        "boost"  # natural-language years ("after 2019"): boost | filter | off; explicit ones filter
    )
    author_filter_max_papers: int = (
        10_000  # an explicit author filter admits at most this many of their papers
    )
    year_boost: float = 0.5
    recency_weight: float = 0.0  # e.g. 0.2 favours recent papers
    # results
    max_passages_per_paper: int = 2  # diversity: contexts hold at most this many hit passages
    expand_neighbours: bool = True  # parent-document: add the passages around a short hit
    neighbour_window: int = 1
    neighbour_below_words: int = 60  # only hits shorter than this get neighbours
    # rerank(query, contexts) -> contexts, e.g. search_models.cross_encoder_reranker / llm_reranker; None = off
    rerank: Callable[[str, list[Context]], list[Context]] | None = None
    rerank_depth: int = (
        30  # how many fused papers the reranker sees (it can lift one from below k into the top k)
    )
    max_query_chars: int = 2000

    def replace(self, **changes) -> SearchConfig:
        return dataclasses.replace(self, **changes)

    def smooths(self) -> bool:
        """Whether fused scores are smoothed over the corpus graph (where the index holds one)."""
        return self.neighbour_smoothing > 0 and self.fusion == "weighted"
