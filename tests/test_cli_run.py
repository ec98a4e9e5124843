"""`dralab run` as a user calls it: bad input and unreachable services fail fast and clearly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "scenarios" / "quickstart.yaml")


def dralab(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=timeout)


def test_unreachable_redis_fails_within_seconds_without_leaking_the_password() -> None:
    start = time.monotonic()
    proc = dralab("run", QUICKSTART, "--redis", "redis://:s3cret-pw@127.0.0.1:1/0")
    elapsed = time.monotonic() - start
    assert proc.returncode == 3, proc.stderr
    assert elapsed < 15
    assert "cannot reach Redis at 127.0.0.1:1" in proc.stderr
    assert "s3cret-pw" not in proc.stderr + proc.stdout


def test_missing_scenario_file_is_exit_2() -> None:
    proc = dralab("run", "does/not/exist.yaml")
    assert proc.returncode == 2
    assert "does/not/exist.yaml" in proc.stderr


def test_bad_speed_is_exit_2() -> None:
    proc = dralab("run", QUICKSTART, "--speed", "0")
    assert proc.returncode == 2
    assert "--speed" in proc.stderr


def test_replay_without_action_says_what_to_do(tmp_path: Path) -> None:
    log = tmp_path / "a.dralog"
    assert dralab("sim", QUICKSTART, "--log", str(log)).returncode == 0
    proc = dralab("replay", str(log))
    assert proc.returncode == 2 and "--verify" in proc.stderr
