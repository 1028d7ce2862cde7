"""The benchmark's providers, declared once: the partitions, resources, CLI defaults, assets and report read this
list. A new provider is one entry here plus, for an external one, its client (`evals.provider_clients`), its
mapping (`evals.providers`) and its resource. Resources are duck-typed: this module never imports Dagster."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evals import providers
from evals.providers import Provider, ProviderUnavailable
from lumina_assets.core import prices, settings, tables

RECURSIVE_ALIAS = "lumina_recursive"
EXTERNAL_LLM = "not disclosed by the service"
RECURSIVE_ALIAS_REASON = (
    "lumina_recursive is a mode, not a provider: lumina's recursive levels are in recursive_results[lumina]"
)


@dataclass(frozen=True)
class ProviderSpec:
    """One provider: `build(resource)` makes it from the resource `resource_key` (None: needs none) or raises
    ProviderUnavailable; `build` None marks a benchmark mode, not a provider. `external`: searches the web."""

    name: str
    build: Callable[[Any], Provider] | None
    resource_key: str | None = None
    external: bool = False
    key_env: str | None = None
    llm: str = "none"  # the LLM the provider's answers depend on, as far as it is known


def _lumina(_resource) -> Provider:
    """The in-process engine (with LUMINA_RERANK_MODEL's reranker, if set), or `lumina serve`'s API when
    LUMINA_API_URL is set."""
    from lumina_assets.search.rerank import configured_search_config

    if settings.get().benchmark.lumina_api_url:
        return providers.LuminaProvider(
            providers.lumina_api_search_fn(settings.get().benchmark.lumina_api_url)
        )
    return providers.LuminaProvider(providers.lumina_search_fn(config=configured_search_config()))


def dense_config():
    """Lumina's engine with its passage vectors as the only retriever and no other stage or recorded setting;
    contexts built as lumina builds them, so lumina vs dense isolates what the rest of the pipeline adds."""
    from lumina_assets.search.config import SearchConfig

    return SearchConfig().replace(
        passage_fulltext=False,
        paper_fulltext=False,
        rerank=None,
        neighbour_smoothing=0.0,
    )


def _dense(_resource) -> Provider:
    if settings.get().benchmark.lumina_api_url:
        raise ProviderUnavailable("dense runs the engine in process; LUMINA_API_URL is set: dense skipped")
    return providers.LuminaProvider(providers.lumina_search_fn(config=dense_config()), name="dense")


def _bm25(_resource) -> Provider:
    return providers.BM25Provider(tables.read_all(tables.PASSAGES), tables.read(tables.PAPERS))


def _external(name: str, provider_class: Callable[[Any], Provider], key_env: str) -> ProviderSpec:
    """An external provider over its resource's client; skipped (never faked) when the resource has no key."""

    def build(resource) -> Provider:
        if not resource.available():
            raise ProviderUnavailable(resource.unavailable_reason())
        return provider_class(resource.get_client())

    return ProviderSpec(name, build, resource_key=name, external=True, key_env=key_env, llm=EXTERNAL_LLM)


# In partition order: the provider partitions are these names, in this order.
PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec("lumina", _lumina),
        ProviderSpec(RECURSIVE_ALIAS, None),
        ProviderSpec("bm25", _bm25),
        ProviderSpec("dense", _dense),
        _external("semantic_scholar", providers.SemanticScholarProvider, "SEMANTIC_SCHOLAR_API_KEY"),
        _external("google_scholar", providers.GoogleScholarProvider, "SERPAPI_API_KEY"),
        _external("exa", providers.ExaProvider, "EXA_API_KEY"),
    )
}


def partition_keys() -> list[str]:
    """Every provider partition, modes included."""
    return list(PROVIDERS)


def request_prices() -> dict[str, tuple[float | None, str]]:
    """Provider -> (USD per request or None when unknown, where that figure comes from), from `core.prices`."""
    return {name: prices.request_price(name) for name in PROVIDERS}


def provider_names() -> list[str]:
    """The providers a benchmark run queries by default (modes left out)."""
    return [spec.name for spec in PROVIDERS.values() if spec.build is not None]


def local_provider_names() -> list[str]:
    """Providers that search Lumina's own index."""
    return [name for name in provider_names() if not PROVIDERS[name].external]


def external_specs() -> list[ProviderSpec]:
    return [spec for spec in PROVIDERS.values() if spec.external]


def resource_keys() -> set[str]:
    """The resources building any provider needs."""
    return {spec.resource_key for spec in PROVIDERS.values() if spec.resource_key}


def build_provider(name: str, resources: Mapping[str, Any]) -> Provider:
    """The provider for a partition from `resources`, or ProviderUnavailable with the reason it is skipped."""
    spec = PROVIDERS.get(name)
    if spec is None:
        raise ProviderUnavailable(f"unknown provider {name!r}")
    if spec.build is None:
        raise ProviderUnavailable(RECURSIVE_ALIAS_REASON)
    return spec.build(resources[spec.resource_key] if spec.resource_key else None)
