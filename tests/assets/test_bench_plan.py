"""The plan against a small run's actual counts, verdicts shared across providers / depths / page sizes, and the
budget's stop and resume, on a real SciFact slice with a stand-in LLM endpoint and a stand-in Exa."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import dagster as dg
import polars as pl
import pytest
from benchmark_slice import materialize_stages, shard_keys, write_scifact_slice
from mocked_benchmark_apis import StandInLLM, resources_with

from evals import ledger, plan_inputs, runs
from evals import plan as plan_lib
from evals.budget import Budget
from lumina_assets.core import tables
from lumina_assets.core.llm import BudgetExhausted
from lumina_assets.defs import benchmark

pytestmark = pytest.mark.slow


GRID = {"synthetic": 2, "beir": 3, "depths": [0, 1], "page_sizes": [3, 10]}  # 10: the pool's p


def run_config(folder):
    config = benchmark.default_run_config(
        synthetic=GRID["synthetic"],
        beir_queries=GRID["beir"],
        depths=GRID["depths"],
        page_sizes=GRID["page_sizes"],
        calibration_queries=3,
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    return config


def make_plan(resources, providers):
    inputs = plan_inputs.inputs_from_environment(
        resources,
        synthetic=GRID["synthetic"],
        beir_queries=GRID["beir"],
        beir_subset="heldout",
        providers=providers,
        depths=GRID["depths"],
        page_sizes=GRID["page_sizes"],
        user_queries=0,
    )
    return plan_lib.build_plan(inputs)


QUESTIONS = [benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions]
LEVELS = [benchmark.provider_results, benchmark.recursive_results]


@pytest.fixture
def scifact_slice(shared_data, data_dir):
    return write_scifact_slice(shared_data, claims=8, distractors=60)


def test_plan_predicts_a_small_run(scifact_slice, data_dir):
    llm = StandInLLM()
    resources = resources_with(llm)
    config = run_config(scifact_slice)
    instance = dg.DagsterInstance.ephemeral()
    providers = ["exa", "bm25"]
    materialize_stages(resources, config, [(QUESTIONS, [None])], instance)
    questions = pl.read_parquet(tables.QUESTIONS.path()).height
    assert questions == 5

    before = make_plan(
        resources, providers
    )  # nothing but the questions stored: the judge pairs are estimated
    assert "estimated" in before["llm"]["judge"]["pairs"]["source"]
    assert before["llm"]["pooled"]["pool"]["source"].startswith("estimated")
    materialize_stages(resources, config, [(LEVELS, providers)], instance)
    after = make_plan(resources, providers)  # every provider's levels stored: the judge pairs are counted
    assert after["llm"]["judge"]["pairs"]["source"].startswith("counted")
    materialize_stages(resources, config, [([benchmark.judgments], providers)], instance)

    actual = ledger.actual_by_plan_role(providers)
    # deterministic counts are exact, before any level is stored (a prompt the run repeats, such as the same
    # contexts at two page sizes, is answered from the cache the second time)
    made = {role: row["calls"] + row["cache_hits"] for role, row in actual["llm"].items()}
    assert before["llm_calls"]["questions"] == made["questions"] == GRID["synthetic"]
    refined = questions * len(GRID["page_sizes"]) * max(GRID["depths"])
    assert before["llm_calls"]["refiner"] == made["refiner"] == refined * len(providers)
    assert before["provider_requests"] == {"exa": questions * 3, "bm25": questions * 3}
    assert actual["provider_requests"] == {"exa": questions * 3, "bm25": 0}  # bm25 is local: no HTTP request
    # the judge: exact once the levels are stored (before them it is an estimate, see evals.plan)
    assert after["llm_calls"]["judge"] == actual["llm"]["judge"]["calls"] > 0
    # tokens within 20 % per call for every role, planned before any level was stored (context lengths from the
    # documented API behaviour: Exa's one highlight of the maxCharacters Lumina asks for) and after; per call sent,
    # since the run's cache answers the prompts its synthetic questions repeat (the stand-in writes one text)
    for role in ("questions", "refiner", "judge"):
        sent = actual["llm"][role]
        assert sent["calls"] > 0
        for plan in (before, after):
            per_call = plan["llm"][role]["input_tokens"] / plan["llm"][role]["calls"]
            assert per_call == pytest.approx(sent["input_tokens"] / sent["calls"], rel=0.2), role
    assert after["llm"]["judge"]["input_tokens"] == pytest.approx(
        actual["llm"]["judge"]["input_tokens"], rel=0.2
    )
    judge_out = after["llm"]["judge"]["output_tokens"]
    assert judge_out == pytest.approx(actual["llm"]["judge"]["output_tokens"], rel=0.2)

    # page size 3 is a prefix of 10 and depth 1 repeats depth 0's contexts where equal: one verdict each
    pairs = after["llm"]["judge"]["pairs"]
    assert pairs["before_sharing"] > pairs["distinct"]
    assert after["llm"]["judge"]["calls_saved_by_sharing"] == 2 * (
        pairs["before_sharing"] - pairs["distinct"]
    )
    verdicts = pl.concat([pl.read_parquet(tables.JUDGMENTS.path(p)) for p in providers])
    assert verdicts.height == pairs["distinct"]
    # a plan of the same run now: everything is in the cache
    assert make_plan(resources, providers)["llm_calls"]["judge"] == 0

    # the report sets the plan the run started from beside what it made
    ledger.write_plan(before)
    config["ops"]["benchmark_scores"]["config"].update(
        {"providers": providers, "bootstrap_resamples": 100, "validation_queries_llm": 1}
    )
    materialize_stages(
        resources, config, [([benchmark.benchmark_scores, benchmark.benchmark_report], [None])], instance
    )
    report = (data_dir / "reports" / "benchmark.md").read_text(encoding="utf-8")
    # pooled judging: the plan made before judging counted the pool and the calls benchmark_scores sent (the
    # graded prompts; the CR / CP prompts of the pool are the judge step's, answered from the cache)
    pool = after["llm"]["pooled"]["pool"]
    assert pool["source"].startswith("counted")
    assert pool["items"] == runs.read_run(runs.latest())[0]["pooled"]["pool_items"] > 0
    pooled_sent = ledger.actual_by_plan_role(providers)["llm"]["pooled"]
    # (the stand-in's synthetic questions share one text, so some of their pool items share a graded prompt)
    assert after["llm_calls"]["pooled"] == pooled_sent["calls"] > 0
    assert after["llm"]["pooled"]["input_tokens"] == pytest.approx(pooled_sent["input_tokens"], rel=0.2)
    # judge_batch carries the graded prompts: half price through the batch APIs
    assert after["llm"]["pooled"]["usd_batch"] == pytest.approx(
        after["llm"]["pooled"]["usd_sync"] / 2,
        abs=1e-4,  # USD are rounded to 4 places
    )
    assert make_plan(resources, providers)["llm_calls"]["pooled"] == 0  # now every pool prompt is cached
    assert "**Plan vs actual**" in report
    assert f"| refiner calls | {refined * 2} | {refined * 2} |" in report
    assert f"| exa requests | {questions * 3} | {questions * 3} |" in report

    # a provider returning the same contexts as another shares its verdicts: no judge call
    shards = data_dir / "benchmark" / "shards" / "recursive_results"
    shutil.copytree(shards / "exa", shards / "semantic_scholar")
    calls = llm.calls
    materialize_stages(resources, config, [([benchmark.judgments], ["semantic_scholar"])], instance)
    assert llm.calls == calls
    shared = pl.read_parquet(tables.JUDGMENTS.path("semantic_scholar"))
    assert shared.height == pl.read_parquet(tables.JUDGMENTS.path("exa")).height


def test_full_grid_plan_prints_every_role_and_api():
    inputs = plan_lib.PlanInputs(
        synthetic=10_000,
        beir=0,
        user=10_000,
        providers=["lumina", "semantic_scholar", "google_scholar", "exa"],
        depths=[0, 1, 2, 3],
        page_sizes=[5, 10],
        question_llm=plan_lib.LLMRole("anthropic", "claude-sonnet-4-6", 50),
        judge_llm=plan_lib.LLMRole("openai", "gpt-4o", 500),
        refiner_llm=plan_lib.LLMRole("openai", "gpt-4o", 500),
        provider_apis={
            "lumina": plan_lib.ProviderAPI("local"),
            "semantic_scholar": plan_lib.ProviderAPI("semantic_scholar", 60),
            "google_scholar": plan_lib.ProviderAPI("serpapi"),
            "exa": plan_lib.ProviderAPI("exa"),
        },
    )
    plan = plan_lib.build_plan(inputs)
    assert plan["provider_requests"] == {p: 20_000 * (1 + 2 * 3) for p in inputs.providers}
    assert plan["llm_calls"]["questions"] == 10_000
    assert plan["llm_calls"]["refiner"] == 4 * 20_000 * 2 * 3
    judge = plan["llm"]["judge"]
    assert judge["pairs"]["before_sharing"] == 4 * 20_000 * (5 + 10) * 4
    assert judge["calls"] == 2 * judge["pairs"]["distinct"] < 2 * judge["pairs"]["before_sharing"]
    assert judge["usd_batch"] == pytest.approx(judge["usd_sync"] / 2, rel=1e-3)
    assert plan["llm"]["refiner"]["usd_batch"] == plan["llm"]["refiner"]["usd_sync"]  # sequential: no batch
    assert plan["usd_sync_complete"] is False  # SerpAPI has no list price per request
    pooled = plan["llm"]["pooled"]  # estimated: 20,000 questions x p = 10 x (1 local + 3 external providers)
    assert pooled["calls"] == pooled["pool"]["items"] == 20_000 * 10 * 4
    assert pooled["usd_batch"] == pytest.approx(pooled["usd_sync"] / 2, rel=1e-3) and pooled["usd_sync"] > 0
    assert plan["apis"]["openai"]["minutes"] == pytest.approx(plan["apis"]["openai"]["requests"] / 500)
    text = plan_lib.format_plan(plan)
    assert "unknown" in text and "semantic_scholar" in text and "saves" in text
    assert "pooled" in text and "3 external assumed distinct" in text
    # local providers search one index, so their top p overlap: fewer distinct papers per provider
    local = plan_lib.build_plan(replace(inputs, providers=["lumina", "bm25", "dense"], provider_apis={}))
    share = plan_lib.LOCAL_POOL_SHARE[3]
    assert local["llm"]["pooled"]["pool"]["items"] == round(20_000 * 10 * 3 * share) < 20_000 * 10 * 3
    no_pool = plan_lib.build_plan(plan_lib.PlanInputs(**{**inputs.__dict__, "page_sizes": [5]}))
    assert (
        no_pool["llm_calls"]["pooled"] == 0
        and "not in the grid" in no_pool["llm"]["pooled"]["pool"]["source"]
    )
    unknown = plan_lib.build_plan(
        plan_lib.PlanInputs(**{**inputs.__dict__, "judge_llm": plan_lib.LLMRole("openai", "no-such-model")})
    )
    assert unknown["llm"]["judge"]["usd_sync"] is None


def test_budget_stops_the_run_and_a_rerun_resumes(scifact_slice, data_dir):
    llm = StandInLLM()
    ledger_file = data_dir / "benchmark" / "budget" / "run.json"
    config = run_config(scifact_slice)
    instance = dg.DagsterInstance.ephemeral()
    materialize_stages(
        resources_with(llm, budget_usd=1.0, budget_file=str(ledger_file)),
        config,
        [(QUESTIONS, [None]), (LEVELS, ["exa"])],
        instance,
    )
    spent_before_judging = Budget(ledger_file, 1.0).spent()
    assert spent_before_judging > 0  # the generator's and the refiner's answers are counted at list price
    # room for a few judge answers (gpt-4o at list price: under a tenth of a cent each), not for all of them
    limit = spent_before_judging + 0.003
    resources = resources_with(llm, budget_usd=limit, budget_file=str(ledger_file))
    stopped = dg.materialize(
        benchmark.ASSETS + benchmark.CHECKS,
        selection=[benchmark.judgments],
        partition_key=shard_keys("exa")[0],
        resources=resources,
        instance=instance,
        raise_on_error=False,
    )
    assert not stopped.success
    assert "BudgetExhausted" in str(stopped.get_step_failure_events()[0].event_specific_data.error)
    budget = Budget(ledger_file, limit)
    assert budget.spent() >= limit
    with pytest.raises(BudgetExhausted):
        budget.check()
    sent_when_stopped = llm.calls
    assert not tables.JUDGMENTS.path("exa").exists()  # nothing scored as failed or empty

    # a rerun with a larger budget resumes: the answers given before the stop come from the cache
    resumed = resources_with(llm, budget_usd=1.0, budget_file=str(ledger_file))
    materialize_stages(resumed, config, [([benchmark.judgments], ["exa"])], instance)
    verdicts = pl.read_parquet(tables.JUDGMENTS.path("exa"))
    assert verdicts["relevance_failure"].null_count() == verdicts.height
    judged_calls = 2 * verdicts.height
    resumed_calls = llm.calls - sent_when_stopped
    stopped_calls = sent_when_stopped - sum(
        ledger.actual_by_plan_role(["exa"])["llm"][r]["calls"] for r in ("questions", "refiner")
    )
    # every judge answer was sent once: those before the stop plus those after it
    assert stopped_calls + resumed_calls == judged_calls


def test_run_refuses_a_plan_over_its_budget(scifact_slice, data_dir, monkeypatch, capsys):
    from lumina_assets.cli.main import main

    monkeypatch.setenv("LUMINA_CORPUS", str(scifact_slice))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # a keyed judge: the plan prices its calls
    monkeypatch.setenv("LUMINA_QUESTION_BACKEND", "offline")
    options = ["--providers", "bm25", "--synthetic", "0", "--beir-queries", "4", "--depths", "0,1"]
    assert main(["benchmark", "plan", *options, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["llm_calls"]["judge"] > 0 and plan["usd_sync"] > 0
    assert main(["benchmark", "run", *options, "--budget", str(plan["usd_sync"] / 2)]) == 2
    assert "refused" in capsys.readouterr().err
    assert not tables.QUESTIONS.path().exists()  # refused before any step ran: nothing sent, nothing written
