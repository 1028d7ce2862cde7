"""Sources a user can point anywhere (issue 13): every external base URL from the environment, the demo's offline
check through the HTTP stack on those URLs (proxy settings honoured), and a run-config override of a resource that
keeps the resource's API key."""

from __future__ import annotations

import os

import dagster as dg
import pytest
from orchestration_servers import free_port, static_http_server

from lumina_assets.cli.runner import live_source_urls, network_available
from resources.arxiv import ArxivResource
from resources.llm import LLMResource, build_llm_resources
from resources.openalex import OpenAlexResource
from resources.providers import ExaResource, SemanticScholarResource, SerpApiScholarResource

URL_VARIABLES = {
    "LUMINA_OPENALEX_URL": OpenAlexResource,
    "LUMINA_ARXIV_URL": ArxivResource,
    "LUMINA_SEMANTIC_SCHOLAR_URL": SemanticScholarResource,
    "LUMINA_SERPAPI_URL": SerpApiScholarResource,
    "LUMINA_EXA_URL": ExaResource,
}


@pytest.fixture
def local_http_server(tmp_path):
    """A local static server (answers any GET / HEAD, proxy-form requests too), stopped by PID."""
    with static_http_server(tmp_path) as url:
        yield url


@pytest.mark.parametrize("variable", sorted(URL_VARIABLES))
def test_every_base_url_comes_from_the_environment(monkeypatch, variable):
    resource = URL_VARIABLES[variable]
    default = resource().base_url
    assert default.startswith("https://")
    monkeypatch.setenv(variable, "http://mirror.internal:8080/api/")
    assert resource().base_url == "http://mirror.internal:8080/api"
    assert resource().http_client().base_url == "http://mirror.internal:8080/api"


def test_offline_check_uses_the_configured_urls(monkeypatch, local_http_server):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LUMINA_OPENALEX_URL", local_http_server + "/openalex")
    monkeypatch.setenv("LUMINA_ARXIV_URL", f"http://127.0.0.1:{free_port()}/api")  # nothing listens there
    assert live_source_urls() == [local_http_server + "/openalex", os.environ["LUMINA_ARXIV_URL"]]
    assert network_available()  # the mirror answers (404 is an answer)
    monkeypatch.setenv("LUMINA_OPENALEX_URL", os.environ["LUMINA_ARXIV_URL"])
    assert not network_available()


def test_offline_check_goes_through_the_proxy(monkeypatch, local_http_server):
    """A host this machine cannot resolve is reachable through HTTP_PROXY, as it would be behind a proxy."""
    unreachable = "http://api.openalex.invalid"
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    assert not network_available([unreachable], timeout=2)
    monkeypatch.setenv("HTTP_PROXY", local_http_server)
    assert network_available([unreachable], timeout=2)


def test_overriding_a_resource_in_run_config_keeps_its_key(monkeypatch):
    """Dagster rebuilds a resource from run config when a run overrides a field; the key must survive."""
    monkeypatch.setenv("OPENALEX_API_KEY", "test-openalex-key")
    monkeypatch.setenv("EXA_API_KEY", "test-exa-key")
    seen = {}

    @dg.asset
    def probe(openalex: OpenAlexResource, exa: ExaResource) -> None:
        seen["openalex"] = (openalex.base_url, openalex.resolved_api_key())
        seen["exa"] = (exa.base_url, exa.available())

    from lumina_assets.defs.corpus import build_resources

    resources = {**build_resources(), "exa": ExaResource(api_key=dg.EnvVar("EXA_API_KEY"))}
    assert resources["openalex"].api_key is not None  # built with dg.EnvVar, as shipped
    override = {
        "resources": {
            "openalex": {"config": {"base_url": "http://127.0.0.1:9/openalex"}},
            "exa": {"config": {"base_url": "http://127.0.0.1:9/exa"}},
        }
    }
    result = dg.materialize([probe], resources=resources, run_config=override)
    assert result.success
    assert seen["openalex"] == ("http://127.0.0.1:9/openalex", "test-openalex-key")
    assert seen["exa"] == ("http://127.0.0.1:9/exa", True)
    logs = " ".join(str(e.message) for e in result.all_events)
    assert "test-openalex-key" not in logs and "test-exa-key" not in logs
    monkeypatch.delenv("OPENALEX_API_KEY")
    assert dg.materialize([probe], resources=resources | {"openalex": OpenAlexResource()}).success
    assert seen["openalex"][1] == ""


