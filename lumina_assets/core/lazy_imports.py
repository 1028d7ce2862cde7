"""Defers the part of LanceDB's import that Lumina never uses.

`import lancedb` imports `lance_namespace`, which needs the request models of the generated REST-namespace client;
Python then runs that client's package `__init__`, which also builds its ~370 `validate_call` API methods (about
0.8 s of the 1.7 s `import lancedb` takes here, paid by every CLI command and by a search process before its first
query). Lumina opens local folders and object storage, never a REST namespace, so the package is registered without
running its `__init__`; the first attribute asked of it runs the real `__init__`, so a caller that does use the REST
client gets the whole package as before.
"""

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
