"""Where the corpus comes from: the seeds file for the live crawl, or a local folder / BEIR directory."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from lumina_assets.core import settings


class CorpusResource(dg.ConfigurableResource):
    corpus_path: str = Field(
        default="",
        description="folder of PDFs, BEIR directory or Zotero library (data folder or .bib / .ris / CSL .json "
        "export, optionally `zotero:<path>`); empty means the LUMINA_CORPUS variable",
    )
    seeds_path: str = Field(
        default="", description="seeds YAML; empty means data/seeds.yaml (or LUMINA_SEEDS)"
    )
    crawl_with_local_corpus: bool = Field(
        default=False, description="also crawl OpenAlex/arXiv when a local corpus is configured"
    )
    enrich_local_papers: bool | None = Field(
        default=None,
        description="complete local PDFs' records from OpenAlex (printed DOI) / arXiv (printed arXiv id); "
        "empty means the LUMINA_ENRICH_PDFS variable (off by default)",
    )

    def local_corpus(self) -> Path | None:
        if not self.corpus_path:
            return settings.get().paths.corpus
        return Path(self.corpus_path.removeprefix("zotero:")).expanduser().resolve()

    def seeds_file(self) -> Path:
        return Path(self.seeds_path) if self.seeds_path else settings.get().paths.seeds

    def enrichment_enabled(self) -> bool:
        return (
            settings.get().parsing.enrich_pdfs
            if self.enrich_local_papers is None
            else self.enrich_local_papers
        )

    def live_crawl_enabled(self) -> bool:
        return self.local_corpus() is None or self.crawl_with_local_corpus
