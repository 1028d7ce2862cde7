"""`import lancedb` through Lumina skips the REST-namespace client's API package until something asks for it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import lumina_assets, lancedb
print("api" if "lance_namespace_urllib3_client.api" in sys.modules else "no-api")
import lance_namespace_urllib3_client as client
print(client.ApiClient.__name__, client.TableApi.__name__)
print("api" if "lance_namespace_urllib3_client.api" in sys.modules else "no-api")
"""


def test_lancedb_imports_without_the_rest_client_and_the_client_still_loads_on_demand():
    lines = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert lines == ["no-api", "ApiClient", "TableApi", "api"]


BM25S_PROBE = """
import sys
import lumina_assets
from lumina_assets.search.text import stopwords
print(len(stopwords()) > 20, "scipy.sparse" in sys.modules, "numba" in sys.modules)
import bm25s
print(bm25s.BM25.__name__, "scipy.sparse" in sys.modules)
"""


def test_stop_words_load_without_bm25s_heavy_init_and_bm25s_still_works_on_demand():
    """A search process's first query reads bm25s's stop-word list; bm25s's own `__init__` (scipy.sparse, numba:
    ~0.5 s) runs only when something uses the package itself."""
    lines = subprocess.run(
        [sys.executable, "-c", BM25S_PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert lines == ["True", "False", "False", "BM25", "True"]
