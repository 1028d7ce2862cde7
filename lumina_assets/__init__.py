"""Lumina.

Importing any part of Lumina defers the `__init__` of LanceDB's REST-namespace client, which Lumina never uses
(see core/lazy_imports).
"""

from lumina_assets.core.lazy_imports import defer_package_init

defer_package_init()
