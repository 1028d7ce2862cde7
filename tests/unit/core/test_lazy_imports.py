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


STOPWORDS_PROBE = """
import sys
import lumina_assets
from lumina_assets.search.text import stopwords, tokenize
print(len(stopwords()), "the" in stopwords(), tokenize("The papers of the field"), "bm25s" in sys.modules)
"""


def test_stop_words_are_read_from_package_data_without_bm25s():
    out = subprocess.run(
        [sys.executable, "-c", STOPWORDS_PROBE], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "33 True ['paper', 'field'] False"
