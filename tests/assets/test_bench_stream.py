"""Memory flat in the number of questions, structurally: the sharded stages and the scoring read a run a shard
(or slice) of questions at a time, the partition's data version comes from the shards' files (stable on a rerun,
moved by a changed shard), and scoring by slices gives the tables scoring the run whole gives."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
from benchmark_slice import materialize_stages, shard_keys, write_scifact_slice
from mocked_benchmark_apis import StandInLLM, resources_with

from evals import runner, runs, scored_run, scoring, shards
from lumina_assets.core import settings, tables
from lumina_assets.defs import benchmark

pytestmark = pytest.mark.slow

SHARD = 2


def _config(folder):
    config = benchmark.default_run_config(
        synthetic=0, beir_queries=6, depths=[0], page_sizes=[3], calibration_queries=3, shard_size=SHARD
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = str(folder)
    return config


def _materialize(resources, config, instance) -> dict[str, str]:
    """Questions, then the per-shard stages for exa; each stage's and shard's data version."""
    versions = {}
    stages = [([benchmark.user_queries, benchmark.synthetic_questions, benchmark.questions], [None])]
    stages += [([asset], ["exa"]) for asset in (benchmark.provider_results, benchmark.recursive_results)]
    stages += [([benchmark.judgments], ["exa"])]
    for stage in stages:
        materialize_stages(resources, config, [stage], instance)
    for asset in (benchmark.provider_results, benchmark.recursive_results, benchmark.judgments):
        for key in shard_keys("exa"):
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset.key, asset_partitions=[key]), limit=1
            ).records
            tags = records[0].asset_materialization.tags
            versions[f"{asset.key.to_user_string()}[{key}]"] = tags["dagster/data_version"]
    return versions


def test_stages_see_one_shard_and_version_by_shard_files(shared_data, data_dir, monkeypatch):
    folder = write_scifact_slice(shared_data, claims=6, distractors=30)
    seen: list[set[str]] = []
    judge_inputs = runner.judge_inputs

    def recording(levels, questions, **kwargs):
        seen.append(set(levels["question_id"].to_list()))
        return judge_inputs(levels, questions, **kwargs)

    monkeypatch.setattr(runner, "judge_inputs", recording)
    monkeypatch.setattr(shards, "ROW_GROUP", SHARD)
    resources = resources_with(StandInLLM())
    instance = dg.DagsterInstance.ephemeral()
    first = _materialize(resources, _config(folder), instance)
    assert len(seen) == 3 and all(0 < len(q) <= SHARD for q in seen)  # one shard's levels per call
    # the combined tables are written in row groups of a shard, so a slice of questions decodes a group at a time
    for table in (tables.PROVIDER_RESULTS, tables.RECURSIVE_RESULTS):
        groups = pq.ParquetFile(table.path("exa")).metadata
        assert groups.num_row_groups == 3 and groups.num_rows == 6
    # every shard reused: the same data versions
    assert _materialize(resources, _config(folder), instance) == first
    # one shard's verdicts changed on disk and its stamp gone: recomputed, the version follows the content
    shard = settings.benchmark_dir() / "shards" / "judgments" / "exa" / "00001.parquet"
    frame = pl.read_parquet(shard)
    shard.with_suffix(".json").unlink()
    third = _materialize(resources, _config(folder), instance)
    assert third == first  # recomputed to the same content
    # a shard's file changed under a fresh stamp: reused as it is, and that partition's version moves alone
    frame.with_columns(pl.lit(None, dtype=pl.Int8).alias("relevant")).write_parquet(shard)
    fourth = _materialize(resources, _config(folder), instance)
    assert {k for k in first if fourth[k] != first[k]} == {"judgments[exa|00001]"}


def test_levels_fingerprint_streams_and_ignores_row_order(shared_data, data_dir, monkeypatch):
    folder = write_scifact_slice(shared_data, claims=6, distractors=30)
    _materialize(resources_with(StandInLLM()), _config(folder), dg.DagsterInstance.ephemeral())
    path = tables.RECURSIVE_RESULTS.path("exa")
    levels = pl.read_parquet(path)
    monkeypatch.setattr(runs, "FINGERPRINT_SLICE", 2)  # read two rows at a time
    whole = runs.frame_fingerprint(levels)
    assert runs.frame_fingerprint(pl.scan_parquet(path)) == whole
    assert runs.frame_fingerprint(levels.reverse()) == whole
    changed = levels.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.lit("other query"))
        .otherwise(pl.col("query"))
        .alias("query")
    )
    assert runs.frame_fingerprint(changed) != whole


def test_scoring_by_slices_equals_scoring_whole(shared_data, data_dir, monkeypatch):
    folder = write_scifact_slice(shared_data, claims=6, distractors=30)
    _materialize(resources_with(StandInLLM()), _config(folder), dg.DagsterInstance.ephemeral())
    levels = pl.scan_parquet(tables.RECURSIVE_RESULTS.path("exa"))
    verdicts = pl.scan_parquet(tables.JUDGMENTS.path("exa"))
    questions = pl.read_parquet(tables.QUESTIONS.path())
    papers = pl.read_parquet(tables.PAPERS.path())
    sizes: list[int] = []
    question_scores = scoring.question_scores

    def recording(recursive, judgments, part, **kwargs):
        sizes.append(recursive["question_id"].n_unique())
        return question_scores(recursive, judgments, part, **kwargs)

    monkeypatch.setattr(scoring, "question_scores", recording)
    options = {"judged": True, "bootstrap_resamples": 200, "permutation_resamples": 200}
    sliced = scored_run.score_run(levels, verdicts, questions, papers, slice_questions=SHARD, **options)
    assert len(sizes) == 3 and max(sizes) <= SHARD
    whole = scored_run.score_run(levels, verdicts, questions, papers, slice_questions=1000, **options)
    assert sliced.per_question.equals(whole.per_question)
    assert sliced.scores.equals(whole.scores)
    assert sliced.matching == whole.matching and sliced.token_budget == whole.token_budget
