"""A Python snippet run in a new interpreter against a data dir: what a search process started afresh sees (the
recorded index setting), not what the test process has loaded already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_snippet(code: str, *args: str, data_dir: Path, timeout: float = 300) -> dict:
    """The JSON object on the snippet's last output line; fails with the end of its stderr when it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "LUMINA_DATA_DIR": str(data_dir)},
        timeout=timeout,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
