"""The judge through the batch APIs, as Dagster runs it: `judge_batch` submits, `judge_batch_sensor` polls,
resubmits only what a partly failed or expired batch did not answer, shows each batch's state on `judge_batch`,
and requests `judgments` once every answer is in; the judging then sends no synchronous call. Against the
OpenAI Batch API (files + batches) and Anthropic Message Batches stand-ins on 127.0.0.1."""

from __future__ import annotations

import collections

import dagster as dg
import polars as pl
import pytest
from api_standins import StandInServer
from benchmark_slice import materialize_stages, write_scifact_slice

from evals import batch, ledger, runs
from lumina_assets.core import tables
from lumina_assets.defs import benchmark
from resources.llm import LLMResource
from resources.providers import ExaResource, SemanticScholarResource, SerpApiScholarResource
from sensors.benchmark_batches import judge_batch_sensor

pytestmark = pytest.mark.slow


def _resources(server: StandInServer, backend: str) -> dict:
    base = server.url + "/v1" if backend == "openai" else server.url
    model = "gpt-4o" if backend == "openai" else "claude-sonnet-4-6"
    return {
        "question_llm": LLMResource(backend="offline"),
        "judge_llm": LLMResource(
            backend=backend, model=model, api_key="sk-test", base_url=base, temperature=0.0
        ),
        "semantic_scholar": SemanticScholarResource(),
        "google_scholar": SerpApiScholarResource(),
        "exa": ExaResource(api_key="exa-test", base_url=server.url),
    }


def _config(folder):
    config = benchmark.default_run_config(synthetic=0, beir_queries=3, depths=[0], page_sizes=[3])
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    return config


def _tick(instance, resources):
    """One tick as the daemon evaluates it (run requests resolved against the asset graph)."""
    definitions = dg.Definitions(
        assets=benchmark.ASSETS,
        asset_checks=benchmark.CHECKS,
        sensors=[judge_batch_sensor],
        resources=resources,
    )
    context = dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),  # what the daemon has: run requests name dynamic shard partitions
        definitions=definitions,
        resources={"judge_llm": resources["judge_llm"], "question_llm": resources["question_llm"]},
    )
    return judge_batch_sensor.evaluate_tick(context)


def _run_batch_flow(server, backend, folder, instance):
    resources = _resources(server, backend)
    config = _config(folder)
    stages = [
        ([benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions], [None]),
        ([benchmark.provider_results, benchmark.recursive_results], ["exa"]),
        ([benchmark.judge_batch], ["exa"]),
    ]
    submitted = materialize_stages(resources, config, stages, instance)
    metadata = submitted.asset_materializations_for_node("judge_batch")[0].metadata
    first_id = metadata["batch_id"].value
    requests = metadata["requests"].value
    assert requests == 2 * metadata["pairs"].value > 0  # CR and CP for every pair, none cached yet

    ticks = []
    for _ in range(6):
        result = _tick(instance, resources)
        ticks.append(result)
        if result.run_requests:
            break
    states = [
        (e.metadata["batch_id"].value, e.metadata["status"].value)
        for t in ticks
        for e in t.asset_events or []
    ]
    assert (first_id, "in_progress") in states
    assert [r.partition_key for r in ticks[-1].run_requests] == ["exa|00000"]
    assert all(not t.run_requests for t in ticks[:-1])  # nothing requested while a batch was open
    return resources, config, first_id, requests


def _judge_without_sync_calls(server, resources, config, instance, sync_api):
    before = collections.Counter(r["api"] for r in server.requests())[sync_api]
    materialize_stages(resources, config, [([benchmark.judgments], ["exa"])], instance)
    assert collections.Counter(r["api"] for r in server.requests())[sync_api] == before
    verdicts = pl.read_parquet(tables.JUDGMENTS.path("exa"))
    assert verdicts.height > 0
    assert verdicts["relevance_failure"].null_count() == verdicts.height
    assert verdicts["precision_failure"].null_count() == verdicts.height


def test_openai_batch_partial_failure_resubmits_only_the_missing(shared_data, data_dir, tmp_path):
    folder = write_scifact_slice(shared_data, claims=3, distractors=20)
    extra = ("--batch-polls", "1", "--batch-fail-every", "4")
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=extra) as server:
        instance = dg.DagsterInstance.local_temp(str(tmp_path))
        resources, config, first_id, requests = _run_batch_flow(server, "openai", folder, instance)
        records = {r["id"]: r for r in map(_load, (data_dir / "benchmark" / "batches").glob("*.json"))}
        first = records[first_id]
        assert first["status"] == "completed" and len(first["missing"]) == requests // 4
        second = records[first["resubmitted_as"]]
        assert sorted(second["requests"]) == sorted(
            first["missing"]
        )  # only the missing, nothing answered twice
        assert second["missing"] == [] and second["state"] == batch.ENDED
        _judge_without_sync_calls(server, resources, config, instance, "openai")


