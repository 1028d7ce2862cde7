"""The Kubernetes executor (`LUMINA_EXECUTOR=k8s`): dagster-k8s's `k8s_job_executor`, one pod per step; with
`LUMINA_K8S_GPU=<n>` the embedding steps' pods ask for n GPUs through its `per_step_k8s_config`, under what a run
sets. Secrets never go in this config: pods get them from the run launcher's `env_secrets`."""

from __future__ import annotations

import dagster as dg

from lumina_assets.core import settings

# The ops that embed passages (per_step_k8s_config matches by op name, so every fan-out part's pod gets the request)
EMBEDDING_STEPS = ("passage_index", "embed_passage_part")
GPU_RESOURCE = "nvidia.com/gpu"


def gpu_step_config(gpus: int) -> dict:
    """dagster-k8s per-step config for a pod with `gpus` GPUs on a node that has them."""
    return {
        "container_config": {"resources": {"limits": {GPU_RESOURCE: str(gpus)}}},
        "pod_spec_config": {
            "node_selector": {f"{GPU_RESOURCE}.present": "true"},
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def _merge(defaults: dict, given: dict) -> dict:
    """`given` over `defaults`, recursively for nested dicts (a run's values win)."""
    merged = dict(defaults)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def k8s_executor(gpus: int | None = None) -> dg.ExecutorDefinition:
    """`k8s_job_executor`, with the embedding step on `gpus` GPUs (default: LUMINA_K8S_GPU)."""
    from dagster_k8s import k8s_job_executor  # the `k8s` extra, installed in the image

    gpus = settings.get().orchestration.k8s_gpus if gpus is None else gpus
    if gpus <= 0:
        return k8s_job_executor

    def with_gpu_step(config: dict) -> dict:
        per_step = dict(config.get("per_step_k8s_config") or {})
        for step in EMBEDDING_STEPS:
            per_step[step] = _merge(gpu_step_config(gpus), per_step.get(step) or {})
        return {**config, "per_step_k8s_config": per_step}

    return k8s_job_executor.configured(
        with_gpu_step, name=k8s_job_executor.name, config_schema=k8s_job_executor.config_schema.as_field()
    )
