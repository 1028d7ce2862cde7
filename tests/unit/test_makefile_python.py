"""Which Python the Makefile makes .venv with, on PATHs that hold only fake interpreters: python3.11, then 3.12, then
3.13 (Debian 12 ships 3.11, Debian 13 ships 3.13), then a plain python3 only when its version is one of those;
otherwise `make python` fails with a message that names what to install. The list matches requires-python. And
what `.ci/debian-packages` asks apt for on such a machine: make, python3 and python3-venv (python3.X-venv for the
chosen python3.X) when missing or when the chosen Python cannot create a venv (Debian without python3-venv)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from tools import missing_tool

from lumina_assets.core import settings

PROJECT = settings.PROJECT_ROOT
# what the Makefile's own lines and .ci/debian-packages run besides the interpreters
TOOLS = ("bash", "cat", "sha256sum", "cut", "mktemp", "rm", "dirname", "awk", "getent")


def _fake_path(
    tmp_path: Path, interpreters: dict[str, str], *, venv_works: bool = True, make: bool = True
) -> str:
    """PATH = fake interpreters (name -> the version their `-c` prints; `-m venv` succeeds or fails) + the tools."""
    if shutil.which("make") is None:
        missing_tool("GNU make is not installed")
    fake, tools = tmp_path / "fake-bin", tmp_path / "tools"
    fake.mkdir()
    tools.mkdir()
    for name in (*TOOLS, "make") if make else TOOLS:
        (tools / name).symlink_to(shutil.which(name))
    for name, version in interpreters.items():
        script = fake / name
        script.write_text(f'#!/bin/sh\n[ "$1" = -m ] && exit {0 if venv_works else 1}\necho {version}\n')
        script.chmod(0o755)
    return f"{fake}:{tools}"


def _make_python(tmp_path: Path, interpreters: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("make"), "-s", "--no-print-directory", "-C", str(PROJECT), "python"],
        capture_output=True,
        text=True,
        env={"PATH": _fake_path(tmp_path, interpreters), "HOME": str(tmp_path)},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("interpreters", "chosen"),
    [
        ({"python3.11": "3.11", "python3.13": "3.13", "python3": "3.13"}, "python3.11"),
        ({"python3.13": "3.13", "python3": "3.13"}, "python3.13"),  # a fresh Debian 13
        ({"python3.12": "3.12", "python3": "3.14"}, "python3.12"),
        ({"python3": "3.12"}, "python3"),  # a python3 of a supported version under no versioned name
    ],
)
def test_the_first_supported_python_is_chosen(tmp_path, interpreters, chosen):
    done = _make_python(tmp_path, interpreters)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "fake-bin" / chosen)


@pytest.mark.parametrize("interpreters", [{"python3": "3.14"}, {"python3": "3.10"}, {}])
def test_no_supported_python_is_a_clear_failure(tmp_path, interpreters):
    done = _make_python(tmp_path, interpreters)
    assert done.returncode != 0 and done.stdout == ""
    assert "No supported Python: Lumina needs one of Python 3.11 3.12 3.13" in done.stderr
    assert "apt-get install python3 python3-venv" in done.stderr


def test_the_makefile_list_is_what_requires_python_accepts():
    import tomllib

    listed = (
        re.search(r"^SUPPORTED_PYTHONS := (.+)$", (PROJECT / "Makefile").read_text(), re.M).group(1).split()
    )
    spec = SpecifierSet(tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["requires-python"])
    accepted = [f"3.{minor}" for minor in range(8, 20) if f"3.{minor}" in spec]
    assert listed == accepted


@pytest.mark.parametrize(
    ("interpreters", "venv_works", "make", "python_packages"),
    [
        (
            {"python3.11": "3.11", "python3": "3.11"},
            False,
            True,
            ["python3-venv", "python3.11-venv"],
        ),  # Debian 12
        (
            {"python3.13": "3.13", "python3": "3.13"},
            False,
            True,
            ["python3-venv", "python3.13-venv"],
        ),  # Debian 13
        ({"python3.13": "3.13", "python3": "3.13"}, True, True, []),
        ({"python3": "3.14"}, True, True, ["python3", "python3-venv"]),
        ({}, True, False, ["make", "python3", "python3-venv"]),  # a bare image: no make, no python
    ],
)
def test_ci_installs_what_a_fresh_debian_lacks(tmp_path, interpreters, venv_works, make, python_packages):
    path = _fake_path(tmp_path, interpreters, venv_works=venv_works, make=make)
    done = subprocess.run(
        [str(PROJECT / ".ci" / "debian-packages")],
        capture_output=True,
        text=True,
        env={"PATH": path, "HOME": str(tmp_path), "VENV": str(tmp_path / "no-venv-yet")},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    wanted = done.stdout.split()
    python_related = [p for p in wanted if p == "make" or p.startswith("python")]
    assert python_related == python_packages
    assert {"chromium", "nodejs", "npm"} <= set(wanted)  # none on this PATH
