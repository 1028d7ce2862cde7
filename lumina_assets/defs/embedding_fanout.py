"""`staged_passage_vectors`: a graph-backed asset that splits the new passages into parts, embeds each part in its
own step (a process, or a pod under `LUMINA_EXECUTOR=k8s`) and stages their vectors for `passage_index`, which stays
the one writer of the index. The plan and the vectors live in the index's LanceDB database, so the steps pass
nothing through an IO manager (docs/production.md#embedding-a-large-batch-in-parallel)."""

import multiprocessing
import os

import dagster as dg

from lumina_assets.core import settings
from lumina_assets.defs import indexing as index_stage
from lumina_assets.indexing import encoder_forms, staged_vectors
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

PART_KEY_PREFIX = "part_"


def _plan_id(context: dg.OpExecutionContext) -> str:
    """The plan of this run, and of its re-executions (a retried part finds the plan its run wrote)."""
    return context.run.root_run_id or context.run_id


@dg.op(
    ins={"passages": dg.In(dg.Nothing), "papers": dg.In(dg.Nothing)},
    out=dg.DynamicOut(dg.Nothing),
    description="Split the passages passage_index would embed into parts (LUMINA_EMBED_PARTS; auto by count and "
    "cores); one mapped step per part.",
)
def plan_embedding_parts(
    context: dg.OpExecutionContext, lancedb: LanceDBResource, embedder: EmbedderResource
):
    requested, cores = settings.get().embedding.embed_parts, encoder_forms.available_cores()
    if requested == 1:
        context.log.info("LUMINA_EMBED_PARTS=1: passage_index embeds the new passages itself")
        return
    passages, papers = index_stage.indexable_upstream(context.instance)
    if staged_vectors.parts_for(passages.height, requested, cores) == 1:  # no more to embed than upstream
        context.log.info(f"{passages.height} passages upstream: passage_index embeds the new ones itself")
        return
    db = lancedb.connect()
    model = embedder.get_embedder()
    texts = staged_vectors.texts_to_embed(db, passages, papers, model)
    parts = staged_vectors.parts_for(len(texts), requested, cores)
    plan = staged_vectors.plan_parts(db, _plan_id(context), texts, parts, int(model.dimension))
    context.log.info(
        f"{plan.texts} passages to embed in {plan.parts} part(s)"
        + (f" of {', '.join(map(str, plan.per_part))}" if plan.parts > 1 else ": passage_index embeds them")
    )
    if plan.parts > 1:
        for part in range(plan.parts):
            yield dg.DynamicOutput(None, mapping_key=f"{PART_KEY_PREFIX}{part}")


def _share_cores(db, plan_id: str, part: int) -> int:
    """The cores this part may use: under the multiprocess executor its share of the machine's (set as its affinity
    before the encoder starts a thread per core); a pod or the in-process executor keeps all it has."""
    if not hasattr(os, "sched_setaffinity"):
        return os.cpu_count() or 1
    available = sorted(os.sched_getaffinity(0))
    if multiprocessing.parent_process() is None:  # not a step process of the multiprocess executor
        return len(available)
    mine = staged_vectors.part_cores(part, staged_vectors.plan_size(db, plan_id), available)
    if len(mine) < len(available):
        os.sched_setaffinity(0, mine)
    return len(mine)


@dg.op(
    ins={"planned": dg.In(dg.Nothing)},
    out=dg.Out(dg.Nothing),
    description="Embed one part of the plan and append its vectors to the staging table (a pod of its own, on a "
    "GPU node where LUMINA_K8S_GPU is set).",
)
def embed_passage_part(context: dg.OpExecutionContext, lancedb: LanceDBResource, embedder: EmbedderResource):
    part = int(context.get_mapping_key().removeprefix(PART_KEY_PREFIX))
    db = lancedb.connect()
    plan_id = _plan_id(context)
    cores = _share_cores(db, plan_id, part)
    stats = staged_vectors.embed_part(db, plan_id, part, embedder.get_embedder(), log_fn=context.log.info)
    context.add_output_metadata(
        {
            "part": part,
            "passages": stats.texts,
            "embedded": stats.embedded,
            "already_staged": stats.already_staged,
            "embed_seconds": round(stats.seconds, 2),
            "passages_per_second": round(stats.embedded / stats.seconds, 1) if stats.seconds else 0.0,
            "form": stats.form,
            "process": os.getpid(),
            "cores": cores,
        }
    )


@dg.op(
    ins={"parts": dg.In(dg.Nothing)},
    out=dg.Out(dg.Nothing),
    description="Index the staged vectors by key and drop the plan.",
)
def stage_embedded_parts(context: dg.OpExecutionContext, lancedb: LanceDBResource):
    rows = staged_vectors.finish_plan(lancedb.connect(), _plan_id(context))
    context.add_output_metadata({"staged_vectors": rows})


@dg.graph_asset(
    name="staged_passage_vectors",
    group_name="index",
    ins={
        "passages": dg.AssetIn("passages", dagster_type=dg.Nothing),
        "papers": dg.AssetIn("papers", dagster_type=dg.Nothing),
    },
    automation_condition=dg.AutomationCondition.eager(),
    description="Vectors of the passages passage_index is about to embed, embedded in parallel parts "
    "(LUMINA_EMBED_PARTS) and staged for it; nothing is staged with one part.",
)
def staged_passage_vectors(passages, papers):
    planned = plan_embedding_parts(passages=passages, papers=papers)
    return stage_embedded_parts(parts=planned.map(lambda p: embed_passage_part(planned=p)).collect())


ASSETS = [staged_passage_vectors]
CHECKS: list = []


def build_resources() -> dict:
    return {"lancedb": LanceDBResource(), "embedder": EmbedderResource()}
