"""The Dagster resource around `lumina_assets.indexing.embedding.Embedder`."""

from __future__ import annotations

import dagster as dg
from pydantic import PrivateAttr

from lumina_assets.indexing.embedding import Embedder


class EmbedderResource(dg.ConfigurableResource):
    """The passage / sentence / query encoder. `model_name_or_path` empty means LUMINA_EMBEDDING_MODEL, else the
    bundled all-MiniLM-L6-v2 weights (the same default `lumina search` uses, so queries and index agree). `form`
    empty means LUMINA_EMBEDDING_FORM (auto: int8 on CPUs with VNNI, fp32 on others, fp16 on a CUDA device)."""

    model_name_or_path: str = ""
    batch_size: int = 64
    device: str = "auto"  # auto | cpu | cuda
    form: str = ""

    _embedder: Embedder | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._embedder = self._build()
        self._embedder.prepare()  # load (or export, once per machine) the encoder when the run starts

    def _build(self) -> Embedder:
        return Embedder(
            self.model_name_or_path or None,
            batch_size=self.batch_size,
            device=self.device,
            form=self.form or None,
        )

    def get_embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._build()
        return self._embedder
