"""The LLM requests-per-minute limit holds across the run's processes: slots taken from one file never come
closer than the interval, whichever process took them."""

from __future__ import annotations

import json
import subprocess
import sys

from lumina_assets.core import settings
from lumina_assets.core.llm import shared_rate_wait

SNIPPET = """
import json, sys
from pathlib import Path
from lumina_assets.core.llm import shared_rate_wait
print(json.dumps([shared_rate_wait(Path(sys.argv[1]), 5.0, sleep=lambda s: None) for _ in range(6)]))
"""


def test_slots_are_spaced_across_processes(tmp_path):
    path = tmp_path / "limits" / "openai.txt"
    env_path = str(settings.PROJECT_ROOT)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", SNIPPET, str(path)],
            stdout=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": env_path},
            start_new_session=True,
        )
        for _ in range(3)
    ]
    slots = [shared_rate_wait(path, 5.0, sleep=lambda s: None) for _ in range(6)]
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        slots += json.loads(out.strip().splitlines()[-1])
    slots.sort()
    assert len(slots) == 24
    # 5 s apart (no one slept: the slots are what each caller would have waited for)
    assert all(later - earlier >= 5.0 - 1e-6 for earlier, later in zip(slots, slots[1:], strict=False))
