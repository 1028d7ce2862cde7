"""The LanceDB resource: where the indexes live, a local folder by default or object storage
(`connect_lancedb`)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from lumina_assets.indexing.connection import connect_lancedb


class LanceDBResource(dg.ConfigurableResource):
    """Where the passage and paper indexes live. For S3-compatible storage set `uri="s3://bucket/prefix"`;
    credentials come from the secret fields (as `dg.EnvVar`), other options through `storage_options`.
    Secrets are never logged."""

    uri: str = ""  # empty: settings.lancedb_uri() (LUMINA_LANCEDB_URI or data/lancedb)
    storage_options: dict[str, str] = Field(default_factory=dict)
    s3_endpoint: str = ""  # e.g. http://127.0.0.1:9000 for MinIO / moto
    s3_region: str = ""
    aws_access_key_id: str = ""
    aws_secret_access_key: str = ""
    allow_http: bool = False

    def resolved_storage_options(self) -> dict[str, str]:
        options = dict(self.storage_options)
        for key, value in (
            ("aws_endpoint", self.s3_endpoint),
            ("aws_region", self.s3_region),
            ("aws_access_key_id", self.aws_access_key_id),
            ("aws_secret_access_key", self.aws_secret_access_key),
        ):
            if value:
                options[key] = value
        if self.allow_http:
            options["allow_http"] = "true"
        return options

    def resolved_uri(self) -> str:
        from lumina_assets.core import settings

        return self.uri or settings.lancedb_uri()

    def connect(self):
        return connect_lancedb(self.resolved_uri(), self.resolved_storage_options())
