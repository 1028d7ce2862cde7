"""Provider × shard partitions: `questions` registers a shard partition per shard of questions, questions added
later make new shard partitions and only those compute, a failed shard partition reruns alone, each partition has
its own materialization, and the provider's table is every shard's rows."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest
from benchmark_slice import shard_keys, write_scifact_slice
from mocked_benchmark_apis import StandInLLM, resources_with

from evals import runner
from lumina_assets.core import tables
from lumina_assets.defs import benchmark
from lumina_assets.defs.partitions import SHARDS

pytestmark = pytest.mark.slow

STAGES = (benchmark.provider_results, benchmark.recursive_results, benchmark.judgments)


def _config(folder, beir):
    config = benchmark.default_run_config(
        synthetic=0, beir_queries=beir, depths=[0, 1], page_sizes=[3], calibration_queries=3, shard_size=2
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    return config


def _run(resources, config, instance, selection, partition=None):
    names = {a.key.to_user_string() for a in selection}
    return dg.materialize(
        benchmark.ASSETS + benchmark.CHECKS,
        selection=selection,
        partition_key=partition,
        resources=resources,
        instance=instance,
        raise_on_error=False,
        run_config={"ops": {k: v for k, v in config["ops"].items() if k in names}},
    )


def _shards(resources, config, instance, keys) -> dict[str, str]:
    """Each stage for each partition key; partition -> the judgments step's state (computed or reused)."""
    states = {}
    for key in keys:
        for asset in STAGES:
            result = _run(resources, config, instance, [asset], key)
            assert result.success
        states[key] = result.asset_materializations_for_node("judgments")[0].metadata["state"].value
    return states


def test_new_questions_run_only_new_shard_partitions(shared_data, data_dir, monkeypatch):
    folder = write_scifact_slice(shared_data, claims=6, distractors=30)
    llm = StandInLLM()
    resources = resources_with(llm)
    instance = dg.DagsterInstance.ephemeral()
    questions = [benchmark.user_queries, benchmark.synthetic_questions, benchmark.questions]

    assert _run(resources, _config(folder, 4), instance, questions).success
    assert instance.get_dynamic_partitions(SHARDS.name) == ["00000", "00001"]
    first = shard_keys("exa")
    assert first == ["exa|00000", "exa|00001"]
    assert _shards(resources, _config(folder, 4), instance, first) == dict.fromkeys(first, "computed")
    calls = llm.calls

    # two more questions: one new shard partition, the old ones stay materialized and unchanged
    assert _run(resources, _config(folder, 6), instance, questions).success
    assert instance.get_dynamic_partitions(SHARDS.name) == ["00000", "00001", "00002"]
    assert shard_keys("exa") == [*first, "exa|00002"]
    assert _shards(resources, _config(folder, 6), instance, ["exa|00002"]) == {"exa|00002": "computed"}
    sent_for_new_shard = llm.calls - calls
    assert 0 < sent_for_new_shard < calls  # not the whole run again
    # an old shard rerun is reused, without a call
    assert _shards(resources, _config(folder, 6), instance, ["exa|00000"]) == {"exa|00000": "reused"}
    assert llm.calls == calls + sent_for_new_shard
    # each provider × shard has its own materialization; the provider's tables hold every shard's questions
    for asset in STAGES:
        assert instance.get_materialized_partitions(asset.key) == set(shard_keys("exa"))
    levels = pl.read_parquet(tables.RECURSIVE_RESULTS.path("exa"))
    assert levels["question_id"].n_unique() == 6
    verdicts = pl.read_parquet(tables.JUDGMENTS.path("exa"))
    assert set(verdicts["question_id"]) == set(levels["question_id"])

    # a shard partition that fails is reported failed and reruns alone, from the cache for what it had asked
    judge_inputs = runner.judge_inputs

    def failing(levels, part, **kwargs):
        raise RuntimeError("judge down")

    monkeypatch.setattr(runner, "judge_inputs", failing)
    (data_dir / "benchmark" / "shards" / "judgments" / "exa" / "00001.parquet").unlink()
    assert not _run(resources, _config(folder, 6), instance, [benchmark.judgments], "exa|00001").success
    monkeypatch.setattr(runner, "judge_inputs", judge_inputs)
    result = _run(resources, _config(folder, 6), instance, [benchmark.judgments], "exa|00001")
    assert result.success
    assert result.asset_materializations_for_node("judgments")[0].metadata["state"].value == "computed"
    assert llm.calls == calls + sent_for_new_shard  # its verdicts were cached
    assert pl.read_parquet(tables.JUDGMENTS.path("exa")).height == verdicts.height


def test_the_runner_overlaps_judging_with_searching_one_search_per_provider():
    """`lumina benchmark run` runs provider × shard steps side by side: searching steps first, never two of one
    provider at once (its rate limit is per process), and a shard's judging beside another's searching."""
    from lumina_assets.cli.benchmark_steps import next_step

    stages = ("provider_results", "recursive_results", "judgments")
    chains = [("bm25", "00000"), ("exa", "00000"), ("bm25", "00001"), ("exa", "00001")]
    progress = dict.fromkeys(chains, 0)
    assert next_step(chains, stages, progress, []) == (("bm25", "00000"), "provider_results")
    running = [(("bm25", "00000"), "provider_results")]
    assert next_step(chains, stages, progress, running) == (("exa", "00000"), "provider_results")
    running.append((("exa", "00000"), "provider_results"))
    assert next_step(chains, stages, progress, running) is None  # both providers are searching
    # exa's first shard searched: its judging waits while exa's next shard is searched, then runs beside it
    progress.update({("bm25", "00000"): 3, ("bm25", "00001"): 3, ("exa", "00000"): 2})
    assert next_step(chains, stages, progress, []) == (("exa", "00001"), "provider_results")
    running = [(("exa", "00001"), "provider_results")]
    assert next_step(chains, stages, progress, running) == (("exa", "00000"), "judgments")
    progress[("exa", "00001")] = 3
    # every step is done or running
    assert next_step(chains, stages, progress, [(("exa", "00000"), "judgments")]) is None
