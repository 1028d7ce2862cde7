"""The benchmark's default grid and sizes, read by the run configs, `default_run_config`, the CLI and the judge."""

from __future__ import annotations

DEPTHS = (0, 1, 2, 3)  # recursion depths scored
PAGE_SIZES = (5, 10)  # page sizes p; provider_results asks each provider for the largest
SYNTHETIC_QUESTIONS = 12  # questions generated from sampled passages
SHARD_SIZE = 500  # questions per shard, the unit of work of the per-question benchmark assets (evals.shards)
BEIR_QUERIES = 0  # BEIR queries with qrels: 0 = every held-out one, N > 0 = a seeded sample of N, < 0 = none
# SciFact train queries per half of the seeded split an LLM judge is validated on (the second half; the first is left
# out of judge-vs-qrels on contexts). Changing it changes which pairs validate the judge.
CALIBRATION_QUERIES = 60
LLM_VALIDATION_QUERIES = 30  # held-out queries an LLM judge is validated on (each costs calls)
JUDGE_MAX_ATTEMPTS = 3  # an LLM's tries per verdict or question before it is recorded as failed
# Every provider's context is cut to this many word tokens by one rule before it is judged (evals.contexts): short
# enough that the long contexts are cut, so no provider's CR or CP rests on how much text it sends.
CONTEXT_TOKENS = 120
RECALL_DEPTH = 100  # Recall@100: local providers are asked once more for this many papers (evals.deep_recall)
CONTEXT_FORM = "equal"  # evals.contexts: equal (the default) | whitepaper (as each provider returned them)
BEIR_SUBSET = "heldout"  # of a train-only BEIR split: heldout | tuning | all (lumina_assets.corpus.splits)
# The primary comparison: lumina against the best baseline on the held-out BEIR questions by nDCG@10 at page size 10
# and depth 0; its family (every baseline) is Holm-corrected (`evals.comparison`).
PRIMARY_MEASURE = "ndcg10"
PRIMARY_LABEL = "nDCG@10"
PRIMARY_PAGE_SIZE = 10
PRIMARY_DEPTH = 0
PRIMARY_PROVIDER = "lumina"
PRIMARY_QUESTION_SET = "beir"
ALPHA = 0.05
