"""GROBID server settings (the URL comes from config or `GROBID_URL`; GROBID needs no secret)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from lumina_assets.parsing.grobid_parser import GrobidParser, grobid_url_from_env


class GrobidResource(dg.ConfigurableResource):
    url: str | None = Field(
        default=None, description="GROBID base URL; empty means $GROBID_URL or localhost:8070"
    )
    timeout_s: int = 180

    def options(self) -> dict:
        return {"grobid_url": grobid_url_from_env(self.url), "timeout": self.timeout_s}

    def parser(self, **limits) -> GrobidParser:
        return GrobidParser(**self.options(), **limits)
