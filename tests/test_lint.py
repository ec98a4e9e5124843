"""Lint and types as tests, so that the README's one test command checks them too."""

import os
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


def test_every_package_is_mypy_clean(tmp_path: Path) -> None:
    """mypy over the package as it is installed (`dralab` = cli/, `dralab.core` = core/, ...), so calls
    across packages are checked with their real types: run on the folders one by one, mypy cannot resolve
    `dralab.replay` from cli/ (an editable install's import hook) and takes it as Any."""
    tree = tmp_path / "tree" / "dralab"
    tree.mkdir(parents=True)
    for f in (ROOT / "cli").glob("*.py"):
        (tree / f.name).symlink_to(f)
    for folder in ("core", "actors", "replay"):
        (tree / folder).symlink_to(ROOT / folder, target_is_directory=True)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache" / "package"), "-p", "dralab"],
        cwd=tmp_path / "tree", env={**os.environ, "MYPYPATH": str(tmp_path / "tree")},
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]
