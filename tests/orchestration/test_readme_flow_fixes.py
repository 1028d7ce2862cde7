"""What walking README's flow by hand turned up (issue 13): `lumina demo` followed by `make ui` and a PDF dropped into
the inbox. The demo ends by naming the inbox folder (and creates it: it did not exist, so a user had to guess
and mkdir it), and the inbox sensor's runs are the named `ingest_inbox` job on the Runs page, not
`__ASSET_JOB`."""

from __future__ import annotations

import argparse
import os
import shutil
import time

import dagster as dg
import pytest

from lumina_assets.core import settings, tables


def test_demo_names_and_creates_the_inbox(data_dir, monkeypatch, capsys, tmp_path):
    from lumina_assets.cli import ops, runner

    monkeypatch.setenv("LUMINA_CORPUS", str(tmp_path))  # offline mode: no network check
    monkeypatch.setattr(runner, "run_graph", lambda *args, **kwargs: [])
    monkeypatch.setattr(runner, "instance", dg.DagsterInstance.ephemeral)
    inbox = settings.inbox_dir()
    assert not inbox.exists()
    assert ops.run_demo(argparse.Namespace(groups="corpus")) == 0
    out = capsys.readouterr().out
    assert f"New papers: drop PDFs into {inbox} while `make ui` runs" in out
    assert inbox.is_dir()


@pytest.mark.slow
def test_inbox_sensor_runs_are_the_ingest_inbox_job(shared_data, data_dir):
    """The shipped sensor's request, launched as the daemon launches it (the sensor's job, the request's
    selection and tags): a successful `ingest_inbox` run that adds the dropped paper."""
    from lumina_assets.definitions import build_definitions
    from sensors.inbox import INBOX_ASSETS

    defs = build_definitions()
    sensor = defs.get_repository_def().get_sensor_def("inbox_sensor")
    assert sensor.job_name == "ingest_inbox"
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True)
    shutil.copyfile(shared_data / "pdfs" / "N18-3011.pdf", inbox / "N18-3011.pdf")
    settled = time.time() - 60  # older than the sensor's settle window
    os.utime(inbox / "N18-3011.pdf", (settled, settled))
    instance = dg.DagsterInstance.ephemeral()
    result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=None))
    [request] = result.run_requests
    assert set(request.asset_selection) == set(INBOX_ASSETS)
    for partitions_request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(
            partitions_request.partitions_def_name, partitions_request.partition_keys
        )
    run = defs.resolve_job_def(sensor.job_name).execute_in_process(
        instance=instance, asset_selection=request.asset_selection, tags=request.tags, raise_on_error=False
    )
    assert run.success
    assert run.dagster_run.job_name == "ingest_inbox"
    papers = tables.read(tables.PAPERS)
    assert (
        papers.height == 1
        and papers["title"][0] == "Construction of the Literature Graph in Semantic Scholar"
    )


def test_ui_check_follows_only_runs_after_the_drop(data_dir, tmp_path, monkeypatch):
    """devtools/ui_check.py --ingest-pdf said 'inbox -> index without a manual step: yes' on a data dir the demo had
    indexed, before the sensor had even seen the PDF: it took the demo's passage_index run for the new one."""
    import sys

    sys.path.insert(0, str(settings.PROJECT_ROOT / "devtools"))
    import ui_check

    pdf = tmp_path / "new.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    runs: list[dict] = []
    monkeypatch.setattr(
        ui_check, "_graphql", lambda base, query: {"data": {"runsOrError": {"results": runs}}}
    )
    monkeypatch.setattr(ui_check.time, "sleep", lambda seconds: None)

    def run(run_id: str, created: float, assets: list[str]) -> dict:
        return {
            "runId": run_id,
            "status": "SUCCESS",
            "creationTime": created,
            "assetSelection": [{"path": [a]} for a in assets],
            "tags": [],
        }

    runs.append(run("demo0000", time.time() - 600, ["passage_index"]))
    assert not ui_check.watch_inbox_ingestion("http://127.0.0.1:9", pdf, timeout=0.5)
    assert (settings.inbox_dir() / "new.pdf").is_file()
    runs.append(run("sensor00", time.time() + 1, ["local_papers", "papers"]))
    runs.append(run("automate", time.time() + 2, ["passage_index"]))
    assert ui_check.watch_inbox_ingestion("http://127.0.0.1:9", pdf, timeout=0.5)
