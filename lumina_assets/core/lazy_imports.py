"""Defers the part of LanceDB's import that Lumina never uses: the generated REST-namespace client, whose
package `__init__` builds hundreds of `validate_call` methods on every `import lancedb`. Lumina never opens
a REST namespace, so the package is registered without running `__init__`; the first attribute asked of it
runs the real one."""

from __future__ import annotations

import importlib.util
import sys

REST_NAMESPACE_CLIENT = "lance_namespace_urllib3_client"


def defer_package_init(name: str = REST_NAMESPACE_CLIENT) -> bool:
    """Registers `name` as a package whose `__init__` runs on first attribute access; its submodules import
    normally. False when it is already imported or not installed (nothing to do)."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)

    def run_package_init(attribute: str):
        if attribute.startswith("__") and attribute.endswith("__"):  # probes such as __wrapped__
            raise AttributeError(attribute)
        del package.__getattr__
        spec.loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = run_package_init
    sys.modules[name] = package
    return True
