"""Opening LanceDB: a local folder by default (settings.lancedb_uri()), or object storage (`s3://bucket/path`)."""

from __future__ import annotations

from pathlib import Path

from lumina_assets.core import settings


def connect_lancedb(uri: str | None = None, storage_options: dict[str, str] | None = None):
    """A LanceDB connection; `storage_options` (endpoint, region, keys) only matter for object-storage URIs."""
    import lancedb

    target = uri or settings.lancedb_uri()
    if "://" not in target:
        Path(target).mkdir(parents=True, exist_ok=True)
    return lancedb.connect(target, storage_options=storage_options or None)
