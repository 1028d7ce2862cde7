"""The benchmark tests' inputs and stages: a real SciFact slice written as the corpus tables, and the benchmark
group materialized stage by stage, as the named benchmark jobs run it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl

from lumina_assets.core import tables
from lumina_assets.corpus.collections import load_beir
from lumina_assets.defs import benchmark
from lumina_assets.defs.partitions import PROVIDER_SHARDS, current_provider_shards
from lumina_assets.parsing.chunking import passages_for_paper


def write_scifact_slice(shared_data: Path, *, claims: int, distractors: int) -> Path:
    """papers + passages tables of the relevant abstracts of `claims` held-out SciFact train claims (the ones the
    benchmark's `user_queries` samples first with its default seed) and the first `distractors` abstracts of the
    corpus; returns the SciFact folder."""
    from evals.questions import load_beir_queries

    folder = shared_data / "scifact"
    collection = load_beir(folder, "train")
    corpus, qrels = collection.corpus, collection.qrels
    asked = load_beir_queries(folder, n=claims, seed=11)["beir_query_id"].to_list()
    keep = {d for q in asked for d in qrels[q] if d in corpus} | set(list(corpus)[:distractors])
    papers, passages = [], []
    for doc_id in sorted(keep):
        paper_id = f"beir-scifact:{doc_id}"
        title = corpus[doc_id]["title"]
        papers.append(
            {"paper_id": paper_id, "title": title, "doi": None, "source": "beir", "source_id": doc_id}
        )
        passages += [
            p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=corpus[doc_id]["text"])
        ]
    tables.write(tables.PAPERS, pl.DataFrame(papers))
    tables.write(tables.PASSAGES, pl.DataFrame(passages), "batch-1")
    return folder


def shard_keys(provider: str) -> list[str]:
    """The provider × shard partitions of the stored questions."""
    return [k for k in current_provider_shards() if k.startswith(provider + "|")]


def materialize_stages(resources, config, stages, instance) -> dg.ExecuteInProcessResult:
    """Each (assets, partition keys) stage in order, with the run config of those assets; every run must succeed.
    A provider's name as the key of a provider × shard asset stands for each shard of the stored questions.
    Returns the last run's result."""
    result = None
    for selection, partitions in stages:
        names = {a.key.to_user_string() for a in selection}
        sharded = selection[0].partitions_def == PROVIDER_SHARDS
        keys = [k for p in partitions for k in (shard_keys(p) if sharded and "|" not in p else [p])]
        for partition in keys:
            result = dg.materialize(
                benchmark.ASSETS + benchmark.CHECKS,
                selection=selection,
                partition_key=partition,
                resources=resources,
                instance=instance,
                run_config={"ops": {k: v for k, v in config["ops"].items() if k in names}},
            )
            assert result.success
    return result
