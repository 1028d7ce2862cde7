"""The full-text index build stays under its memory cap on a table whose one-go build does not fit in it, ranks
as the one-go build does, and keeps taking new rows through `optimize()`.

Scaled down: 60,000 rows of ~20 MB of text with a large vocabulary (40 made-up words per row, as real corpora
grow theirs with ids, numbers and names), whose one-go LanceDB build peaks near 420 MB here. Each build runs in
a fresh process and is measured by its peak resident memory (VmHWM), the way the cap is meant: no process of the
build may go over it."""

from __future__ import annotations

import json
import shutil
import string
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="peak resident memory read as Linux ru_maxrss (kB)"
)

CAP_MB = 330
ROWS = 60_000
TOPICS = [
    "vitamin deficiency in elderly patients",
    "tumor cells express protein",
    "insulin resistance and obesity",
]

ONE_GO = """
import json, sys, lancedb
from lancedb.index import FTS
from lumina_assets.indexing.fts_build import TOKENIZER, peak_rss_mb
table = lancedb.connect(sys.argv[1]).open_table("passages")
table.create_index("search_text", config=FTS(**TOKENIZER), replace=True)
print(json.dumps({"peak_mb": peak_rss_mb()}))
"""

CAPPED = """
import json, sys, lancedb
from dataclasses import asdict
from lumina_assets.indexing.fts_build import peak_rss_mb
from lumina_assets.indexing.table_ops import ensure_fts
table = lancedb.connect(sys.argv[1]).open_table("passages")
build = ensure_fts(table, "search_text", int(sys.argv[2]))
print(json.dumps({
    "build": asdict(build),
    "peak_mb": peak_rss_mb(),
}))
"""


def _texts(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(string.ascii_lowercase.encode(), dtype=np.uint8)
    words = (
        letters[rng.integers(0, 26, size=(count * 40, 7))].view("S7").ravel().astype(str).reshape(count, 40)
    )
    return [f"{TOPICS[i % 3]} {' '.join(words[i])}" for i in range(count)]


def _run(script: str, *args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _ranking(table, query: str) -> list[tuple[float, str]]:
    """Top 20 as (score, id), with rows tied at the 20th score left out (their order among equals is arbitrary)."""
    rows = table.search(query, query_type="fts").select(["passage_id"]).limit(20).to_arrow().to_pylist()
    scored = sorted((-round(r["_score"], 4), r["passage_id"]) for r in rows)
    last = scored[-1][0] if len(scored) == 20 else None
    return [item for item in scored if item[0] != last]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    import lancedb

    root = tmp_path_factory.mktemp("fts_cap")
    texts = _texts(ROWS, seed=3)
    data = pa.table({"passage_id": [f"p{i}" for i in range(ROWS)], "search_text": texts})
    lancedb.connect(str(root / "one_go")).create_table("passages", data)
    shutil.copytree(root / "one_go", root / "capped")
    one_go = _run(ONE_GO, str(root / "one_go"))
    capped = _run(CAPPED, str(root / "capped"), str(CAP_MB))
    return root, texts, one_go, capped


def test_capped_build_stays_under_a_cap_the_one_go_build_exceeds(tables):
    _, _, one_go, capped = tables
    assert one_go["peak_mb"] > CAP_MB * 1.15, (
        f"table too small to test the cap: one go peaked {one_go['peak_mb']:.0f} MB"
    )
    assert capped["build"]["separate_process"]
    assert capped["build"]["peak_rss_mb"] < CAP_MB, capped  # the build's own process
    assert capped["peak_mb"] < CAP_MB, capped  # and the calling process, which did not build it itself


def test_capped_build_ranks_as_the_one_go_build(tables):
    import lancedb

    root, texts, _, _ = tables
    one_go = lancedb.connect(str(root / "one_go")).open_table("passages")
    capped = lancedb.connect(str(root / "capped")).open_table("passages")
    assert len(list((root / "capped" / "passages.lance" / "_indices").glob("*/part_*_tokens.lance"))) > 1
    rng = np.random.default_rng(5)
    queries = [
        f"{TOPICS[i % 3]} {texts[int(r)].split()[-1 - i % 5]}"
        for i, r in enumerate(rng.integers(0, ROWS, 12))
    ]
    queries += [f"{texts[7].split()[-1]} {texts[11].split()[-2]} protein", texts[7].split()[-1]]
    for query in queries:
        expected = _ranking(one_go, query)
        assert expected, query
        assert _ranking(capped, query) == expected, query


def test_new_rows_join_the_capped_index_through_optimize(tables):
    import lancedb

    root, _, _, _ = tables
    table = lancedb.connect(str(root / "capped")).open_table("passages")
    new = pa.table(
        {"passage_id": ["new1", "new2"], "search_text": ["zyxwvut tumor cells", "zyxwvut vitamin"]}
    )
    table.add(new)
    table.optimize()
    found = table.search("zyxwvut", query_type="fts").select(["passage_id"]).limit(5).to_arrow()
    assert sorted(found["passage_id"].to_pylist()) == ["new1", "new2"]
    assert table.list_indices()[0].num_unindexed_rows == 0
