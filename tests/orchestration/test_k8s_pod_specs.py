"""The Kubernetes path without a cluster: under `LUMINA_EXECUTOR=k8s` the shipped code location's executor is
dagster-k8s's `k8s_job_executor` (sensors/k8s.py), and the Kubernetes Jobs it would create are rendered by
dagster-k8s's own code (`K8sStepHandler.launch_step`, `K8sRunLauncher.launch_run`) with the run launcher configured
by docs/production.md's `dagster.yaml` block as written. Only the final API call is replaced: the Kubernetes client's
`create_namespaced_job` records the body instead of sending it (a kubeconfig naming an address nothing listens on).

Asserted on the rendered pods: the embedding step (the `passage_index` asset's op) asks for `nvidia.com/gpu` and
GPU nodes when `LUMINA_K8S_GPU` is set, and no other step does; run config merges over it as the docs show; every
pod gets the API keys from the `lumina-api-keys` Secret (`envFrom`) and the PostgreSQL password by `secretKeyRef`;
no secret variable's value, set to a canary here, appears anywhere in a pod spec (the compressed step arguments
decoded too)."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import uuid
import zlib

import dagster as dg
import pytest
import yaml
from secret_names import secret_variables
from tools import missing_tool

from lumina_assets.core import settings

PROJECT = settings.PROJECT_ROOT
GPU = "nvidia.com/gpu"

try:
    import kubernetes
    from dagster_k8s.launcher import K8sRunLauncher
except ImportError:  # pragma: no cover - the dev extra installs it
    kubernetes = None


def _docs_yaml_blocks() -> list[dict]:
    text = (PROJECT / "docs" / "production.md").read_text(encoding="utf-8")
    section = text.split("## Kubernetes", 1)[1].split("\n## ", 1)[0]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def documented_run_launcher() -> dict:
    return next(block["run_launcher"] for block in _docs_yaml_blocks() if "run_launcher" in block)


def documented_run_config() -> dict:
    return next(block for block in _docs_yaml_blocks() if "execution" in block)


@pytest.fixture
def k8s(tmp_path, monkeypatch):
    """Canaries in every secret variable, a kubeconfig for an address nothing listens on, the Kubernetes client's
    create_namespaced_job recording bodies, and an instance whose run launcher is the docs' K8sRunLauncher."""
    if kubernetes is None:
        missing_tool("dagster-k8s is not installed; install the dev or k8s extra")
    canaries = {name: f"canary-{uuid.uuid4().hex}" for name in secret_variables()}
    for name, canary in canaries.items():
        monkeypatch.setenv(name, canary)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "none", "user": {}}],
                "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                "current-context": "none",
            }
        )
    )
    created: list[dict] = []

    def create_namespaced_job(self, namespace, body, **kwargs):
        created.append(
            {"namespace": namespace, "body": kubernetes.client.ApiClient().sanitize_for_serialization(body)}
        )
        return body

    monkeypatch.setattr(kubernetes.client.BatchV1Api, "create_namespaced_job", create_namespaced_job)
    launcher = documented_run_launcher()
    launcher["config"] |= {"load_incluster_config": False, "kubeconfig_file": str(kubeconfig)}
    with dg.instance_for_test(overrides={"run_launcher": launcher}) as instance:
        assert isinstance(instance.run_launcher, K8sRunLauncher)
        yield instance, canaries, created, str(kubeconfig)