def test_anthropic_batch_expiry_resubmits_the_unanswered(shared_data, data_dir, tmp_path):
    folder = write_scifact_slice(shared_data, claims=3, distractors=20)
    extra = ("--batch-polls", "1", "--batch-expire-first")
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=extra) as server:
        instance = dg.DagsterInstance.local_temp(str(tmp_path))
        resources, config, first_id, requests = _run_batch_flow(server, "anthropic", folder, instance)
        records = {r["id"]: r for r in map(_load, (data_dir / "benchmark" / "batches").glob("*.json"))}
        first = records[first_id]
        assert first["answered"] == requests // 2 and len(first["missing"]) == requests - requests // 2
        assert sorted(records[first["resubmitted_as"]]["requests"]) == sorted(first["missing"])
        _judge_without_sync_calls(server, resources, config, instance, "anthropic")


def _load(path):
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def test_question_batch_feeds_synthetic_questions(shared_data, data_dir, tmp_path):
    write_scifact_slice(shared_data, claims=3, distractors=20)
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=("--batch-polls", "1")) as server:
        resources = _resources(server, "openai")
        resources["question_llm"] = LLMResource(
            backend="openai", model="gpt-4o", api_key="sk-test", base_url=server.url + "/v1"
        )
        instance = dg.DagsterInstance.local_temp(str(tmp_path))
        config = {"ops": {"question_batch": {"config": {"count": 4, "seed": 3}}}}
        submitted = materialize_stages(resources, config, [([benchmark.question_batch], [None])], instance)
        metadata = submitted.asset_materializations_for_node("question_batch")[0].metadata
        assert metadata["requests"].value == 4
        ticks = [_tick(instance, resources) for _ in range(2)]
        assert not ticks[0].run_requests
        (request,) = ticks[1].run_requests
        assert request.asset_selection == [dg.AssetKey("synthetic_questions")]
        assert request.run_config["ops"]["synthetic_questions"]["config"] == {"count": 4, "seed": 3}
        sync_before = collections.Counter(r["api"] for r in server.requests())["openai"]
        materialize_stages(
            resources, request.run_config, [([benchmark.synthetic_questions], [None])], instance
        )
        assert collections.Counter(r["api"] for r in server.requests())["openai"] == sync_before
        questions = pl.read_parquet(tables.SYNTHETIC_QUESTIONS.path())
        assert questions.height == 4 and set(questions["generator"]) == {"llm:openai:gpt-4o"}


def test_cli_batch_run_submits_polls_resubmits_and_judges_from_the_cache(
    shared_data, data_dir, tmp_path, monkeypatch, capsys
):
    """`lumina benchmark run --batch`: the judge's prompts go through the Batch API stand-in (a partly failed
    batch resubmitted for what it missed), the sensor's ticks poll until every batch ended, and the judging and
    the pooled judging then send no synchronous call."""
    from lumina_assets.cli.main import main

    folder = write_scifact_slice(shared_data, claims=4, distractors=20)
    extra = ("--batch-polls", "1", "--batch-fail-every", "4")
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=extra) as server:
        for name, value in {
            "LUMINA_CORPUS": str(folder),
            "LUMINA_JUDGE_BACKEND": "openai",
            "LUMINA_JUDGE_MODEL": "gpt-4o",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": server.url + "/v1",
            "LUMINA_QUESTION_BACKEND": "offline",
            "LUMINA_EXA_URL": server.url,
            "EXA_API_KEY": "exa-test",
        }.items():
            monkeypatch.setenv(name, value)
        options = ["--providers", "exa", "--synthetic", "0", "--beir-queries", "4", "--depths", "0"]
        options += ["--page-sizes", "10", "--calibration-queries", "3", "--shard-size", "2", "--workers", "1"]
        assert main(["benchmark", "run", *options, "--batch", "--poll-seconds", "0.1"]) == 0
    out = capsys.readouterr().out
    records = {r["id"]: r for r in map(_load, (data_dir / "benchmark" / "batches").glob("*.json"))}
    assert {r["partition"] for r in records.values()} == {"exa|00000", "exa|00001"}
    assert {r["state"] for r in records.values()} == {batch.ENDED}
    resubmitted = [r for r in records.values() if r["resubmitted_as"]]
    assert resubmitted and all(records[r["resubmitted_as"]]["missing"] == [] for r in resubmitted)
    assert "'status': 'in_progress'" in out  # the sensor's ticks polled an open batch
    actual = ledger.actual_by_plan_role(["exa"])["llm"]
    assert actual["judge"]["calls"] == actual["pooled"]["calls"] == 0  # every verdict from a batch
    verdicts = pl.read_parquet(tables.JUDGMENTS.path("exa"))
    assert verdicts.height > 0 and verdicts["relevance_failure"].null_count() == verdicts.height
    pooled = runs.read_run(runs.latest())[0]["pooled"]
    assert pooled["pool_items"] > 0
    report = (data_dir / "reports" / "benchmark.md").read_text(encoding="utf-8")
    assert "| exa |" in report
