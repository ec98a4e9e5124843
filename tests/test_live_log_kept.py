"""A live run always leaves its log (issue 18, "A live run always leaves its log"): records reach the `.dralog`
as the driver records them, and the file is closed on every ending, so a run that fails (an exception inside
it, a poison entry that kills the driver, a timeout, its Redis gone) leaves a valid, closed log up to the last
record held, which `dralab replay FILE --verify` reads; the failed run's message says where.

Real Redis (the session's private server, or one of the test's own) and real local Ray."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from dralab.actors.live import LiveOptions, LiveRun, run_live_async
from dralab.actors.log_sink import RecordSink
from dralab.actors.redis_server import RedisServer
from dralab.core.run.config import policies, run_config
from dralab.replay.logs.logfile import LogWriter, make_header, read_log
from dralab.replay.simulation.verify import verify

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = str(ROOT / "scenarios" / "quickstart.yaml")


def dralab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=timeout)


def _sink(path: Path, scenario: Any, seed: int) -> RecordSink:
    header = make_header(scenario=scenario.name, seed=seed, policy=policies(run_config(scenario)), mode="local")
    return RecordSink(lambda: LogWriter(path, header), str(path))


def _quickstart() -> Any:
    from dralab.inputs import load_scenario_input

    return load_scenario_input(QUICKSTART, None)


def _kept_log_verifies(path: Path, upto: int) -> None:
    """The file is closed (index and footer: no damage), holds offsets 1..upto, and verifies."""
    log = read_log(path)
    assert log.damage is None, log.damage
    assert [o for o, _ in log.entries] == list(range(1, upto + 1))
    result = verify(log)
    assert result.ok, result.divergence and result.divergence.render()
    assert not Path(f"{path}.part").exists()


@pytest.mark.live
@pytest.mark.timeout(120)
async def test_an_exception_inside_the_run_leaves_a_closed_log_that_verifies(
        redis_url: str, ray_session: None, tmp_path: Path) -> None:
    """A hook that raises once pods are scheduled: the exception reaches the caller, and the file holds
    every record the driver had folded, closed and valid."""
    scenario = _quickstart()
    path = tmp_path / "failed.dralog"
    sink = _sink(path, scenario, 7)
    folded: list[int] = []

    async def boom(run: LiveRun) -> None:
        if run.state.pods_by_phase["Running"]:
            folded.append(run.state.offset)
            raise RuntimeError("injected mid-run")

    options = LiveOptions(seed=7, redis_url=redis_url, stream=f"t-kept-{uuid.uuid4().hex[:6]}", speed=40,
                          timeout_s=60, progress_every_s=0)
    with pytest.raises(RuntimeError, match="injected mid-run"):
        await run_live_async(scenario, options, boom, sink=sink)
    assert folded and sink.last_offset == folded[0] and sink.records == folded[0]
    _kept_log_verifies(path, folded[0])
    assert sink.kept() == f"log kept up to offset {folded[0]} in {path}"


@pytest.mark.live
@pytest.mark.timeout(120)
async def test_redis_killed_for_good_leaves_the_log_up_to_the_outage(ray_session: None, tmp_path: Path) -> None:
    """The run's Redis is killed mid-run and never comes back: after ``reconnect_s`` the run ends with its
    error, and the file holds what was recorded, closed and valid."""
    scenario = _quickstart()
    path = tmp_path / "lost.dralog"
    sink = _sink(path, scenario, 7)
    with RedisServer(tmp_path / "redis") as server:
        killed: list[int] = []

        async def kill_redis(run: LiveRun) -> None:
            if not killed and run.state.pods_by_phase["Running"]:
                killed.append(run.state.offset)
                server.kill()

        options = LiveOptions(seed=7, redis_url=server.url, stream="t-lost", speed=40, timeout_s=60,
                              progress_every_s=0, reconnect_s=2)
        result = await run_live_async(scenario, options, kill_redis, sink=sink)
    assert killed and result.error and "unreachable" in result.error
    assert sink.last_offset >= killed[0]
    _kept_log_verifies(path, sink.last_offset)


def _poison_when_running(url: str, stream: str, proc: subprocess.Popen[str], deadline_s: float = 90) -> None:
    """Once the run has a few entries, append one without the payload field, with the run's own id
    sequence (issue 18's reproduction: it killed the driver, and the log with it)."""
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + deadline_s
    while client.xlen(f"{{{stream}}}:log") < 5:
        assert proc.poll() is None, "the run ended before the poison entry could be written"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client.eval("local o=redis.call('INCR',KEYS[2]); redis.call('XADD',KEYS[1],o..'-0','x','y')", 2,
                f"{{{stream}}}:log", f"{{{stream}}}:seq")
    client.close()


@pytest.mark.live
@pytest.mark.timeout(180)
def test_a_run_killed_by_a_poison_entry_still_leaves_its_log(redis_url: str, tmp_path: Path) -> None:
    """`dralab run --log FILE` while a stranger appends an entry without a payload: whether the driver
    survives it (entries from anyone are set aside) or fails, FILE is a log that verifies, and a failed
    run says it kept it. Before: the driver died with `ValueError: b'p' is not in list` and no file."""
    log = tmp_path / "poisoned.dralog"
    stream = f"t-poison-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen([sys.executable, "-m", "dralab", "run", QUICKSTART, "--redis", redis_url, "--stream",
                             stream, "--log", str(log), "--speed", "40", "--timeout", "90", "--progress-every", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _poison_when_running(redis_url, stream, proc)
        _, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err, err[-3000:]
    assert log.exists(), f"no log left (exit {proc.returncode}): {err[-2000:]}"
    if proc.returncode != 0:
        assert "log kept up to offset" in err and str(log) in err, err[-2000:]
    check = dralab("replay", str(log), "--verify")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_timed_out_run_says_where_its_log_is(redis_url: str, tmp_path: Path) -> None:
    """Exit 1 on --timeout, one line saying what was kept where, and the log verifies."""
    log = tmp_path / "short.dralog"
    proc = dralab("run", QUICKSTART, "--redis", redis_url, "--log", str(log), "--speed", "20", "--timeout", "4",
                  "--progress-every", "0")
    assert proc.returncode == 1, proc.stderr[-2000:]
    line = [x for x in proc.stderr.splitlines() if x.startswith("dralab: error:")]
    assert len(line) == 1 and "timed out" in line[0] and f"in {log}" in line[0], proc.stderr[-2000:]
    assert "log kept up to offset" in line[0]
    assert dralab("replay", str(log), "--verify").returncode == 0


def test_a_sink_that_cannot_open_its_file_says_which(tmp_path: Path) -> None:
    """No folder: SinkError naming the file, and kept() says nothing was written."""
    from dralab.actors.log_sink import SinkError

    sink = RecordSink(lambda: LogWriter(tmp_path / "no" / "x.dralog", {"scenario": "s"}), str(tmp_path / "no/x"))
    with pytest.raises(SinkError, match="--log: .*/no/x"):
        sink.open()
    assert "no log was written" in sink.kept()
    sink.close()  # nothing to close: no error


def test_the_sink_flushes_on_its_own_schedule(tmp_path: Path) -> None:
    """Records written reach the `.part` file at the next flush (a reader or a crash sees them), and
    close() is idempotent."""
    path = tmp_path / "f.dralog"
    sink = RecordSink(lambda: LogWriter(path, {"scenario": "s", "snapshot_every": 0}), str(path), flush_every_s=0)
    sink.open()
    part = Path(f"{path}.part")
    before = part.stat().st_size
    sink.write(1, b"\x80")
    sink.maybe_flush()
    assert part.stat().st_size > before
    sink.close()
    sink.close()
    assert path.exists() and not part.exists() and sink.kept() == f"log kept up to offset 1 in {path}"



@pytest.mark.live
@pytest.mark.timeout(120)
def test_a_run_stopped_by_sigterm_says_where_its_log_is(redis_url: str, tmp_path: Path) -> None:
    """SIGTERM (docker compose stop) or Ctrl-C mid-run: the run ends cleanly, exit 1, one line saying it was
    interrupted and what was kept where; the `.part` file grew while the run went on (flushed each second)."""
    import signal

    log = tmp_path / "stopped.dralog"
    part = Path(f"{log}.part")
    proc = subprocess.Popen([sys.executable, "-m", "dralab", "run", QUICKSTART, "--redis", redis_url, "--log",
                             str(log), "--speed", "10", "--progress-every", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not part.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        header_only = part.stat().st_size
        while part.stat().st_size <= header_only:  # a block of records flushed mid-run
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err[-2000:]
    line = [x for x in err.splitlines() if x.startswith("dralab: error:")]
    assert len(line) == 1 and "interrupted" in line[0] and "log kept up to offset" in line[0], err[-2000:]
    assert dralab("replay", str(log), "--verify").returncode == 0
