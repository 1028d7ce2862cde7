"""Search as a service: several search processes serve one LanceDB index on object storage (moto's S3 server) while
an ingest adds a batch; each sees the new paper within its refresh interval. And a search process does not copy the
corpus: its memory stays far below the size of the table it searches."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import polars as pl
import pyarrow as pa
from orchestration_servers import local_moto_s3

from lumina_assets.core import settings
from lumina_assets.corpus.collections import Collection, collection_tables, load_collection
from lumina_assets.indexing.lancedb_tables import IndexConfig, index_corpus

SERVE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from hashing_embedder import HashingEmbedder
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
options = json.loads(sys.argv[3])
engine = SearchEngine(sys.argv[2], HashingEmbedder(), SearchConfig(store="index"), storage_options=options,
                      refresh_seconds=0.5)
print("ready", flush=True)
for line in sys.stdin:
    ids = [c.paper_id for c in engine.search(line.strip(), k=5)]
    print(json.dumps(ids), flush=True)
"""


def _ask(process: subprocess.Popen, query: str) -> list[str]:
    process.stdin.write(query + "\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def test_two_search_processes_on_s3_see_a_new_batch(shared_data, data_dir):
    from hashing_embedder import HashingEmbedder

    scifact = load_collection(shared_data / "scifact", split="train")
    ids = list(scifact.corpus)[:40]
    first = Collection("scifact", {d: scifact.corpus[d] for d in ids[:39]}, {}, {}, [])
    both = Collection("scifact", {d: scifact.corpus[d] for d in ids}, {}, {}, [])
    newcomer = f"beir-scifact:{ids[39]}"
    query = scifact.corpus[ids[39]]["title"]
    embedder = HashingEmbedder()
    support = str(settings.PROJECT_ROOT / "tests" / "support")
    with local_moto_s3() as s3:
        s3.client().create_bucket(Bucket="lumina-index")
        options = {
            "aws_endpoint": s3.endpoint,
            "aws_region": s3.region,
            "aws_access_key_id": s3.access_key,
            "aws_secret_access_key": s3.secret_key,
            "allow_http": "true",
        }
        uri = "s3://lumina-index/prod/lancedb"
        import lancedb

        db = lancedb.connect(uri, storage_options=options)
        papers, passages = collection_tables(first)
        index_corpus(db, passages, papers, embedder, IndexConfig())
        replicas = [
            subprocess.Popen(
                [sys.executable, "-c", SERVE, support, uri, json.dumps(options)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            for _ in range(2)
        ]
        try:
            for replica in replicas:
                assert replica.stdout.readline().strip() == "ready"
                assert newcomer not in _ask(replica, query)
            papers, passages = collection_tables(both)
            stats = index_corpus(db, passages, papers, embedder, IndexConfig())
            assert stats.passages_embedded == passages.filter(pl.col("paper_id") == newcomer).height
            for replica in replicas:
                deadline = time.monotonic() + 30
                found = False
                while not found and time.monotonic() < deadline:
                    found = newcomer in _ask(replica, query)
                    time.sleep(0.3)
                assert found, "a replica never saw the new batch"
        finally:
            for replica in replicas:
                replica.stdin.close()
                replica.kill()
                replica.wait(timeout=10)


MEASURE = r"""
import json, sys
import numpy as np
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine

class Fixed:
    def __init__(self, dim): self.dimension = dim
    def encode(self, texts):
        rng = np.random.default_rng(len(texts[0]))
        v = rng.normal(size=(len(texts), self.dimension)).astype("float32")
        return v / np.linalg.norm(v, axis=1, keepdims=True)

def status(field, path="/proc/self/status"):
    for line in open(path):
        if line.startswith(field):
            return int(line.split()[-1] if path.endswith("io") else line.split()[1])

engine = SearchEngine(sys.argv[1], Fixed(int(sys.argv[2])), SearchConfig(store="index"))
engine.search("word1 word2 warm up", k=10)
rss_first = status("VmRSS")
engine.wait_until_warm()  # the first query starts loading the indexes (not the table) in the background
rss_before, read_before = status("VmRSS"), status("rchar", "/proc/self/io")
for i in range(30):
    engine.search(f"word{i % 50} word{(i * 7) % 50} rare{i}", k=10)
print(json.dumps({"store": type(engine.store()).__name__, "rss_grew_mb": (status("VmRSS") - rss_before) / 1024,
                  "indexes_loaded_mb": (rss_before - rss_first) / 1024,
                  "read_mb_per_query": (status("rchar", "/proc/self/io") - read_before) / 30 / 2**20}))
"""


def test_a_search_process_does_not_read_the_table(tmp_path):
    """40,000 passages (~75 MB on disk) behind the ANN (IVF_SQ) and full-text indexes the indexer builds past
    its ANN threshold, searched through the index store: a query reads a few MB (index pages, candidates' rows),
    and the process does not grow by anything like the table."""
    import lancedb

    from lumina_assets.indexing import table_ops

    rows, dim = 40_000, 384
    rng = np.random.default_rng(3)
    db = lancedb.connect(str(tmp_path / "db"))
    centers = rng.normal(size=(200, dim)).astype("float32")
    passages_table = papers_table = None
    for start in range(0, rows, 20_000):
        n = min(20_000, rows - start)
        vectors = centers[rng.integers(0, 200, size=n)] + 0.3 * rng.normal(size=(n, dim)).astype("float32")
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        words = rng.integers(0, 50, size=(n, 12))
        texts = [" ".join(f"word{w}" for w in row) + f" rare{start + i}" for i, row in enumerate(words)]
        ids = [f"p{start + i}" for i in range(n)]
        passages = pa.table(
            {
                "passage_id": [f"{p}#1:0" for p in ids],
                "paper_id": ids,
                "kind": ["text"] * n,
                "section_number": ["1"] * n,
                "section_title": ["Body"] * n,
                "text": texts,
                "search_text": texts,
                "prev_id": pa.nulls(n, pa.string()),
                "next_id": pa.nulls(n, pa.string()),
                "title": [f"Paper {p}" for p in ids],
                "doi": pa.nulls(n, pa.string()),
                "url": pa.nulls(n, pa.string()),
                "year": pa.array([2000 + i % 25 for i in range(n)], pa.int32()),
                "authors": [["A. Author"]] * n,
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
            }
        )
        papers = passages.select(["paper_id", "title", "search_text", "doi", "url", "year", "authors"])
        if passages_table is None:
            passages_table = db.create_table("passages", passages)
            papers_table = db.create_table("papers", papers)
        else:
            passages_table.add(passages)
            papers_table.add(papers)
    for table in (passages_table, papers_table):
        table_ops.ensure_fts(table, "search_text")
        table_ops.ensure_scalar(table, "paper_id", "BTREE")
    table_ops.ensure_scalar(passages_table, "passage_id", "BTREE")
    has_ann, _ = table_ops.ensure_ann(passages_table, "vector", rows, min_rows=rows, retrain_growth=2.0)
    assert has_ann
    table_mb = (
        sum(f.stat().st_size for f in (tmp_path / "db" / "passages.lance").rglob("*") if f.is_file()) / 2**20
    )
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(tmp_path / "db"), str(dim)],
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"table {table_mb:.0f} MB on disk; search process: {figures}")
    assert figures["store"] == "LanceStore"
    assert figures["read_mb_per_query"] < table_mb / 10, (figures, table_mb)
    assert figures["rss_grew_mb"] < table_mb / 2, (figures, table_mb)
    assert figures["indexes_loaded_mb"] < table_mb, (
        figures,
        table_mb,
    )  # hot indexes, not a copy of the table
