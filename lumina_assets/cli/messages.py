"""What the CLI tells a user to do next, kept in one place so every command names the same step."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

BUILD_INDEX = "build it with `make demo` (offline, on your papers: `LUMINA_CORPUS=/path/to/pdfs make demo`)"


def fail(message: object, status: int = 2) -> int:
    """Say on stderr why a command stops and return its exit status."""
    print(message, file=sys.stderr)
    return status


def lumina_command() -> str:
    """How to call `lumina` from here: `.venv/bin/lumina` unless this very script is what PATH finds."""
    script = Path(sys.executable).with_name("lumina")
    if shutil.which("lumina") == str(script):
        return "lumina"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)
