"""docs/corpus.md's catalogue promises through the `lumina` command and the `papers` asset's run config, on real
PDFs, the shipped Definitions and the demo's runner (a temporary data dir and DAGSTER_HOME):

- a file deleted from a `LUMINA_CORPUS` folder keeps its paper (the corpus only grows), in `papers` and the index;
- `lumina sources` (the console script, in a subprocess) lists each origin with its record count and the removals;
- `lumina prune --source <folder> --dry-run` (subprocess) names what would go and changes nothing; `lumina prune`
  drops the folder's records: its papers no other source knows leave `papers` and the index, a paper another
  source also knows stays, and the removal is a `curate_catalogue` run and a `removed_papers` row;
- `lumina restore --source <folder>` lifts the removal, and the folder's next ingest brings the paper back;
- the same removals as the `papers` asset's run config (`remove_ids`, `prune_origins`), as the Launchpad sends it.

The commands that run jobs go through the CLI's entry point (`lumina_assets.cli.main:main`, what the console script
calls) in this process, so the index can use the hashing embedder; the expected counts are read from the tables."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from hashing_embedder import embedder_resource

from lumina_assets.core import tables
from lumina_assets.indexing import lancedb_tables as indexing

pytestmark = pytest.mark.slow

SHARED = "N18-3011.pdf"  # in both folders: two sources know it
ONLY_A = "2304.02623v1.pdf"
ONLY_B = "pasa.pdf"


def _definitions() -> dg.Definitions:
    from lumina_assets.definitions import defs

    return dg.Definitions(
        assets=list(defs.assets),
        asset_checks=list(defs.asset_checks),
        resources={**defs.resources, "embedder": embedder_resource()},
        jobs=list(defs.jobs),
        loggers=dict(defs.loggers),
    )


def _ingest(defs, monkeypatch, folder: Path) -> None:
    """`LUMINA_CORPUS=<folder> lumina demo --groups corpus,parsing,index`, as the demo runs it."""
    from lumina_assets.cli.runner import instance, run_graph

    monkeypatch.setenv("LUMINA_CORPUS", str(folder))
    try:
        reports = run_graph(defs, instance(), groups=["corpus", "parsing", "index"])
    finally:
        monkeypatch.delenv("LUMINA_CORPUS")
    assert [(r.job, r.error) for r in reports if not r.success] == []


def _lumina(*args: str) -> subprocess.CompletedProcess:
    """The installed console script, with this test's data dir and Dagster home."""
    script = Path(sys.executable).parent / "lumina"
    done = subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _papers() -> set[str]:
    return set(tables.read(tables.PAPERS)["paper_id"].to_list())


def _indexed(defs) -> set[str]:
    table = indexing.open_table(defs.resources["lancedb"].connect(), indexing.PASSAGES_TABLE)
    return set(table.to_arrow().column("paper_id").to_pylist())


def _ids_of(origin: str) -> set[str]:
    records = tables.read(tables.CATALOGUE_RECORDS)
    return set(records.filter(pl.col("origin") == origin)["paper_id"].to_list()) & _papers()


def _listed_sources(output: str) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(r"^  (\S.*?): (\d+) records$", output, re.M)}


def _record_counts() -> dict[str, int]:
    counts = tables.read(tables.CATALOGUE_RECORDS).group_by("origin").len()
    return dict(counts.select("origin", "len").iter_rows())


def _folder(shared_data, root: Path, names) -> Path:
    root.mkdir()
    for name in names:
        shutil.copyfile(shared_data / "pdfs" / name, root / name)
    return root


