"""The index stage as the shipped definitions build it (staged_passage_vectors → passage_index), with the hashing
embedder, loadable by file in a fresh process: what `execute_job(reconstructable(index_job), ...)` runs under
Dagster's multiprocess executor in tests/orchestration/test_embedding_fanout.py.

`RendezvousEmbedder` proves that parts run at the same time: when FANOUT_RENDEZVOUS_DIR is set, a process's first
encode call leaves a file named after its process id there and waits until FANOUT_RENDEZVOUS_PARTS processes
have done so; parts run one after another would time out and fail the run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
from hashing_embedder import HashingEmbedder, embedder_resource

from lumina_assets.defs.embedding_fanout import staged_passage_vectors
from lumina_assets.defs.indexing import passage_index
from resources.lancedb import LanceDBResource

RENDEZVOUS_DIR = "FANOUT_RENDEZVOUS_DIR"
RENDEZVOUS_PARTS = "FANOUT_RENDEZVOUS_PARTS"
RENDEZVOUS_TIMEOUT_S = 120.0


class RendezvousEmbedder(HashingEmbedder):
    def __init__(self):
        super().__init__(dimension=64)
        self._met = False

    def encode(self, texts, **kwargs):
        folder = os.environ.get(RENDEZVOUS_DIR)
        if folder and not self._met:
            expected = int(os.environ[RENDEZVOUS_PARTS])
            (Path(folder) / str(os.getpid())).touch()
            deadline = time.monotonic() + RENDEZVOUS_TIMEOUT_S
            while len(list(Path(folder).iterdir())) < expected:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{expected} embedding processes never ran at the same time")
                time.sleep(0.05)
            self._met = True
        return super().encode(texts, **kwargs)


EMBEDDER = RendezvousEmbedder()


def index_job() -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=[staged_passage_vectors, passage_index],
        resources={"lancedb": LanceDBResource(), "embedder": embedder_resource(EMBEDDER)},
        jobs=[dg.define_asset_job("index_with_fanout", selection=dg.AssetSelection.groups("index"))],
    )
    return defs.resolve_job_def("index_with_fanout")
