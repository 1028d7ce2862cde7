"""The provider registry (evals.registry) is the one list of benchmark providers: the partitions, the Dagster
resources, the assets' resource requirements and `lumina benchmark run`'s default providers all follow it, and a
provider is built from the resource the registry names, by key."""

from __future__ import annotations

import pytest

from evals import registry
from evals.providers import ProviderUnavailable
from lumina_assets.cli.main import build_parser
from lumina_assets.defs import benchmark
from lumina_assets.defs.partitions import PROVIDERS
from resources.providers import build_provider_resources

KEY_VARIABLES = [spec.key_env for spec in registry.external_specs()]


def test_partitions_resources_and_cli_defaults_follow_the_registry(monkeypatch):
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert PROVIDERS.get_partition_keys() == registry.partition_keys()
    assert registry.RECURSIVE_ALIAS in registry.partition_keys()
    assert registry.RECURSIVE_ALIAS not in registry.provider_names()
    resources = build_provider_resources()
    assert list(resources) == [spec.resource_key for spec in registry.external_specs()]
    for spec in registry.external_specs():
        resource = resources[spec.resource_key]
        assert resource.api_key_env == spec.key_env
        assert resource.unavailable_reason() == f"{spec.key_env} is not set: {spec.name} skipped"
    for asset in (benchmark.provider_results, benchmark.recursive_results):
        assert registry.resource_keys() <= asset.required_resource_keys
    args = build_parser().parse_args(["benchmark", "run"])
    assert args.providers.split(",") == registry.provider_names()


class _KeyedResource:
    """Duck-typed provider resource: a key or not, and a client that records nothing."""

    def __init__(self, key: str):
        self.key = key

    def available(self) -> bool:
        return bool(self.key)

    def unavailable_reason(self) -> str:
        return "" if self.key else "no key here"

    def get_client(self):
        return object()


def test_each_external_provider_is_built_from_its_own_resource_or_skipped_with_its_reason():
    specs = registry.external_specs()
    assert specs, "the registry lists external providers"
    for spec in specs:
        others = {s.resource_key: _KeyedResource("") for s in specs}
        with pytest.raises(ProviderUnavailable, match="no key here"):
            registry.build_provider(spec.name, {**others, spec.resource_key: _KeyedResource("")})
        provider = registry.build_provider(spec.name, {**others, spec.resource_key: _KeyedResource("k")})
        assert provider.name == spec.name  # the provider built is the one the registry names


def test_a_mode_or_an_unknown_name_is_skipped_with_the_reason():
    with pytest.raises(ProviderUnavailable, match="mode, not a provider"):
        registry.build_provider(registry.RECURSIVE_ALIAS, {})
    with pytest.raises(ProviderUnavailable, match="unknown provider 'nope'"):
        registry.build_provider("nope", {})
