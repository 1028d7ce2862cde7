"""The embedding fan-out (defs/embedding_fanout.py, indexing/staged_vectors.py).

- Under Dagster's multiprocess executor (a real instance, `execute_job(reconstructable(...))`), three parts embed
  at the same time in three processes, and the index they lead to has the same rows and vectors as the one-step
  path (`LUMINA_EMBED_PARTS=1`), which stages nothing.
- Staged vectors of another form are never used (int8 against fp32), a retried part embeds nothing twice, and the
  number of parts follows the setting or, by default, the passage count and cores.
- Under `LUMINA_EXECUTOR=k8s` each part is a pod of its own, rendered by dagster-k8s's own code: with
  `LUMINA_K8S_GPU` every part's pod asks for the GPU, the plan and staging steps do not, and secrets reach the pods
  by reference only.
"""

from __future__ import annotations

import json
import os
import random

import dagster as dg
import numpy as np
import polars as pl
import pytest
from fanout_job import RENDEZVOUS_DIR, RENDEZVOUS_PARTS, index_job
from hashing_embedder import HashingEmbedder
from test_k8s_pod_specs import (  # the k8s fixture and pod renderers of the index job's own test
    GPU,
    assert_secrets_by_reference,
    k8s,  # noqa: F401 - a fixture
    shipped_definitions,
    step_container,
    step_pods,
)

from lumina_assets.core import settings, tables
from lumina_assets.indexing import lancedb_tables, staged_vectors
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.indexing.table_ops import open_table, read_columns, vectors_from_arrow

WORDS = [f"w{i}" for i in range(400)]
PAPERS, PASSAGES_PER_PAPER = 40, 4


def _write_upstream() -> int:
    """Two ingest batches of synthetic papers and passages (deterministic); returns the passage count."""
    rng = random.Random(27)
    papers, passages = [], []
    for p in range(PAPERS):
        paper_id = f"paper-{p:03d}"
        papers.append(
            {"paper_id": paper_id, "title": " ".join(rng.sample(WORDS, 5)), "ingest_batch": f"batch-{p % 2}"}
        )
        for n in range(PASSAGES_PER_PAPER):
            passages.append(
                {
                    "passage_id": f"{paper_id}-{n}",
                    "paper_id": paper_id,
                    "kind": "abstract" if n == 0 else "body",
                    "text": " ".join(rng.choices(WORDS, k=rng.randint(20, 60))),
                }
            )
    frame = pl.DataFrame(passages)
    for batch in ("batch-0", "batch-1"):
        ids = [p["paper_id"] for p in papers if p["ingest_batch"] == batch]
        tables.write(tables.PASSAGES, frame.filter(pl.col("paper_id").is_in(ids)), batch)
    tables.write(tables.PAPERS, pl.DataFrame(papers))
    return frame.height


