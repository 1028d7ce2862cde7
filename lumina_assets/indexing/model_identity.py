"""Which embedding model built an index, and the refusal to search it with another one.

The passages table's `vector` field records the model's name, a fingerprint of its weights and the numeric form:
two models of one dimension give vectors that fit the table but do not compare. An index without an identity is
searched with a warning; one without a form was built in fp32."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MODEL_KEY = "lumina:embedding_model"
FINGERPRINT_KEY = "lumina:embedding_fingerprint"
FORM_KEY = "lumina:embedding_form"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".json", ".txt", ".model")
_LOCK = threading.Lock()


@dataclass(frozen=True)
class ModelIdentity:
    name: str = ""
    fingerprint: str = ""
    form: str = ""  # "" = not recorded (an index built before forms were: fp32)

    @property
    def known(self) -> bool:
        return bool(self.name or self.fingerprint)

    def describe(self) -> str:
        form = f", {self.form}" if self.form else ""
        return f"{self.name or 'an unnamed model'} (weights {self.fingerprint or 'not fingerprinted'}{form})"


def _signature(folder: Path) -> list[tuple[str, int, int]]:
    return [
        (str(f.relative_to(folder)), f.stat().st_size, f.stat().st_mtime_ns)
        for f in sorted(folder.rglob("*"))
        if f.is_file() and f.suffix in WEIGHT_SUFFIXES
    ]


def _hash_files(folder: Path, signature: list[tuple[str, int, int]]) -> str:
    digest = hashlib.sha256()
    for relative, _, _ in signature:
        digest.update(relative.encode() + b"\0")
        with open(folder / relative, "rb") as handle:
            for block in iter(functools.partial(handle.read, 1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:24]


def weights_fingerprint(model_name_or_path: str) -> str:
    """SHA-256 (24 hex) of a local model folder's files; "" for a hub name or a folder without model files."""
    folder = Path(model_name_or_path).expanduser()
    if not folder.is_dir():
        return ""
    folder = folder.resolve()
    signature = _signature(folder)
    if not signature:
        return ""
    from lumina_assets.core import settings

    key = hashlib.sha256(json.dumps([str(folder), signature]).encode()).hexdigest()[:24]
    cache = settings.models_dir() / "fingerprints.json"
    with _LOCK:
        try:
            known = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        if key in known:
            return known[key]
        fingerprint = _hash_files(folder, signature)
        known[key] = fingerprint
        try:
            from lumina_assets.core.tables import atomic_replace

            cache.parent.mkdir(parents=True, exist_ok=True)
            atomic_replace(cache, lambda path: path.write_text(json.dumps(known), encoding="utf-8"))
        except OSError as error:  # a read-only data dir: the fingerprint is still right, only not remembered
            log.debug("model fingerprint not cached: %s", error)
    return fingerprint


def of_embedder(embedder) -> ModelIdentity:
    """The identity of `embedder` (or of the embedder it wraps, `inner`)."""
    from lumina_assets.indexing.index_rows import embedder_identity

    return ModelIdentity(
        embedder_identity(embedder), _attribute(embedder, "fingerprint"), _attribute(embedder, "form")
    )


def _attribute(embedder, name: str) -> str:
    """A string attribute of `embedder` or of the embedder it wraps (`inner`), "" where neither has one."""
    for candidate in (embedder, getattr(embedder, "inner", None)):
        value = getattr(candidate, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def adopt_form(embedder, index_form: str) -> None:
    """Make `embedder` (or the embedder it wraps) encode in a form compatible with an index built in `index_form`;
    an embedder without forms is left as it is."""
    for candidate in (embedder, getattr(embedder, "inner", None)):
        adopt = getattr(candidate, "adopt_index_form", None)
        if callable(adopt):
            adopt(index_form)
            return


def query_identity(embedder, index: ModelIdentity) -> ModelIdentity:
    """The identity of `embedder` once it encodes in the form of the index it is about to search."""
    if index.known:
        adopt_form(embedder, index.form)
    return of_embedder(embedder)


def follow_table(embedder, table) -> ModelIdentity:
    """`query_identity` for the index whose passages table is `table` (None: nothing to follow)."""
    return query_identity(embedder, of_schema(table.schema) if table is not None else ModelIdentity())


def of_schema(schema) -> ModelIdentity:
    """The identity recorded on a table's `vector` field (empty for an index built before it was recorded)."""
    try:
        metadata = schema.field("vector").metadata or {}
    except KeyError:
        return ModelIdentity()
    return ModelIdentity(
        metadata.get(MODEL_KEY.encode(), b"").decode(),
        metadata.get(FINGERPRINT_KEY.encode(), b"").decode(),
        metadata.get(FORM_KEY.encode(), b"").decode(),
    )


def record(table, identity: ModelIdentity) -> None:
    """Write `identity` onto the table's `vector` field (other field metadata, e.g. the ANN rows, is kept)."""
    if table is None or not identity.known:
        return
    if of_schema(table.schema) == identity:
        return
    metadata = {MODEL_KEY: identity.name, FINGERPRINT_KEY: identity.fingerprint}
    if identity.form:
        metadata[FORM_KEY] = identity.form
    table.update_field_metadata({"path": "vector", "metadata": metadata})


def mismatch(index: ModelIdentity, query: ModelIdentity) -> str | None:
    """Why `query` must not search an index built by `index`, or None. Fingerprints decide where both sides have
    one; otherwise names do."""
    if not index.known or not query.known:
        return None
    if index.fingerprint and query.fingerprint:
        same = index.fingerprint == query.fingerprint
    else:
        same = index.name == query.name
    if same:
        from lumina_assets.indexing.encoder_forms import compatible

        if not query.form or compatible(index.form, query.form):
            return None
        return (
            f"the index holds {index.form or 'fp32'} vectors but the query encoder makes {query.form} ones, which "
            "do not compare: encode queries in the index's form (LUMINA_EMBEDDING_FORM) or rebuild the index"
        )
    return (
        f"the index was built with {index.describe()} but the query model is {query.describe()}: search with "
        "the model that built the index (LUMINA_EMBEDDING_MODEL) or rebuild the index with this one"
    )
