"""Passage embedding split into parts that run side by side (defs/embedding_fanout.py): `plan_parts` splits the
texts to embed round-robin, each `embed_part` stages their vectors in the `staged_vectors` table (keyed by model
and text), and the index build then takes them through `StagedVectorEmbedder`, so the index has one write path."""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from lumina_assets.indexing import encoder_forms, model_identity
from lumina_assets.indexing.index_rows import embedder_identity, passage_rows
from lumina_assets.indexing.lancedb_tables import PASSAGES_TABLE, IndexConfig, adopt_index_form
from lumina_assets.indexing.table_ops import (
    column_map,
    ensure_scalar,
    open_table,
    read_columns,
    sql_in,
    vector_array,
    vectors_from_arrow,
)

log = logging.getLogger(__name__)

STAGED_TABLE = "staged_vectors"
PLAN_TABLE_PREFIX = "embedding_plan_"
# a part has to earn its process start and model load (seconds) and its staging write: below this many passages
# per part the one-step path is as fast (auto setting)
PASSAGES_PER_PART = 50_000
ENCODE_CHUNK = 512  # texts per encode call and per staging append in a part
LOOKUP_CHUNK = 1024  # keys per staging lookup


def parts_for(count: int, requested: int | None, cores: int) -> int:
    """How many parts embed `count` texts: `requested` (LUMINA_EMBED_PARTS) when set, else one part per
    PASSAGES_PER_PART texts, at most one per core; never more parts than texts, and 1 for nothing to embed."""
    if count <= 0:
        return 1
    if requested is not None:
        return max(1, min(requested, count))
    return max(1, min(cores, math.ceil(count / PASSAGES_PER_PART) if count >= 2 * PASSAGES_PER_PART else 1))


def text_key(name: str, fingerprint: str, text: str) -> str:
    """A staged vector's key: the model (name, weights fingerprint) and the exact text it encodes."""
    return hashlib.sha256(f"{name}\0{fingerprint}\0{text}".encode()).hexdigest()[:32]


def staged_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("key", pa.string(), nullable=False),
            pa.field("form", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def plan_table(plan_id: str) -> str:
    return PLAN_TABLE_PREFIX + "".join(c if c.isalnum() else "_" for c in plan_id)


def texts_to_embed(
    db, passages: pl.DataFrame, papers: pl.DataFrame, embedder, config: IndexConfig | None = None
) -> list[str]:
    """The distinct texts `index_corpus` would embed for these upstream tables: passages whose embedded text (and
    its hash over the index config and the model) is not in the index yet."""
    config = config or IndexConfig()
    rows = passage_rows(passages, papers, config, embedder_identity(embedder))
    table = open_table(db, PASSAGES_TABLE)
    indexed = column_map(table, "passage_id", "text_hash") if table is not None else {}
    texts = [
        text
        for pid, text_hash, text in rows.select("passage_id", "text_hash", "embed_text").iter_rows()
        if indexed.get(pid) != text_hash
    ]
    return list(dict.fromkeys(texts))


@dataclass(frozen=True)
class Plan:
    parts: int
    texts: int
    per_part: tuple[int, ...]


def plan_parts(db, plan_id: str, texts: Sequence[str], parts: int, dim: int) -> Plan:
    """Write the plan (text, part) for `parts` parts, round-robin so each part gets a like mix of lengths, and create
    the staging table for `dim`-wide vectors if there is none. With one part nothing is written: the index build
    embeds everything itself, as it always did."""
    if parts <= 1 or not texts:
        return Plan(1, len(texts), (len(texts),))
    assignment = [i % parts for i in range(len(texts))]
    data = pa.table({"text": pa.array(list(texts), pa.string()), "part": pa.array(assignment, pa.int32())})
    db.create_table(plan_table(plan_id), data=data, mode="overwrite")
    if open_table(db, STAGED_TABLE) is None:
        db.create_table(STAGED_TABLE, data=pa.Table.from_pylist([], schema=staged_schema(dim)))
    per_part = tuple(assignment.count(p) for p in range(parts))
    return Plan(parts, len(texts), per_part)


def plan_size(db, plan_id: str) -> int:
    """How many parts the plan `plan_id` has (1 when it wrote no plan table)."""
    plan = open_table(db, plan_table(plan_id))
    if plan is None or not plan.count_rows():
        return 1
    return int(max(read_columns(plan, ["part"])["part"].to_pylist())) + 1


def part_cores(part: int, parts: int, cores: Sequence[int]) -> list[int]:
    """The cores part `part` of `parts` may use as processes of one machine: an even share, so together
    they use each core once (an encoder starts a thread per core it may use)."""
    cores = list(cores)
    if parts <= 1 or len(cores) <= 1:
        return cores
    share = max(1, len(cores) // parts)
    first = (part * share) % len(cores)
    return [cores[(first + i) % len(cores)] for i in range(share)]


@dataclass
class PartStats:
    part: int
    texts: int = 0
    embedded: int = 0
    already_staged: int = 0
    seconds: float = 0.0
    form: str = ""


def _staged(table, keys: Sequence[str], form: str) -> dict[str, np.ndarray]:
    """{key: vector} of the `keys` staged in a form compatible with `form`."""
    found: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), LOOKUP_CHUNK):
        chunk = sql_in("key", unique[start : start + LOOKUP_CHUNK])
        stored = read_columns(table, ["key", "form", "vector"], chunk)
        if stored.num_rows:
            vectors = vectors_from_arrow(stored["vector"])
            rows = zip(stored["key"].to_pylist(), stored["form"].to_pylist(), vectors, strict=True)
            found |= {key: vector for key, staged, vector in rows if encoder_forms.compatible(staged, form)}
    return found


