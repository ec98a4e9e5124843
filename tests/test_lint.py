"""Lint and types as tests, so that the README's one test command checks them too."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_is_clean() -> None:
    if shutil.which("ruff") is None and _run("ruff", "--version").returncode != 0:
        pytest.skip("ruff is not installed (it is in the test extras)")
    proc = _run("ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_core_is_mypy_clean() -> None:
    proc = _run("mypy", "core")
    assert proc.returncode == 0, proc.stdout[-4000:]
