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


def test_run_then_verify_as_a_user_would(redis_url: str, tmp_path: Path) -> None:
    """`dralab run ... --log b.dralog` on real Ray and Redis, then `dralab replay b.dralog --verify`;
    stdout holds exactly one JSON object and every stderr line is JSON with --log-format json.

    With `--hosts 1` (every reactor in one actor, tests/test_live_hosts.py): the one CLI run checks both
    that command line and the plain one (`dralab run` without --hosts is run from the command line by
    tests/test_observability.py::test_progress_on_stderr_never_in_json_stdout)."""
    import json

    log = tmp_path / "b.dralog"
    proc = dralab("run", QUICKSTART, "--redis", redis_url, "--hosts", "1", "--log", str(log), "--speed", "60",
                  "-o", "json", "--log-format", "json", timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["pods"]["pending"] == 0 and summary["pods"]["scheduled"] == summary["pods"]["total"]
    assert summary["invariant_violations"] == []
    assert summary["mode"] == "local"
    for line in proc.stderr.splitlines():
        json.loads(line)
    assert any(json.loads(line)["event"] == "run.progress" for line in proc.stderr.splitlines())
    started = [json.loads(line) for line in proc.stderr.splitlines() if '"actor.ready"' in line]
    assert [s.get("reactor") for s in started] in ([], ["host-0"])  # actors' lines may stay in Ray's logs
    check = dralab("replay", str(log), "--verify", "-o", "json")
    assert check.returncode == 0, check.stdout
    assert json.loads(check.stdout)["header"]["mode"] == "local"


def test_reusing_a_stream_is_refused(redis_url: str, tmp_path: Path) -> None:
    """A run never writes into another run's log: the second run on the same stream is exit 2."""
    import asyncio

    from dralab.actors.redis_bus import RedisBus

    async def occupy() -> None:
        bus = await RedisBus.connect(redis_url, "t-used-stream")
        await bus.append(b"x", id="someone-else", expect={}, writes=[])
        await bus.close()

    asyncio.run(occupy())
    proc = dralab("run", QUICKSTART, "--redis", redis_url, "--stream", "t-used-stream", timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "already holds 1 entries" in proc.stderr


def test_bad_stream_name_is_refused_before_anything_starts() -> None:
    proc = dralab("run", QUICKSTART, "--stream", "a{b}")
    assert proc.returncode == 2
    assert "--stream" in proc.stderr