def shipped_definitions(monkeypatch, **env) -> dg.Definitions:
    """lumina_assets/definitions.py executed afresh under `env` (it reads LUMINA_EXECUTOR when it is built), as a
    separate module: the process's own `lumina_assets.definitions` is neither imported nor changed here (built
    while the canaries are set, its resources would expect those keys in the tests after this one)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        spec = importlib.util.spec_from_file_location(
            "lumina_definitions_under_k8s", PROJECT / "lumina_assets" / "definitions.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.defs
    finally:
        for name in env:
            monkeypatch.delenv(name)


def step_pods(
    instance, defs, job_name: str, kubeconfig: str, created: list, run_config=None, parts: int = 2
) -> dict[str, dict]:
    """{step key: rendered Kubernetes Job} for every step of the job, through dagster-k8s's step handler; a
    dynamic output (the embedding fan-out's plan) is taken to have yielded `parts` parts, each a step."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._core.execution.api import create_execution_plan
    from dagster._core.execution.context.system import PlanData, PlanOrchestrationContext
    from dagster._core.execution.context_creation_job import create_context_free_log_manager
    from dagster._core.execution.plan.state import KnownExecutionState
    from dagster._core.execution.plan.step import ExecutionStep
    from dagster._core.execution.retries import RetryMode
    from dagster._core.executor.init import InitExecutorContext
    from dagster._core.executor.step_delegating.step_handler.base import StepHandlerContext
    from dagster._core.system_config.objects import ResolvedRunConfig
    from dagster._core.test_utils import create_run_for_test
    from dagster._grpc.types import ExecuteStepArgs

    job_def = defs.resolve_job_def(job_name)
    job = InMemoryJob(job_def)
    executor_def = job_def.executor_def
    run_config = dict(run_config or {})
    execution = dict(run_config.get("execution", {}).get("config", {}))
    execution |= {"load_incluster_config": False, "kubeconfig_file": kubeconfig}  # no cluster to be inside
    run_config["execution"] = {"config": execution}
    # as Dagster builds a run's executor (context_creation_job.create_executor): run config resolved against the
    # job, the executor's config mapping applied
    resolved = ResolvedRunConfig.build(job_def, run_config)
    executor = executor_def.executor_creation_fn(
        InitExecutorContext(
            job=job,
            executor_def=executor_def,
            executor_config=resolved.execution.execution_engine_config,
            instance=instance,
        )
    )
    origin = (
        ReconstructableRepository.for_module("lumina_assets.definitions", "defs", str(PROJECT))
        .get_reconstructable_job(job_name)
        .get_python_origin()
    )
    run = create_run_for_test(instance, job_name=job_name, job_code_origin=origin)
    plan = create_execution_plan(job, run_config=run_config)
    mapping_keys = [f"part_{part}" for part in range(parts)]
    dynamic = {
        step.key: {output.name: mapping_keys for output in step.step_outputs if output.is_dynamic}
        for step in plan.steps
        if isinstance(step, ExecutionStep) and any(output.is_dynamic for output in step.step_outputs)
    }
    plan = create_execution_plan(
        job, run_config=run_config, known_state=KnownExecutionState(dynamic_mappings=dynamic)
    )
    plan_context = PlanOrchestrationContext(
        plan_data=PlanData(
            job=job,
            dagster_run=run,
            instance=instance,
            execution_plan=plan,
            raise_on_error=True,
            retry_mode=RetryMode.DISABLED,
        ),
        log_manager=create_context_free_log_manager(instance, run),
        executor=executor,
        output_capture=None,
    )
    pods = {}
    for step in plan.steps:
        if not isinstance(step, ExecutionStep):
            continue  # the mapped step before its mapping keys are known: resolved above, one step per part
        created.clear()
        context = StepHandlerContext(
            instance=instance,
            plan_context=plan_context,
            steps=[step],
            execute_step_args=ExecuteStepArgs(origin, run.run_id, [step.key]),
        )
        list(executor._step_handler.launch_step(context))  # noqa: SLF001 - the executor's own step handler
        [job_body] = created
        pods[step.key] = job_body
    return pods


def step_container(job_body: dict) -> dict:
    [container] = job_body["body"]["spec"]["template"]["spec"]["containers"]
    return container


def _decoded(job_body: dict) -> str:
    """The rendered Job as text, with Dagster's compressed step arguments decoded."""
    text = json.dumps(job_body)
    for env in step_container(job_body).get("env", []):
        if env["name"] == "DAGSTER_COMPRESSED_EXECUTE_STEP_ARGS":
            text += zlib.decompress(base64.b64decode(env["value"])).decode("utf-8", "replace")
    return text


def assert_secrets_by_reference(job_body: dict, canaries: dict[str, str]) -> None:
    container = step_container(job_body)
    assert {"secretRef": {"name": "lumina-api-keys"}} in container.get("envFrom", [])
    env = {e["name"]: e for e in container.get("env", [])}
    password = env["DAGSTER_PG_PASSWORD"]
    assert password["valueFrom"]["secretKeyRef"]["name"] == "lumina-dagster-postgres"
    assert "value" not in password
    by_value = sorted(name for name in canaries if name in env and "valueFrom" not in env[name])
    assert not by_value, f"secret variables set by value in the pod: {by_value}"
    text = _decoded(job_body)
    leaked = sorted(name for name, canary in canaries.items() if canary in text)
    assert not leaked, f"secret values in the pod spec: {leaked}"


def _embedding_steps(defs, job_name: str) -> set[str]:
    """The step keys that compute the passage_index asset in this job."""
    job = defs.resolve_job_def(job_name)
    node = job.asset_layer.get_op_output_handle(dg.AssetKey("passage_index")).node_handle
    return {str(node)}


def test_gpu_on_the_embedding_step_only(k8s, monkeypatch):
    instance, canaries, created, kubeconfig = k8s
    defs = shipped_definitions(monkeypatch, LUMINA_EXECUTOR="k8s", LUMINA_K8S_GPU="1")
    assert defs.resolve_job_def("index_passages").executor_def.name == "k8s"
    pods = step_pods(instance, defs, "index_passages", kubeconfig, created)
    embedding = _embedding_steps(defs, "index_passages")
    assert embedding and embedding <= set(pods)
    # and each part of the embedding fan-out (tests/orchestration/test_embedding_fanout.py)
    parts = {step for step in pods if ".embed_passage_part[" in step}
    assert len(parts) == 2
    embedding |= parts
    for step, job_body in pods.items():
        container = step_container(job_body)
        limits = (container.get("resources") or {}).get("limits") or {}
        pod_spec = job_body["body"]["spec"]["template"]["spec"]
        if step in embedding:
            assert limits.get(GPU) == "1", step
            assert pod_spec["nodeSelector"] == {f"{GPU}.present": "true"}
            assert {"key": GPU, "operator": "Exists", "effect": "NoSchedule"} in pod_spec["tolerations"]
        else:
            assert GPU not in limits, step
            assert not pod_spec.get("nodeSelector"), step
        # the docs' launcher config reaches every step pod
        assert job_body["namespace"] == "lumina"
        assert container["image"] == "registry.example.com/lumina:1.0.0"
        assert pod_spec["serviceAccountName"] == "lumina-runs"
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert (
            env["LUMINA_LANCEDB_URI"] == "s3://my-bucket/lumina/lancedb" and env["LUMINA_DATA_DIR"] == "/data"
        )
        assert {"name": "lumina-data", "mountPath": "/data"} in container["volumeMounts"]
        assert_secrets_by_reference(job_body, canaries)


def test_run_config_merges_over_the_gpu_default_and_the_docs_run_config_works_alone(k8s, monkeypatch):
    instance, canaries, created, kubeconfig = k8s
    documented = documented_run_config()
    # LUMINA_K8S_GPU=2 and a run that only adds memory: both stay
    defs = shipped_definitions(monkeypatch, LUMINA_EXECUTOR="k8s", LUMINA_K8S_GPU="2")
    memory_only = {
        "execution": {
            "config": {
                "per_step_k8s_config": {
                    "passage_index": {"container_config": {"resources": {"limits": {"memory": "16Gi"}}}}
                }
            }
        }
    }
    pods = step_pods(instance, defs, "index_passages", kubeconfig, created, memory_only)
    [step] = _embedding_steps(defs, "index_passages")
    assert step_container(pods[step])["resources"]["limits"] == {GPU: "2", "memory": "16Gi"}

    # LUMINA_K8S_GPU unset: the plain k8s_job_executor, and the docs' run config as written puts the GPU there
    defs = shipped_definitions(monkeypatch, LUMINA_EXECUTOR="k8s")
    pods = step_pods(instance, defs, "index_passages", kubeconfig, created)
    assert all(GPU not in json.dumps(step_container(body).get("resources")) for body in pods.values())
    pods = step_pods(instance, defs, "index_passages", kubeconfig, created, documented)
    assert step_container(pods[step])["resources"]["limits"] == {GPU: "1", "memory": "16Gi"}
    assert pods[step]["body"]["spec"]["template"]["spec"]["nodeSelector"] == {f"{GPU}.present": "true"}
    for job_body in pods.values():
        assert_secrets_by_reference(job_body, canaries)


def test_crawl_and_run_pods_take_secrets_by_reference(k8s, monkeypatch):
    """The crawl's steps (the OpenAlex key's users) and the run worker pod the K8sRunLauncher starts."""
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._core.launcher import LaunchRunContext
    from dagster._core.test_utils import create_run_for_test

    instance, canaries, created, kubeconfig = k8s
    defs = shipped_definitions(monkeypatch, LUMINA_EXECUTOR="k8s", LUMINA_K8S_GPU="1")
    pods = step_pods(instance, defs, "crawl_corpus", kubeconfig, created)
    assert "openalex_works" in pods
    for step, job_body in pods.items():
        assert GPU not in json.dumps(job_body), step
        assert_secrets_by_reference(job_body, canaries)

    created.clear()
    origin = (
        ReconstructableRepository.for_module("lumina_assets.definitions", "defs", str(PROJECT))
        .get_reconstructable_job("crawl_corpus")
        .get_python_origin()
    )
    run = create_run_for_test(instance, job_name="crawl_corpus", job_code_origin=origin)
    instance.run_launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
    [run_pod] = created
    assert run_pod["namespace"] == "lumina"
    assert_secrets_by_reference(run_pod, canaries)


def test_gpu_count_must_be_a_number(monkeypatch):
    from sensors.automation import executor_from_env

    if kubernetes is None:
        missing_tool("dagster-k8s is not installed; install the dev or k8s extra")
    monkeypatch.setenv("LUMINA_EXECUTOR", "k8s")
    monkeypatch.setenv("LUMINA_K8S_GPU", "one")
    with pytest.raises(ValueError, match="LUMINA_K8S_GPU"):
        executor_from_env()
    monkeypatch.setenv("LUMINA_K8S_GPU", "0")
    assert executor_from_env().name == "k8s"