def test_sources_prune_restore_and_a_deleted_file(shared_data, data_dir, tmp_path, monkeypatch, capsys):
    from lumina_assets.cli.main import main

    defs = _definitions()
    monkeypatch.setattr("lumina_assets.definitions.defs", defs)  # what _curate runs: the hashing embedder
    folder_a = _folder(shared_data, tmp_path / "folder_a", (SHARED, ONLY_A))
    folder_b = _folder(shared_data, tmp_path / "folder_b", (SHARED, ONLY_B))
    origin_a, origin_b = f"corpus:{folder_a.resolve()}", f"corpus:{folder_b.resolve()}"
    _ingest(defs, monkeypatch, folder_a)
    _ingest(defs, monkeypatch, folder_b)
    shared, only_a, only_b = (
        _ids_of(origin_a) & _ids_of(origin_b),
        _ids_of(origin_a) - _ids_of(origin_b),
        _ids_of(origin_b) - _ids_of(origin_a),
    )
    assert len(shared) == len(only_a) == len(only_b) == 1
    assert _indexed(defs) == _papers() == shared | only_a | only_b

    # a file deleted from the folder keeps its paper, in the catalogue and the index, after the folder's next run
    (folder_a / ONLY_A).unlink()
    _ingest(defs, monkeypatch, folder_a)
    assert only_a <= _papers() and only_a <= _indexed(defs)

    # lumina sources: every origin with its record count (as the records table holds them), no removals yet
    listed = _lumina("sources").stdout
    assert _listed_sources(listed) == _record_counts()
    assert set(_record_counts()) == {origin_a, origin_b}
    assert "removed papers: 0" in listed

    # lumina prune --dry-run: the folder's papers no other source knows, and nothing changes
    before = (_papers(), _record_counts())
    planned = _lumina("prune", "--source", str(folder_b), "--dry-run").stdout
    assert f"{origin_b}: {_record_counts()[origin_b]} records, 1 papers known from no other source" in planned
    assert f"would remove {next(iter(only_b))}" in planned and next(iter(shared)) not in planned
    assert (_papers(), _record_counts()) == before

    # lumina prune: out of the catalogue and the index, recorded; the paper folder_a also knows stays
    from lumina_assets.cli.runner import instance

    assert main(["prune", "--source", str(folder_b), "--reason", "wrong folder"]) == 0
    assert "ok: prune" in capsys.readouterr().out
    assert _papers() == shared | only_a and _indexed(defs) == shared | only_a
    removed = tables.read(tables.REMOVED_PAPERS).to_dicts()
    assert [(r["paper_id"], r["action"], r["reason"]) for r in removed] == [
        (next(iter(only_b)), "prune", "wrong folder")
    ]
    assert instance().get_runs(limit=1)[0].job_name == "curate_catalogue"
    listed = _lumina("sources").stdout
    assert origin_b not in _listed_sources(listed) and "removed papers: 1" in listed

    # the removed paper stays out when its folder comes again, until restored
    _ingest(defs, monkeypatch, folder_b)
    assert not only_b & _papers()
    assert main(["restore", "--source", origin_b]) == 0
    assert tables.read(tables.REMOVED_PAPERS).height == 0
    _ingest(defs, monkeypatch, folder_b)
    assert only_b <= _papers() and only_b <= _indexed(defs)


def test_remove_ids_and_prune_origins_as_run_config(shared_data, data_dir, tmp_path, monkeypatch):
    """The Launchpad's way: the curate_catalogue job with the `papers` asset's config in run config."""
    from lumina_assets.cli.runner import instance, run_job

    defs = _definitions()
    folder_a = _folder(shared_data, tmp_path / "folder_a", (SHARED, ONLY_A))
    folder_b = _folder(shared_data, tmp_path / "folder_b", (ONLY_B,))
    _ingest(defs, monkeypatch, folder_a)
    _ingest(defs, monkeypatch, folder_b)
    origin_b = f"corpus:{folder_b.resolve()}"
    from_b = _ids_of(origin_b)
    gone = sorted(_papers() - from_b)[0]
    kept = _papers() - {gone} - from_b

    def curate(config: dict):
        report = run_job(
            defs, "curate_catalogue", instance=instance(), run_config={"ops": {"papers": {"config": config}}}
        )
        assert report.success, report.error
        return report

    report = curate({"remove_ids": [gone], "reason": "retracted"})
    assert report.metadata["papers"]["removed"] == 1
    assert _papers() == kept | from_b and _indexed(defs) == kept | from_b
    curate({"prune_origins": [origin_b]})
    assert _papers() == kept and _indexed(defs) == kept
    removed = {
        r["paper_id"]: (r["action"], r["reason"]) for r in tables.read(tables.REMOVED_PAPERS).to_dicts()
    }
    assert removed[gone] == ("remove", "retracted")
    assert {removed[p][0] for p in from_b} == {"prune"}
    assert not (tables.read(tables.CATALOGUE_RECORDS)["origin"] == origin_b).any()
