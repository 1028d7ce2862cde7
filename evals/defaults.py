"""The benchmark's default grid and sizes, in one place: the assets' run config classes, `default_run_config`, the
`lumina benchmark run` options and the judge setup all read them.

The defaults keep a demo run to a few minutes on 2 cores; raise them for a real benchmark."""

from __future__ import annotations

DEPTHS = (0, 1, 2, 3)  # recursion depths scored
PAGE_SIZES = (5, 10)  # page sizes p; provider_results asks each provider for the largest
SYNTHETIC_QUESTIONS = 12  # questions generated from sampled passages
BEIR_QUERIES = 12  # queries sampled from a BEIR folder (with their qrels)
# SciFact train queries per split the offline judge is calibrated on; the judging and the scoring steps must use
# the same value, so the agreement is measured on the judge that judged.
CALIBRATION_QUERIES = 60
LLM_VALIDATION_QUERIES = 30  # held-out queries an LLM judge is validated on (each costs calls)
JUDGE_MAX_ATTEMPTS = 3  # an LLM judge's tries per verdict before it is recorded as failed
