"""The path past one machine, against real local servers: the Dagster instance on PostgreSQL (dagster-postgres)
and LanceDB on S3 (moto's S3 server). Servers run in their own process group and are stopped by PID."""

from __future__ import annotations

import json
import os
import shutil
import time

import dagster as dg
import numpy as np
import polars as pl
import pyarrow as pa
import yaml
from orchestration_servers import local_moto_s3, local_postgres

from lumina_assets.core import settings
from lumina_assets.defs.instance_storage import pool_limits
from lumina_assets.defs.partitions import INGEST_BATCH_TAG, INGEST_BATCHES
from sensors.inbox import INBOX_ASSETS, build_inbox_sensor
from sensors.pools import POOL_LIMITS, apply_pool_limits


def _postgres_instance(home, server) -> dg.DagsterInstance:
    """An instance built from a dagster.yaml, the way a deployment configures it (docs/production.md)."""
    home.mkdir(parents=True, exist_ok=True)
    config = {
        "storage": {
            "postgres": {
                "postgres_db": {
                    "hostname": server.host,
                    "port": server.port,
                    "username": server.username,
                    "password": "",
                    "db_name": server.db_name,
                    # SQLAlchemy 2.1 maps plain `postgresql` to psycopg 3; dagster-postgres ships psycopg2.
                    "scheme": "postgresql+psycopg2",
                }
            }
        },
        "telemetry": {"enabled": False},
    }
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return dg.DagsterInstance.from_config(str(home))


def test_ingest_run_on_a_postgres_instance(shared_data, data_dir, tmp_path):
    from lumina_assets.defs import corpus
    from resources.arxiv import ArxivResource
    from resources.corpus import CorpusResource
    from resources.openalex import OpenAlexResource
    from resources.parsing import ParsingConfig

    assets = [a for a in corpus.ASSETS if set(a.keys) & set(INBOX_ASSETS)]
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True)
    shutil.copyfile(shared_data / "pdfs" / "N18-3011.pdf", inbox / "N18-3011.pdf")
    old = time.time() - 60
    os.utime(inbox / "N18-3011.pdf", (old, old))

    with local_postgres() as server:
        instance = _postgres_instance(tmp_path / "dagster_home", server)
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"

        result = build_inbox_sensor()(dg.build_sensor_context(instance=instance))
        request = result.run_requests[0]
        batch_key = request.tags[INGEST_BATCH_TAG]
        instance.add_dynamic_partitions(INGEST_BATCHES.name, [batch_key])
        outcome = dg.materialize(
            assets,
            instance=instance,
            tags=request.tags,
            resources={
                "corpus": CorpusResource(),
                "parsing": ParsingConfig(),
                "openalex": OpenAlexResource(),
                "arxiv": ArxivResource(),
            },
        )
        assert outcome.success
        assert apply_pool_limits(instance) == POOL_LIMITS
        instance.dispose()

        # A second process (here: a second instance object) sees the same state through PostgreSQL.
        reopened = _postgres_instance(tmp_path / "dagster_home", server)
        run = reopened.get_run_by_id(outcome.run_id)
        assert run is not None and run.is_success
        assert run.tags[INGEST_BATCH_TAG] == batch_key
        assert reopened.get_latest_materialization_event(dg.AssetKey("papers")) is not None
        assert batch_key in reopened.get_dynamic_partitions(INGEST_BATCHES.name)
        assert pool_limits(reopened) == POOL_LIMITS
        reopened.dispose()
    papers = pl.read_parquet(settings.tables_dir() / "papers.parquet")
    assert papers.filter(pl.col("ingest_batch") == batch_key).height == 1


def _scifact_rows(shared_data, count: int) -> list[dict]:
    rows = []
    with (shared_data / "scifact" / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            rows.append(
                {"id": f"beir-scifact:{record['_id']}", "title": record["title"], "text": record["text"]}
            )
            if len(rows) == count:
                break
    return rows


def test_lancedb_table_on_s3(shared_data, data_dir):
    from lancedb.index import FTS

    from resources.lancedb import LanceDBResource

    rows = _scifact_rows(shared_data, 60)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(rows), 16)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table_data = pa.table(
        {
            "id": [r["id"] for r in rows],
            "title": [r["title"] for r in rows],
            "text": [r["text"] for r in rows],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 16),
        }
    )
    with local_moto_s3() as s3:
        s3.client().create_bucket(Bucket="lumina-index")
        resource = LanceDBResource(
            uri="s3://lumina-index/prod/lancedb",
            s3_endpoint=s3.endpoint,
            s3_region=s3.region,
            aws_access_key_id=s3.access_key,
            aws_secret_access_key=s3.secret_key,
            allow_http=True,
        )
        db = resource.connect()
        table = db.create_table("passages", data=table_data)
        table.create_index("text", config=FTS())

        # Reads go through a fresh connection: nothing comes from local state.
        reopened = resource.connect().open_table("passages")
        assert reopened.count_rows() == len(rows)
        probe = 17
        hits = reopened.search(vectors[probe]).limit(3).to_list()
        assert hits[0]["id"] == rows[probe]["id"]
        distinctive = max(rows[5]["title"].split(), key=len).strip(".,:;()")
        fts_hits = reopened.search(distinctive, query_type="fts").limit(5).to_list()
        assert rows[5]["id"] in [h["id"] for h in fts_hits]

        # Re-running an upsert on S3 duplicates nothing.
        reopened.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            table_data.slice(0, 10)
        )
        assert resource.connect().open_table("passages").count_rows() == len(rows)

        keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="lumina-index")["Contents"]]
        assert keys and all(k.startswith("prod/lancedb/passages.lance/") for k in keys)
        options = resource.resolved_storage_options()
        assert options["aws_endpoint"] == s3.endpoint and options["allow_http"] == "true"
