"""A run larger than one batch may hold: `judge_batch` cuts it at the request and byte limits (the OpenAI stand-in
fails a batch over them, as the Batch API does), reads the levels a shard of questions at a time (one partition
each), and the sensor's flow then answers every request with no synchronous call."""

from __future__ import annotations

import collections
import json
import math

import dagster as dg
import pytest
from api_standins import StandInServer
from benchmark_slice import materialize_stages, write_scifact_slice

from evals import batch, runner
from lumina_assets.defs import benchmark
from resources.llm import LLMResource
from resources.providers import ExaResource, SemanticScholarResource, SerpApiScholarResource
from sensors.benchmark_batches import judge_batch_sensor

pytestmark = pytest.mark.slow

LIMIT = 7  # requests per batch, the stand-in's and the asset's


def _resources(server: StandInServer) -> dict:
    return {
        "question_llm": LLMResource(backend="offline"),
        "judge_llm": LLMResource(
            backend="openai", model="gpt-4o", api_key="sk-test", base_url=server.url + "/v1", temperature=0.0
        ),
        "semantic_scholar": SemanticScholarResource(),
        "google_scholar": SerpApiScholarResource(),
        "exa": ExaResource(api_key="exa-test", base_url=server.url),
    }


def _config(folder, shard_size=500, **judge_batch) -> dict:
    config = benchmark.default_run_config(
        synthetic=0, beir_queries=4, depths=[0], page_sizes=[3], shard_size=shard_size
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    config["ops"]["judge_batch"] = {"config": judge_batch}
    return config


def _tick(instance, resources):
    definitions = dg.Definitions(assets=benchmark.ASSETS, sensors=[judge_batch_sensor], resources=resources)
    context = dg.build_sensor_context(
        instance=instance,
        instance_ref=instance.get_ref(),
        definitions=definitions,
        resources={"judge_llm": resources["judge_llm"], "question_llm": resources["question_llm"]},
    )
    return judge_batch_sensor.evaluate_tick(context)


def _records(data_dir) -> list[dict]:
    folder = data_dir / "benchmark" / "batches"
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]


def _levels_then_batch(server, folder, instance, config):
    resources = _resources(server)
    stages = [
        ([benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions], [None]),
        ([benchmark.provider_results, benchmark.recursive_results], ["exa"]),
        ([benchmark.judge_batch], ["exa"]),
    ]
    result = materialize_stages(resources, config, stages, instance)
    return resources, result.asset_materializations_for_node("judge_batch")[0].metadata


def test_a_run_over_the_request_limit_is_cut_into_batches_that_all_complete(
    shared_data, data_dir, tmp_path, monkeypatch
):
    folder = write_scifact_slice(shared_data, claims=4, distractors=20)
    seen_questions = []
    judge_inputs = runner.judge_inputs

    def recording(levels, questions, **kwargs):
        seen_questions.append(set(levels["question_id"].to_list()))
        return judge_inputs(levels, questions, **kwargs)

    monkeypatch.setattr(runner, "judge_inputs", recording)
    extra = ("--batch-polls", "0", "--batch-max-requests", str(LIMIT))
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=extra) as server:
        instance = dg.DagsterInstance.local_temp(str(tmp_path))
        config = _config(folder, shard_size=2, max_requests=LIMIT)
        resources, metadata = _levels_then_batch(server, folder, instance, config)
        # the levels were read a shard (two questions) at a time, never whole
        assert len(seen_questions) == 2 and all(len(q) <= 2 for q in seen_questions)
        records = _records(data_dir)
        by_partition = collections.Counter()
        for record in records:
            by_partition[record["partition"]] += len(record["requests"])
        assert sorted(by_partition) == ["exa|00000", "exa|00001"]
        assert sum(by_partition.values()) > LIMIT
        assert len(records) == sum(math.ceil(n / LIMIT) for n in by_partition.values())
        assert metadata["batches"].value == math.ceil(by_partition["exa|00001"] / LIMIT)
        assert all(len(r["requests"]) <= LIMIT for r in records)
        assert not list((data_dir / "benchmark" / "batches").glob("*.partial"))  # nothing left half written
        result = _tick(instance, resources)
        # once every batch of a partition has ended
        assert sorted(r.partition_key for r in result.run_requests) == ["exa|00000", "exa|00001"]
        requests = sum(by_partition.values())
        records = _records(data_dir)
        assert {r["status"] for r in records} == {"completed"}
        assert sum(r["answered"] for r in records) == requests and not any(r["missing"] for r in records)
        sync_before = collections.Counter(r["api"] for r in server.requests())["openai"]
        materialize_stages(resources, config, [([benchmark.judgments], ["exa"])], instance)
        assert collections.Counter(r["api"] for r in server.requests())["openai"] == sync_before


def test_the_byte_limit_cuts_batches_too(shared_data, data_dir, tmp_path):
    folder = write_scifact_slice(shared_data, claims=4, distractors=20)
    max_bytes = 12_000
    extra = ("--batch-polls", "0", "--batch-max-bytes", str(max_bytes))
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=extra) as server:
        instance = dg.DagsterInstance.local_temp(str(tmp_path))
        resources, metadata = _levels_then_batch(
            server, folder, instance, _config(folder, max_bytes=max_bytes)
        )
        records = _records(data_dir)
        assert metadata["batches"].value == len(records) > 1
        client = resources["judge_llm"].get_client()
        for record in records:
            size = sum(len(batch._line(client, r)) for r in batch.read_requests(record))
            assert size <= max_bytes
        _tick(instance, resources)
        assert {r["status"] for r in _records(data_dir)} == {"completed"}


def test_the_stand_in_fails_a_batch_over_its_limits(data_dir, tmp_path):
    """What the splitting guards against: one batch over the limit fails whole, nothing answered."""
    extra = ("--batch-polls", "0", "--batch-max-requests", str(LIMIT))
    with StandInServer(tmp_path / "requests.jsonl", latency_ms=1, extra=extra) as server:
        client = _resources(server)["judge_llm"].get_client()
        params = {"temperature": 0.0, "max_tokens": client.max_tokens, "system": None}
        requests = [batch.BatchRequest(f"id-{i}", f"prompt {i}", params) for i in range(LIMIT + 1)]
        record = batch.poll(client, batch.submit_all(client, requests, partition="exa")[0])
        assert record["status"] == "failed" and record["answered"] == 0
        assert len(record["missing"]) == LIMIT + 1