def _llm_handler(seen: list):
    """Answers both APIs as they answer (anthropic Messages, OpenAI chat completions) and records each request."""
    import json

    import httpx2
    from fake_llm import anthropic_message_response, openai_chat_response

    def handler(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        seen.append({"url": str(request.url), "headers": dict(request.headers), "body": body})
        if request.url.path.endswith("/messages"):
            return anthropic_message_response("ok", model=body["model"], input_tokens=3, output_tokens=1)
        return openai_chat_response("ok", model=body["model"])

    return handler


def _llm_probe(seen: list) -> dg.AssetsDefinition:
    import httpx2

    @dg.asset
    def llm_probe(question_llm: LLMResource, judge_llm: LLMResource) -> None:
        for role, resource in (("question", question_llm), ("judge", judge_llm)):
            client = resource.get_client(
                http_client=httpx2.Client(transport=httpx2.MockTransport(_llm_handler(seen)))
            )
            client.complete(f"{role} prompt", temperature=resource.temperature)

    return llm_probe


def _clear_llm_environment(monkeypatch) -> None:
    for name in (
        "LUMINA_JUDGE_BACKEND",
        "LUMINA_QUESTION_BACKEND",
        "LUMINA_JUDGE_MODEL",
        "LUMINA_QUESTION_MODEL",
        "OPENAI_BASE_URL",
        "OPENAI_COMPATIBLE_BASE_URL",
        "OPENAI_COMPATIBLE_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",  # read by the anthropic SDK itself
    ):
        monkeypatch.delenv(name, raising=False)


def test_overriding_an_llm_resource_in_run_config_keeps_backend_model_and_key(monkeypatch, data_dir):
    """One field of each LLM resource overridden in run config: the requests still go to the configured backend
    and model with the key from the environment (the override used to leave an offline resource without model)."""
    _clear_llm_environment(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env-question")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-judge")
    monkeypatch.setenv("LUMINA_JUDGE_MODEL", "gpt-4o-mini")
    seen: list = []
    override = {
        "resources": {
            "question_llm": {"config": {"max_tokens": 77}},
            "judge_llm": {"config": {"timeout": 30.0}},
        }
    }
    result = dg.materialize([_llm_probe(seen)], resources=build_llm_resources(), run_config=override)
    assert result.success
    question, judge = seen
    assert question["url"] == "https://api.anthropic.com/v1/messages"
    assert question["body"]["model"] == "claude-sonnet-4-6"
    assert question["body"]["max_tokens"] == 77  # the override applied
    headers = question["headers"]
    assert (
        headers.get("x-api-key") == "ak-env-question"
        or headers.get("authorization") == "Bearer ak-env-question"
    )
    assert judge["url"] == "https://api.openai.com/v1/chat/completions"
    assert judge["body"]["model"] == "gpt-4o-mini"
    assert judge["body"]["temperature"] == 0.0
    assert judge["headers"]["authorization"] == "Bearer sk-env-judge"
    logs = " ".join(str(e.message) for e in result.all_events)
    assert "ak-env-question" not in logs and "sk-env-judge" not in logs


def test_overriding_an_openai_compatible_judge_keeps_its_base_url(monkeypatch, data_dir):
    _clear_llm_environment(monkeypatch)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "local-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-env-question")
    monkeypatch.setenv("LUMINA_JUDGE_MODEL", "llama3")
    seen: list = []
    override = {"resources": {"judge_llm": {"config": {"max_tokens": 50}}}}
    result = dg.materialize([_llm_probe(seen)], resources=build_llm_resources(), run_config=override)
    assert result.success
    judge = seen[1]
    assert judge["url"] == "http://127.0.0.1:9/v1/chat/completions"
    assert judge["body"]["model"] == "llama3" and judge["body"]["max_tokens"] == 50
    assert judge["headers"]["authorization"] == "Bearer local-key"
    # without the variables the same override is a labelled offline judge, not a half-configured one
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("LUMINA_JUDGE_BACKEND", "openai-compatible")
    described = {}

    @dg.asset
    def describe(judge_llm: LLMResource) -> None:
        described["judge"] = judge_llm.describe()

    dg.materialize([describe], resources=build_llm_resources(), run_config=override)
    assert described["judge"] == "offline (no base URL for openai-compatible:llama3)"
