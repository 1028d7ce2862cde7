"""A run discloses its setup: Lumina's SearchConfig and index, which LLM every role used with a warning whenever two
roles share a model, and this run's cost (its own partitions only) with request costs per API and unknown prices
shown as unknown, not as $0."""

from __future__ import annotations

import polars as pl
import pytest

from evals import disclosure, ledger, manifest, runner, runs
from evals.questions import questions_frame
from evals.registry import dense_config, request_prices
from evals.report_sections import cost_line, disclosure_section, headline_paragraph
from lumina_assets.search.config import SearchConfig


def test_shared_models_are_warned_about():
    roles = disclosure.llm_roles(
        question_generators=["llm:anthropic:claude-sonnet-4-6"],
        provider_llms={
            "lumina": "llm:anthropic:claude-sonnet-4-6",
            "bm25": "none",
            "exa": "not disclosed by the service",
        },
        refiners=["llm:openai:gpt-4o"],
        judge="llm:openai:gpt-4o",
        judge_offline=False,
    )
    warnings = disclosure.shared_model_warnings(roles)
    assert len(warnings) == 2
    assert "question generator, provider lumina share the model `claude-sonnet-4-6`" in warnings[0]
    assert (
        "refiner, judge share the model `gpt-4o`" in warnings[1]
        and "grades text its own model wrote" in warnings[1]
    )
    offline = disclosure.llm_roles(
        question_generators=["offline:template"],
        provider_llms={
            "lumina": "none",
            "exa": "not disclosed by the service",
            "google_scholar": "not disclosed by the service",
        },
        refiners=["offline:pseudo-relevance-feedback"],
        judge="offline-embedding-judge",
        judge_offline=True,
    )
    assert disclosure.shared_model_warnings(offline) == []
    assert offline["judge"].startswith("none")


def test_search_config_is_disclosed_with_model_stages_named():
    config = SearchConfig().replace(rerank=lambda q, c: c)
    described = config.as_json()
    assert described["passage_fulltext"] is True and described["weights"]["passage_vectors"] == 1.0
    assert described["rerank"] == "test_search_config_is_disclosed_with_model_stages_named"
    dense = dense_config().as_json()
    assert dense["passage_vectors"] is True and not dense["passage_fulltext"] and not dense["paper_fulltext"]

    class Engine:  # an engine whose index cannot be opened: disclosed as such, the run goes on
        config = SearchConfig()
        db_uri = "/nowhere"
        embedder = None

        @property
        def db(self):
            raise FileNotFoundError("no index at /nowhere")

        def search(self, query, k):
            return []

    setup = disclosure.engine_setup(Engine().search)
    assert setup["search_config"]["candidates"] == SearchConfig().candidates
    assert "no index at /nowhere" in setup["index_error"]
    assert "configuration not visible" in disclosure.engine_setup(lambda q, k: [])["engine"]


class Client:
    is_offline = False

    def __init__(self, label, calls, usd, unknown):
        from lumina_assets.core.llm import LLMUsage

        self.label = label
        self.usage = LLMUsage(
            calls=calls, input_tokens=100, output_tokens=10, cost_usd=usd, unknown_cost_calls=unknown
        )


