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
        None  # e.g. evals' LLM wrapper; used instead of the heuristic
    )
    # expansion
    # off by default: appending long forms lowered nDCG@10 on SciFact train (-0.005) and CISI (-0.002)
    expand_acronyms: bool = False
    synonyms: dict[str, list[str]] = field(default_factory=dict)  # user-supplied term -> alternatives
    expansion_weight: float = 0.5
    llm_multi_query: Callable[[str], list[str]] | None = None  # extra phrasings, each embedded and fused
    # retrieval: candidates always come from indexes; `store` picks where vectors and metadata are read
    store: str = "auto"  # auto (memory up to memory_max_passages, else index) | memory | index
    # below this many passages search holds vectors, display columns and full-text mirrors in memory (100k
    # passages: ~1.1 GB resident, p50 below the pre-#11 engine's); from it on, everything comes from the indexes
    memory_max_passages: int = 150_000
    # IVF_SQ (about sqrt(rows) partitions, indexing/lancedb_tables.ann_partitions); ignored below the ANN threshold.
    # 1M passages, top 200, 60 claims: recall@10 0.967 with 30-60 probes and refine 1 or 2 (0.952 with 20 probes),
    # 0.930 without refine; the vector search then takes ~15-20 ms
    nprobes: int = 60  # IVF partitions scanned per query, at least
    # ... and at least this share of them: 3 % is where recall stopped rising at 1M (30 of 1,000 probes as good as
    # 60), so the 60 above decide up to 4M passages; at 10M, 95 of 3,162 (6 %, 190 probes: recall@10 the same on
    # `lumina bench scale`, 0.985, and the vector search's CPU time twice as long)
    ann_probe_share: float = 0.03
    refine_factor: int = 1  # > 0: limit * refine_factor ANN candidates re-scored on full vectors; 0 = off
    passage_vectors: bool = True
    passage_fulltext: bool = True
    # paper-level vectors: available, off by default (no nDCG gain on SciFact / CISI for 2 extra matrix products)
    paper_title_vectors: bool = False
    paper_abstract_vectors: bool = False
    paper_fulltext: bool = True
    candidates: int = 200  # papers per retriever that fusion sees
    fulltext_candidates: int = (
        0  # passages (x passage_depth) and papers each full-text run returns; 0: candidates
    )
    passage_depth: int = 1  # passage retrievers fetch candidates * passage_depth passages (1 vs 3: SciFact 0.737 vs 0.7367, CISI 0.4674 vs 0.4672, a third of the index work)
    passage_aggregation: str = (
        "max"  # max | sum2 (best passage + half of the second): a paper's score from passages
    )
    # the setting the index records (`search.tuned_settings`, chosen from the corpus at index time) replaces the
    # defaults of weights / candidates / fusion fields left unset here; False: the global defaults alone
    index_tuning: bool = True
    # fusion
    fusion: str = "weighted"  # rrf | weighted (min-max normalized scores over each retriever's candidates)
    rrf_k: int = 60
    normalization: str = "minmax"  # weighted fusion: minmax | max | zscore over each retriever's candidates
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "passage_vectors": 1.0,
            "passage_fulltext": 1.0,
            "paper_title_vectors": 0.3,
            "paper_abstract_vectors": 0.5,
            "paper_fulltext": 0.5,
        }
    )
    # pseudo-relevance feedback (second retrieval round from the first round's top papers)
    # off by default: on SciFact train and CISI both lowered nDCG@10 (see the ablation table in `eval beir --ablation`)
    dense_prf: bool = False  # Rocchio on the query vector
    dense_prf_docs: int = 3
    dense_prf_beta: float = 0.5
    # corpus-graph smoothing (`search.neighbour_graph`): a paper's fused score plus this share of its nearest
    # papers' fused scores (neighbours from the index's own vectors), where the index holds the graph (corpora up
    # to 50,000 papers; above that search fuses without it). k = 3 and 0.2 were chosen on the SciFact train and
    # CISI qrels: nDCG@10 +0.005 to +0.019 on CISI, +0.001 to +0.003 on SciFact train (held-out half -0.001 to +0.002)
    # Weighted fusion only: RRF's flat scores let the neighbours' share dominate (SciFact train 0.718 -> 0.679)
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