def embed_part(
    db, plan_id: str, part: int, embedder, log_fn: Callable[[str], None] | None = None
) -> PartStats:
    """Encode one part's texts and append their vectors to the staging table."""
    say = log_fn or log.info
    stats = PartStats(part)
    plan = open_table(db, plan_table(plan_id))
    staged = open_table(db, STAGED_TABLE)
    if plan is None or staged is None:
        raise RuntimeError(f"no embedding plan {plan_id!r} in this database: run the plan step first")
    texts = read_columns(plan, ["text"], f"part = {int(part)}")["text"].to_pylist()
    stats.texts = len(texts)
    adopt_index_form(db, embedder)
    identity = model_identity.of_embedder(embedder)
    stats.form = identity.form
    keys = [text_key(identity.name, identity.fingerprint, text) for text in texts]
    have = _staged(staged, keys, stats.form) if staged.count_rows() else {}
    todo = [i for i, key in enumerate(keys) if key not in have]
    stats.already_staged = len(texts) - len(todo)
    dim = int(embedder.dimension)
    schema = staged_schema(dim)
    started = time.perf_counter()
    for start in range(0, len(todo), ENCODE_CHUNK):
        chunk = todo[start : start + ENCODE_CHUNK]
        vectors = np.asarray(embedder.encode([texts[i] for i in chunk]), dtype=np.float32).reshape(
            len(chunk), dim
        )
        data = pa.table(
            {
                "key": pa.array([keys[i] for i in chunk], pa.string()),
                "form": pa.array([stats.form] * len(chunk), pa.string()),
                "vector": vector_array(vectors, dim),
            }
        ).cast(schema)
        staged.add(data)
        stats.embedded += len(chunk)
        elapsed = time.perf_counter() - started
        say(
            f"part {part}: {stats.embedded}/{len(todo)} passages embedded ({stats.embedded / max(elapsed, 1e-6):.1f}/s)"
        )
    stats.seconds = time.perf_counter() - started
    return stats


def finish_plan(db, plan_id: str) -> int:
    """Index the staging table by key (the index build looks vectors up by it) and drop the plan; returns the
    staged rows."""
    db.drop_table(plan_table(plan_id), ignore_missing=True)
    staged = open_table(db, STAGED_TABLE)
    if staged is None:
        return 0
    rows = staged.count_rows()
    if rows:
        ensure_scalar(staged, "key", "BTREE")
        staged.optimize()
    return rows


def discard_staged(db) -> None:
    """Drop the staging table once the index holds its vectors (a failed build keeps it for the retry)."""
    db.drop_table(STAGED_TABLE, ignore_missing=True)


class StagedVectorEmbedder:
    """The index build's embedder with staged vectors: a text staged by the same model in a compatible form
    is looked up, the rest encoded by `inner`, whose identity, form and dimension it keeps. Lookups stop
    once every staged row was used."""

    def __init__(self, db, inner):
        self.inner = inner
        self.reused = 0
        self.encoded = 0
        self._table = open_table(db, STAGED_TABLE)
        self._remaining = self._table.count_rows() if self._table is not None else 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts) -> np.ndarray:
        texts = list(texts)
        if not self._remaining or not texts:
            self.encoded += len(texts)
            return self.inner.encode(texts)
        identity = model_identity.of_embedder(self.inner)
        keys = [text_key(identity.name, identity.fingerprint, text) for text in texts]
        found = _staged(self._table, keys, identity.form)
        missing = [i for i, key in enumerate(keys) if key not in found]
        encoded = self.inner.encode([texts[i] for i in missing]) if missing else None
        dim = int(self.inner.dimension)
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, key in enumerate(keys):
            if key in found:
                out[i] = found[key]
        if missing:
            out[missing] = np.asarray(encoded, dtype=np.float32).reshape(len(missing), dim)
        self.reused += len(texts) - len(missing)
        self.encoded += len(missing)
        self._remaining = max(0, self._remaining - len(found))
        return out