def test_cost_is_this_runs_with_unknown_prices_shown_as_unknown(data_dir):
    ledger.record_cost("synthetic_questions", None, Client("anthropic:claude-sonnet-4-6", 3, 0.01, 0))
    ledger.record_cost("judgments", "exa", Client("openai-compatible:my-local-model", 5, 0.0, 5))
    ledger.record_cost("judgments", "bm25", Client("openai:gpt-4o", 7, 0.5, 0))  # not in this run
    ledger.record_requests("provider_results", "google_scholar", {"http_requests": 4, "http_cache_hits": 1})
    ledger.record_requests("provider_results", "semantic_scholar", {"http_requests": 9, "http_cache_hits": 0})
    ledger.record_requests(
        "provider_results",
        "exa",
        {"http_requests": 2, "http_cache_hits": 0, "reported_cost_usd": 0.01, "unpriced_requests": 0},
    )
    cost = ledger.run_cost(["exa", "google_scholar", "semantic_scholar"], request_prices())
    assert set(cost["llm"]) == {
        "question generator (anthropic:claude-sonnet-4-6)",
        "judge (openai-compatible:my-local-model)",
    }  # bm25's judge is another run's
    assert cost["llm"]["judge (openai-compatible:my-local-model)"]["usd"] is None  # unknown, not $0
    assert (
        cost["requests"]["google_scholar"]["usd"] is None
        and cost["requests"]["google_scholar"]["requests"] == 4
    )
    assert cost["requests"]["semantic_scholar"]["usd"] == 0.0
    assert cost["requests"]["exa"]["usd"] == pytest.approx(0.01)
    assert cost["total_usd"] == pytest.approx(0.02) and cost["total_complete"] is False
    line = " ".join(cost_line(cost))
    assert "unknown price" in line and "google_scholar: 4 requests sent, 1 cached, unknown" in line
    assert "+ unknown" in line


def test_actual_calls_are_those_the_plan_counts(data_dir):
    """Pooled judging's CR / CP prompts are answered from the judge step's cache: not calls; a refiner prompt the
    run repeats is one the plan counts."""
    for asset, role in (("pooled_judgments", ""), ("recursive_results", "refiner"), ("judgments", "")):
        client = Client("openai:gpt-4o", 10, 0.1, 0)
        client.usage.cache_hits = 30
        ledger.record_cost(asset, "exa" if asset != "pooled_judgments" else None, client, role=role)
    made = {r: v["calls"] + v["cache_hits"] for r, v in ledger.actual_by_plan_role(["exa"])["llm"].items()}
    assert made == {"questions": 0, "refiner": 40, "judge": 10, "pooled": 10}


def test_manifest_warns_and_the_headline_says_what_the_run_cannot_claim(data_dir):
    questions = questions_frame(
        [
            {
                "question_id": "s1",
                "text": "a",
                "kind": "synthetic",
                "generator": "llm:anthropic:claude-sonnet-4-6",
            },
            {
                "question_id": "b1",
                "text": "b",
                "kind": "beir",
                "generator": "beir:scifact/train-heldout",
                "relevant_paper_ids": ["p"],
                "held_out": True,
            },
        ]
    )
    levels = pl.DataFrame(
        [
            {
                "question_id": "s1",
                "provider": "lumina",
                "page_size": 5,
                "depth": 1,
                "refinement": "llm:openai:gpt-4o",
                "contexts": [],
                "error": None,
            }
        ],
        schema_overrides={"contexts": runner.RECURSIVE_SCHEMA["contexts"]},
    )
    runs.stamp_recursive(
        "lumina",
        questions=runs.questions_fingerprint(questions),
        depths=[0, 1],
        page_sizes=[5],
        refinement="llm:openai:gpt-4o",
        data=runs.frame_fingerprint(levels),
        provider_stats={},
        provider_info={"llm": "llm:anthropic:claude-sonnet-4-6", "index_version": "passages:3,papers:2"},
    )
    selection = manifest.RunSelection(recursive=levels, verdicts=None, included=["lumina"])
    record = manifest.build_manifest(
        selection,
        questions,
        depths=[0, 1],
        page_sizes=[5],
        judge_name="llm:openai:gpt-4o",
        judge_offline=False,
        skipped={},
        primary="declared",
    )
    assert record["llm_roles"]["provider lumina"] == "llm:anthropic:claude-sonnet-4-6"
    assert len(record["warnings"]) == 2
    assert record["provider_setup"]["lumina"]["index_version"] == "passages:3,papers:2"
    section = "\n".join(disclosure_section(record))
    assert section.count("> **Warning:**") == 2 and "passages:3,papers:2" in section
    headline = headline_paragraph(None, record, offline=False)
    assert headline.startswith("**Headline.** This run has no primary comparison")
    assert (
        "the held-out half is excluded from tuning, but the defaults were chosen with it in view" in headline
    )