def _run_index(tmp_path, monkeypatch, name: str, parts: int, rendezvous: bool):
    """One run of the index job (staged_passage_vectors → passage_index) in its own data dir, multiprocess."""
    data = tmp_path / name
    monkeypatch.setenv("LUMINA_DATA_DIR", str(data))
    monkeypatch.setenv("LUMINA_EMBED_PARTS", str(parts))
    monkeypatch.delenv("LUMINA_LANCEDB_URI", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(settings.PROJECT_ROOT / "tests" / "support"))  # the job's module
    if rendezvous:
        (tmp_path / "rendezvous").mkdir()
        monkeypatch.setenv(RENDEZVOUS_DIR, str(tmp_path / "rendezvous"))
        monkeypatch.setenv(RENDEZVOUS_PARTS, str(parts))
    else:
        monkeypatch.delenv(RENDEZVOUS_DIR, raising=False)
    count = _write_upstream()
    (tmp_path / f"{name}-dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / f"{name}-dagster")) as instance:
        # the one-step path in one process (it has a single embedding step); the fan-out multiprocess
        executor = {"multiprocess": {"max_concurrent": parts}} if parts > 1 else {"in_process": {}}
        config = {"execution": {"config": executor}}
        with dg.execute_job(dg.reconstructable(index_job), instance=instance, run_config=config) as result:
            assert result.success, [e.message for e in result.all_events if e.is_failure]
            events = result.all_events
    return data, count, events


def _index_rows(data) -> dict[str, tuple]:
    db = connect_lancedb(str(data / "lancedb"), {})
    table = open_table(db, lancedb_tables.PASSAGES_TABLE)
    stored = read_columns(table, ["passage_id", "text", "text_hash", "row_hash", "vector"])
    vectors = vectors_from_arrow(stored["vector"])
    return {
        pid: (text, text_hash, row_hash, vectors[i].tobytes())
        for i, (pid, text, text_hash, row_hash) in enumerate(
            zip(
                *(stored[c].to_pylist() for c in ("passage_id", "text", "text_hash", "row_hash")), strict=True
            )
        )
    }


def _paper_rows(data) -> dict[str, tuple]:
    db = connect_lancedb(str(data / "lancedb"), {})
    stored = read_columns(open_table(db, lancedb_tables.PAPERS_TABLE), ["paper_id", "text_hash", "row_hash"])
    return {
        pid: (text_hash, row_hash)
        for pid, text_hash, row_hash in zip(
            *(stored[c].to_pylist() for c in ("paper_id", "text_hash", "row_hash")), strict=True
        )
    }


def _materialization(events, asset: str) -> dict:
    for event in events:
        if event.event_type_value == "ASSET_MATERIALIZATION":
            materialization = event.event_specific_data.materialization
            if materialization.asset_key == dg.AssetKey(asset):
                return {key: value.value for key, value in materialization.metadata.items()}
    raise AssertionError(f"{asset} was not materialized")


def test_parts_run_as_parallel_processes_and_index_the_same_vectors(tmp_path, monkeypatch):
    one_step, count, one_step_events = _run_index(tmp_path, monkeypatch, "one-step", 1, rendezvous=False)
    fanned, _, events = _run_index(tmp_path, monkeypatch, "fan-out", 3, rendezvous=True)

    # the one-step path: no part ran, nothing was staged, passage_index embedded every passage itself
    steps = {e.step_key for e in one_step_events if e.event_type_value == "STEP_SUCCESS"}
    assert not any("embed_passage_part" in step for step in steps)
    assert _materialization(one_step_events, "passage_index")["passages_from_fanout"] == 0

    # the fan-out: three part steps, each in a process of its own (none the run's), all alive together (the
    # rendezvous embedder fails a part that waits for the others in vain)
    parts = {
        e.step_key: e
        for e in events
        if e.event_type_value == "STEP_OUTPUT" and "embed_passage_part" in (e.step_key or "")
    }
    assert sorted(parts) == [f"staged_passage_vectors.embed_passage_part[part_{i}]" for i in range(3)]
    part_metadata = [{k: v.value for k, v in e.event_specific_data.metadata.items()} for e in parts.values()]
    processes = {m["process"] for m in part_metadata}
    # Dagster's own record of where each step ran agrees: three worker processes, none the orchestrating one
    started = {
        e.step_key: e.pid for e in events if e.event_type_value == "STEP_START" and e.step_key in parts
    }
    assert set(started.values()) == processes
    assert len(processes) == 3 and os.getpid() not in processes
    assert len(list((tmp_path / "rendezvous").iterdir())) >= 3
    assert sum(m["embedded"] for m in part_metadata) == count
    assert all(m["embedded"] > 0 for m in part_metadata)
    # the three processes share this machine's cores instead of each starting a thread per core
    assert [m["cores"] for m in part_metadata] == [max(1, len(os.sched_getaffinity(0)) // 3)] * 3
    assert _materialization(events, "staged_passage_vectors")["staged_vectors"] == count
    # passage_index took every passage vector from the parts and then dropped the staging table
    index_metadata = _materialization(events, "passage_index")
    assert index_metadata["passages_from_fanout"] == count
    db = connect_lancedb(str(fanned / "lancedb"), {})
    assert open_table(db, staged_vectors.STAGED_TABLE) is None

    # same index rows and vectors, bit for bit, as the one-step path
    assert _index_rows(fanned) == _index_rows(one_step)
    assert len(_index_rows(fanned)) == count
    assert _paper_rows(fanned) == _paper_rows(one_step)


class _FormEmbedder(HashingEmbedder):
    """The hashing embedder claiming a numeric form, and a seed-shifted vector for int8 (another form's vectors)."""

    def __init__(self, form: str, seed: int = 0):
        super().__init__(dimension=16, seed=seed)
        self.form = form

    def encode(self, texts, **kwargs):
        vectors = super().encode(texts, **kwargs)
        return vectors[:, ::-1].copy() if self.form == "int8" else vectors


def test_staged_vectors_of_another_form_are_never_used_and_a_retried_part_embeds_nothing_twice(tmp_path):
    db = connect_lancedb(str(tmp_path / "lancedb"), {})
    texts = [f"passage {i} about w{i} and w{i + 1}" for i in range(10)]
    plan = staged_vectors.plan_parts(db, "run-1", texts, 2, 16)
    assert plan.parts == 2 and plan.per_part == (5, 5)
    int8 = _FormEmbedder("int8")
    stats = [staged_vectors.embed_part(db, "run-1", part, int8) for part in (0, 1)]
    assert [s.embedded for s in stats] == [5, 5] and {s.form for s in stats} == {"int8"}
    # a retried part finds its vectors staged and embeds none again
    again = staged_vectors.embed_part(db, "run-1", 0, int8)
    assert (again.embedded, again.already_staged) == (0, 5)
    assert staged_vectors.finish_plan(db, "run-1") == 10

    # an fp32 index build takes none of the int8 vectors: it encodes every text itself
    fp32 = staged_vectors.StagedVectorEmbedder(db, _FormEmbedder("fp32"))
    vectors = fp32.encode(texts)
    assert (fp32.reused, fp32.encoded) == (0, 10)
    assert np.array_equal(vectors, _FormEmbedder("fp32").encode(texts))
    # an int8 one takes them all, the same vectors the parts made
    int8_build = staged_vectors.StagedVectorEmbedder(db, _FormEmbedder("int8"))
    assert np.array_equal(
        int8_build.encode(texts[:4] + ["a text no part embedded"]),
        int8.encode(texts[:4] + ["a text no part embedded"]),
    )
    assert (int8_build.reused, int8_build.encoded) == (4, 1)
    # another model of the same name and form (different weights) shares no key
    other_build = staged_vectors.StagedVectorEmbedder(db, _FormEmbedder("int8", seed=1))
    other_build.encode(texts)
    assert other_build.reused == 0


def test_parts_from_the_setting_or_by_count_and_cores(monkeypatch):
    per_part = staged_vectors.PASSAGES_PER_PART
    assert staged_vectors.parts_for(0, None, 8) == 1
    assert staged_vectors.parts_for(per_part, None, 8) == 1  # a small batch: the one-step path
    assert staged_vectors.parts_for(3 * per_part, None, 8) == 3
    assert staged_vectors.parts_for(100 * per_part, None, 2) == 2  # at most one part per core
    assert staged_vectors.parts_for(10, 4, 1) == 4  # the setting wins
    assert staged_vectors.parts_for(3, 8, 1) == 3  # never more parts than passages
    monkeypatch.setenv("LUMINA_EMBED_PARTS", "auto")
    assert settings.get().embedding.embed_parts is None
    monkeypatch.setenv("LUMINA_EMBED_PARTS", "4")
    assert settings.get().embedding.embed_parts == 4
    monkeypatch.setenv("LUMINA_EMBED_PARTS", "0")
    with pytest.raises(ValueError, match="LUMINA_EMBED_PARTS"):
        settings.get()


def test_parts_on_one_machine_share_its_cores_once():
    sixteen = list(range(16))
    shares = [staged_vectors.part_cores(part, 3, sixteen) for part in range(3)]
    assert [len(share) for share in shares] == [5, 5, 5]
    assert len({core for share in shares for core in share}) == 15  # no core given twice
    assert staged_vectors.part_cores(0, 1, sixteen) == sixteen  # one part: every core
    assert [staged_vectors.part_cores(p, 3, [4, 7]) for p in range(3)] == [
        [4],
        [7],
        [4],
    ]  # more parts than cores
    assert staged_vectors.part_cores(2, 4, [3]) == [3]


def test_each_part_is_a_gpu_pod_with_secrets_by_reference(k8s, monkeypatch):  # noqa: F811 - the fixture
    from sensors.k8s import EMBEDDING_STEPS

    instance, canaries, created, kubeconfig = k8s
    defs = shipped_definitions(monkeypatch, LUMINA_EXECUTOR="k8s", LUMINA_K8S_GPU="1")
    pods = step_pods(instance, defs, "index_passages", kubeconfig, created, parts=3)
    part_steps = sorted(step for step in pods if "embed_passage_part[" in step)
    assert part_steps == [f"staged_passage_vectors.embed_passage_part[part_{i}]" for i in range(3)]
    assert "embed_passage_part" in EMBEDDING_STEPS
    names = set()
    for step, job_body in pods.items():
        limits = (step_container(job_body).get("resources") or {}).get("limits") or {}
        pod_spec = job_body["body"]["spec"]["template"]["spec"]
        if step in part_steps or step == "passage_index":
            assert limits.get(GPU) == "1", step
            assert pod_spec["nodeSelector"] == {f"{GPU}.present": "true"}, step
        else:  # planning and staging need no GPU
            assert GPU not in json.dumps(job_body), step
        names.add(job_body["body"]["metadata"]["name"])
        assert_secrets_by_reference(job_body, canaries)
    assert len(names) == len(pods)  # one Kubernetes Job per step: every part a pod of its own


def test_automation_requests_the_fanout_with_the_index_and_its_vectors_alone_trigger_nothing():
    """The shipped automation conditions: new passages request staged_passage_vectors and passage_index in the same
    tick (one run, the parts first); staged vectors alone never request the index again."""
    from lumina_assets.definitions import defs
    from lumina_assets.defs.partitions import INGEST_BATCHES

    watched = [dg.AssetKey("staged_passage_vectors"), dg.AssetKey("passage_index")]
    instance = dg.DagsterInstance.ephemeral()
    cursor = None

    def tick() -> list[str]:
        nonlocal cursor
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        cursor = result.cursor
        return [key.to_user_string() for key in watched if result.get_requested_partitions(key)]

    assert tick() == []
    instance.add_dynamic_partitions(INGEST_BATCHES.name, ["batch-1"])
    instance.report_runless_asset_event(dg.AssetMaterialization("papers"))
    instance.report_runless_asset_event(dg.AssetMaterialization("passages", partition="batch-1"))
    assert tick() == ["staged_passage_vectors", "passage_index"]
    for key in watched:
        instance.report_runless_asset_event(dg.AssetMaterialization(key))
    assert tick() == []
    instance.report_runless_asset_event(dg.AssetMaterialization("staged_passage_vectors"))
    assert tick() == []
