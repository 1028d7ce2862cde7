"""What a result shows beyond the index: passages' page spans, stored PDFs and in-corpus citations, read from the
pipeline's Parquet tables for the requested ids only."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


class PaperFiles:
    """Page spans of passages and stored PDFs of papers, read from the `passages` and `pdf_files` tables for the
    requested ids only (Parquet predicate pushdown); empty when those tables do not exist (e.g. a BEIR index)."""

    def __init__(self, tables_dir: Path | None = None):
        from lumina_assets.core import settings

        self.tables_dir = Path(tables_dir) if tables_dir else settings.tables_dir()

    def _scan(self, name: str):
        import polars as pl

        folder = self.tables_dir / name
        if not folder.is_dir() or not any(folder.glob("*.parquet")):
            return None
        return pl.scan_parquet(str(folder / "*.parquet"), missing_columns="insert", extra_columns="ignore")

    def _rows(self, table: str, key: str, ids: list[str], columns: list[str], where=None) -> list[dict]:
        """The rows of `ids` only (and `where`); none while the table is missing or being rewritten."""
        import polars as pl

        scan = self._scan(table)
        if scan is None or not ids:
            return []
        wanted = pl.col(key).is_in(ids)
        try:
            frame = scan.filter(wanted if where is None else wanted & where).select(key, *columns).collect()
        except Exception as error:
            log.debug("%s rows unavailable: %s", table, error)
            return []
        return list(frame.iter_rows(named=True))

    def page_spans(self, passage_ids: list[str]) -> dict[str, tuple[int | None, int | None]]:
        rows = self._rows("passages", "passage_id", passage_ids, ["page_start", "page_end"])
        return {r["passage_id"]: (r["page_start"], r["page_end"]) for r in rows}

    def pdf_hashes(self, paper_ids: list[str]) -> dict[str, str]:
        import polars as pl

        rows = self._rows("pdf_files", "paper_id", paper_ids, ["sha256"], pl.col("status") == "ok")
        return {r["paper_id"]: r["sha256"] for r in rows if r["sha256"]}

    def cited_by_counts(self, paper_ids: list[str]) -> dict[str, int]:
        """How many corpus papers cite each of `paper_ids` (in-corpus "cited by", from `citation_edges`); papers
        no corpus paper cites are left out."""
        import polars as pl

        path = self.tables_dir / "citation_edges.parquet"
        if not path.exists() or not paper_ids:
            return {}
        try:
            frame = (
                pl.scan_parquet(str(path))
                .filter(pl.col("cited").is_in(paper_ids) & (pl.col("citing") != pl.col("cited")))
                .group_by("cited")
                .agg(pl.col("citing").n_unique().alias("count"))
                .collect()
            )
        except Exception as error:  # a table being rewritten: no counts this time
            log.debug("cited-by counts unavailable: %s", error)
            return {}
        return dict(zip(frame["cited"].to_list(), frame["count"].to_list(), strict=True))

    def citations(self, paper_id: str) -> dict[str, list[str]]:
        """In-corpus links from `citation_edges`: what `paper_id` cites and what cites it."""
        import polars as pl

        path = self.tables_dir / "citation_edges.parquet"
        if not path.exists():
            return {"cites": [], "cited_by": []}
        frame = (
            pl.scan_parquet(str(path))
            .filter((pl.col("citing") == paper_id) | (pl.col("cited") == paper_id))
            .collect()
        )
        return {
            "cites": sorted(frame.filter(pl.col("citing") == paper_id)["cited"].to_list()),
            "cited_by": sorted(frame.filter(pl.col("cited") == paper_id)["citing"].to_list()),
        }
