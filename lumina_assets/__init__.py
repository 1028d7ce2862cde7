"""Lumina.

Importing any part of Lumina defers the REST-namespace client inside `import lancedb` (see core/lazy_imports).
"""

from lumina_assets.core.lazy_imports import defer_package_init

defer_package_init()
