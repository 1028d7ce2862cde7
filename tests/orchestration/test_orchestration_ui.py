"""The Dagster UI for real: devtools/ui_check.py starts `dagster dev` on 127.0.0.1 with the shipped instance config,
opens the global asset graph in headless Chromium and checks every group and asset is drawn."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from tools import missing_tool

from lumina_assets.core import settings

PROJECT = settings.PROJECT_ROOT
sys.path.insert(0, str(PROJECT / "devtools"))
import ui_check  # noqa: E402

pytestmark = pytest.mark.slow


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def test_asset_graph_is_drawn_in_a_real_browser(data_dir, tmp_path):
    missing = ui_check.missing_browser_tools()
    if missing:
        missing_tool("UI check needs " + ", ".join(missing))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(PROJECT / ".dagster_home" / "dagster.yaml", home / "dagster.yaml")
    screenshot = data_dir / "reports" / "ui_asset_graph.png"
    completed = subprocess.run(
        [sys.executable, str(PROJECT / "devtools" / "ui_check.py"), "--dagster-home", str(home)]
        + ["--screenshot", str(screenshot), "--timeout", "150"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=PROJECT,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-4000:]
    assets, groups = ui_check.expected_graph()
    drawn = re.search(r"asset nodes drawn: (\d+)", output)
    assert drawn and int(drawn.group(1)) >= len(assets), output[-2000:]
    assert f"{len(assets)} assets in {len(groups)} groups" in output
    width, height = _png_size(screenshot)
    assert (width, height) == (2200, 1400)
    assert screenshot.stat().st_size > 30_000  # a drawn graph, not a blank page
    # The server was stopped by PID: nothing of it listens any more.
    port = re.search(r"http://127\.0\.0\.1:(\d+)", output)
    assert port
    import socket

    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", int(port.group(1)))) != 0
