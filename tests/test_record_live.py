"""`dralab record` against a real redis-server (and, for the live runs, a real local Ray).

The proof issue 7 asks for: each provisioning scenario run live while `dralab record` (a real
subprocess) records its stream, with trimming on and frequent snapshots so the stream really is
trimmed during the run; the recorded file holds every entry of the run byte for byte, verifies with
zero divergence, and replays to byte-identical output twice. Then the edges: a recorder that waits for
a stream that does not exist yet (and creates nothing), one killed with SIGKILL mid-run (its `.part`
prefix opens; its group holds trimming until destroyed), a stream already trimmed below offset 1,
a stream that is not a dralab run, and bad Redis URLs (exit status, no password in the message).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dralab.actors.live import LiveOptions, LiveRun, run_live_async
from dralab.actors.reactor_loop import SnapshotPolicy
from dralab.actors.redis_bus import RedisBus
from dralab.core.scenario.load import Policy, load_scenario
from dralab.replay.logs.logfile import LogFileError, LogWriter, read_log
from dralab.replay.simulation.sim import simulate

pytestmark = [pytest.mark.live, pytest.mark.timeout(240)]
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
PROVISIONING = ["topology-mismatch", "late-resourceslices", "partial-gang", "fractional-sharing", "booking-theft",
                "scale-down-race", "provision-timeout", "kueue-retry"]
CASES = [(name, None) for name in PROVISIONING] + [("late-resourceslices", "count")]
SPEED = 600.0
TIMINGS: dict[str, float] = {}


def dralab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dralab", *args], capture_output=True, text=True, timeout=timeout)


def start_recorder(redis_url: str, stream: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    err = open(out.with_name(out.name + ".stderr"), "w")  # noqa: SIM115 - the child owns it
    cmd = [sys.executable, "-m", "dralab", "record", "--redis", redis_url, "--stream", stream, "--log", str(out),
           "-o", "json", "--log-format", "json", "--progress-every", "1", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)


async def finish(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[int, dict[str, Any]]:
    out, _ = await asyncio.to_thread(proc.communicate, None, timeout)
    return proc.returncode, json.loads(out) if out.strip() else {}


async def groups(bus: RedisBus) -> dict[str, dict[str, Any]]:
    """name -> XINFO GROUPS fields of the stream's consumer groups."""
    raw = await bus._cmd.xinfo_groups(bus.log_key)
    return {(g["name"].decode() if isinstance(g["name"], bytes) else g["name"]): g for g in raw}


def last_delivered(info: dict[str, Any]) -> int:
    sid = info["last-delivered-id"]
    return int((sid.decode() if isinstance(sid, bytes) else sid).split("-")[0])


async def record_groups(bus: RedisBus) -> dict[str, dict[str, Any]]:
    if not await bus._cmd.exists(bus.log_key):
        return {}
    return {n: g for n, g in (await groups(bus)).items() if n.startswith("record-")}


async def wait_caught_up(bus: RedisBus, last: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rec = await record_groups(bus)
        if rec and all(last_delivered(g) >= last and int(g["pending"]) == 0 for g in rec.values()):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the recorder did not acknowledge up to offset {last}: {await record_groups(bus)}")


@pytest.mark.parametrize(("name", "policy"), CASES, ids=[f"{n}-{p or 'default'}" for n, p in CASES])
async def test_live_run_recorded_verifies_and_replays_identically(
        name: str, policy: str | None, redis_url: str, ray_session: None, tmp_path: Path) -> None:
    started = time.monotonic()
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    if policy is not None:
        scenario = msgspec.structs.replace(scenario, policy=Policy(autoscaler=policy))  # type: ignore[arg-type]
    stream = f"t-rec-{name}-{uuid.uuid4().hex[:6]}"
    out = tmp_path / f"{name}.dralog"
    # Started before the stream exists: it waits for it. Stopped by SIGTERM once it holds everything.
    proc = start_recorder(redis_url, stream, out, "--until-idle", "0")
    # All reactors in one host actor (`dralab run --hosts 1`): starting one Ray actor per reactor costs 3 s
    # each on a busy 2-core machine. The count case keeps the default layout, one actor per reactor.
    options = LiveOptions(seed=scenario.seed or 0, redis_url=redis_url, stream=stream, speed=SPEED, timeout_s=120,
                          trim_every_s=0.5, progress_every_s=0, hosts=0 if policy == "count" else 1,
                          snapshots=SnapshotPolicy(every=5, max_age_s=0.5, min_gap_s=0.2))
    try:
        live = await run_live_async(scenario, options)
        run_s = time.monotonic() - started
        assert live.error is None and live.violations == []
        bus = await RedisBus.connect(redis_url, stream)
        try:
            await wait_caught_up(bus, live.entries[-1][0])
            proc.send_signal(signal.SIGTERM)
            code, summary = await finish(proc)
            assert await record_groups(bus) == {}, "the recorder's group outlived it"
            left = await bus._cmd.xlen(bus.log_key)
        finally:
            await bus.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, out.with_name(out.name + ".stderr").read_text()
    assert summary["stopped"] == "signal" and summary["gaps"] == []
    assert summary["records"] == len(live.entries)
    assert (summary["first_offset"], summary["last_offset"]) == (1, live.entries[-1][0])
    assert not out.with_name(out.name + ".part").exists()
    recorded = read_log(out)
    assert recorded.damage is None
    assert recorded.entries == live.entries  # byte for byte, offsets included
    assert recorded.header["scenario"] == scenario.name and recorded.header["seed"] == options.seed
    assert recorded.header["policy"] == {"autoscaler": policy or scenario.policy.autoscaler}
    assert recorded.header["mode"] == "local"
    # Trimming ran during the run; it never removed an entry the recorder did not hold yet.
    assert live.extra["trimmed"] > 0 and left < len(live.entries), (live.extra["trimmed"], left)
    # Two replays of the same file, side by side (two cores): byte-identical output. Every invariant,
    # liveness included, over the live log (the driver checked all but liveness as it folded), alongside.
    first, second, checked = await asyncio.gather(
        *(asyncio.to_thread(dralab, "replay", str(out), "--verify", "-o", "json") for _ in range(2)),
        asyncio.to_thread(dralab, "check", str(out), "-o", "json"))
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["ok"] is True and report["divergence"] is None and report["decisions_checked"] > 0
    assert report["records"] == len(live.entries)
    assert second.returncode == 0 and second.stdout == first.stdout
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True, checked.stdout + checked.stderr
    if policy == "count":  # the failure seen live: reproduced in the simulator, shrunk, and what-if'd away
        small = tmp_path / "small.dralog"
        shrunk, whatif = await asyncio.gather(
            asyncio.to_thread(dralab, "shrink", str(out), "--until", "double-scale-up", "--log", str(small),
                              "-o", "json", "--quiet"),
            asyncio.to_thread(dralab, "replay", str(out), "--with", "autoscaler.policy=dra", "-o", "json"))
        assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr
        result = json.loads(shrunk.stdout)
        assert result["reproduced"] and result["units_after"]["pods"] == 1, result
        assert dralab("replay", str(small), "--verify").returncode == 0
        assert whatif.returncode == 0, whatif.stderr
        rows = {r["metric"]: r for r in json.loads(whatif.stdout)["rows"]}
        assert rows["scale-ups"]["recorded"] >= 2 and rows["scale-ups"]["whatif"] == 1, rows["scale-ups"]
    case = f"{name}-{policy or 'default'}"
    TIMINGS[case] = round(time.monotonic() - started, 1)
    sys.stderr.write(f"\nrecord-live {case}: {TIMINGS[case]}s wall (run {run_s:.1f}s), {len(live.entries)} records, "
                     f"{live.extra['trimmed']} trimmed\n")


async def test_recorder_killed_mid_run_leaves_an_openable_part_and_a_group_holding_trim(
        redis_url: str, ray_session: None, tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "kueue-retry.yaml")
    stream = f"t-rec-kill-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "killed.dralog"
    proc = start_recorder(redis_url, stream, out, "--until-idle", "0")
    seen: dict[str, Any] = {}
    watcher = await RedisBus.connect(redis_url, stream)

    async def kill_recorder(run: LiveRun) -> None:
        if "acked" in seen or run.state.offset < 8:
            return
        rec = await record_groups(watcher)
        if rec:
            (group, info), = rec.items()
            if last_delivered(info) >= 5 and int(info["pending"]) == 0:
                os.kill(proc.pid, signal.SIGKILL)  # no handler runs: the file stays .part, the group stays
                seen.update(acked=last_delivered(info), group=group)

    options = LiveOptions(seed=scenario.seed or 0, redis_url=redis_url, stream=stream, speed=SPEED / 6, timeout_s=120,
                          trim_every_s=0.3, progress_every_s=0, hosts=1,
                          snapshots=SnapshotPolicy(every=5, max_age_s=0.5, min_gap_s=0.2))
    try:
        live = await run_live_async(scenario, options, hook=kill_recorder)
        proc.wait(timeout=10)
        assert "acked" in seen, "the run ended before the recorder could be killed"
        assert proc.returncode == -signal.SIGKILL
        assert not out.exists() and out.with_name(out.name + ".part").exists()
        # The dead recorder's group is still there and holds trimming at what it acknowledged.
        rec = await record_groups(watcher)
        assert list(rec) == [seen["group"]]
        held = last_delivered(rec[seen["group"]])
        oldest = await watcher._cmd.xrange(watcher.log_key, count=1)
        assert int(oldest[0][0].split(b"-")[0]) <= held + 1
        # The documented fix: destroy the group; trimming then goes on.
        await watcher._cmd.xgroup_destroy(watcher.log_key, seen["group"])
        assert await watcher.trim_acknowledged(live.entries[-1][0]) > 0
    finally:
        if proc.poll() is None:
            proc.kill()
        await watcher.close()
    part = out.with_name(out.name + ".part")
    if hasattr(LogWriter, "flush"):
        # The writer makes each batch durable before the recorder acknowledges it: the .part opens, and
        # holds at least everything acknowledged, as a prefix of the run.
        prefix = read_log(part)
        assert len(prefix.entries) >= seen["acked"]
        assert prefix.entries == live.entries[:len(prefix.entries)]
    else:
        # Until replay/logs/logfile.py has flush(): the buffered .part may not even hold its header yet.
        try:
            prefix = read_log(part)
        except LogFileError:
            return
        assert prefix.entries == live.entries[:len(prefix.entries)]


def sim_entries(name: str = "kueue-retry") -> list[tuple[int, bytes]]:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    return simulate(scenario, scenario.seed or 0).entries


async def append_all(bus: RedisBus, entries: list[tuple[int, bytes]]) -> None:
    await bus.append_many([(p, f"t/{o}", {}, []) for o, p in entries])


async def test_records_a_stream_and_stops_when_idle_or_at_max_entries(redis_url: str, tmp_path: Path) -> None:
    entries = sim_entries()
    stream = f"t-rec-idle-{uuid.uuid4().hex[:6]}"
    bus = await RedisBus.connect(redis_url, stream)
    try:
        await append_all(bus, entries)
        idle = dralab("record", "--redis", redis_url, "--stream", stream, "--log", str(tmp_path / "idle.dralog"),
                      "--until-idle", "0.5", "-o", "json")
        capped = dralab("record", "--redis", redis_url, "--stream", stream, "--log", str(tmp_path / "cap.dralog"),
                        "--max-entries", "5")
        assert await record_groups(bus) == {}
    finally:
        await bus.close()
    assert idle.returncode == 0, idle.stderr
    summary = json.loads(idle.stdout)
    assert summary["stopped"] == "idle" and summary["records"] == len(entries) and summary["gaps"] == []
    assert read_log(tmp_path / "idle.dralog").entries == entries
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout.startswith("recorded 5 records (offsets 1 to 5)") and "--max-entries" in capped.stdout
    assert read_log(tmp_path / "cap.dralog").entries == entries[:5]


async def test_waits_for_a_stream_that_never_comes_and_creates_nothing(redis_url: str, tmp_path: Path) -> None:
    stream = f"t-rec-none-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "none.dralog"
    started = time.monotonic()
    done = dralab("record", "--redis", redis_url, "--stream", stream, "--log", str(out), "--wait", "1",
                  "-o", "json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["stopped"] == "no_run" and 1 <= time.monotonic() - started < 20
    assert not out.exists() and not out.with_name(out.name + ".part").exists()
    bus = await RedisBus.connect(redis_url, stream)
    try:
        assert not await bus._cmd.exists(bus.log_key)
    finally:
        await bus.close()


async def test_refuses_a_stream_already_trimmed_below_offset_1(redis_url: str, tmp_path: Path) -> None:
    entries = sim_entries()
    stream = f"t-rec-trimmed-{uuid.uuid4().hex[:6]}"
    bus = await RedisBus.connect(redis_url, stream)
    try:
        await bus.create_group("g")
        await append_all(bus, entries)
        delivered = await bus.read_group("g", "c", 6)
        await bus.ack("g", [e.offset for e in delivered])
        assert await bus.trim_acknowledged() == 6
        done = dralab("record", "--redis", redis_url, "--stream", stream, "--log", str(tmp_path / "t.dralog"),
                      "--wait", "2")
        assert list(await groups(bus)) == ["g"], "the refused recorder left its group behind"
    finally:
        await bus.close()
    assert done.returncode == 2
    assert "offsets 1 to 6 are gone (the first entry left is offset 7)" in done.stderr
    assert "dralab run --log" in done.stderr
    assert not (tmp_path / "t.dralog").exists() and not (tmp_path / "t.dralog.part").exists()


async def test_refuses_a_stream_that_is_not_a_dralab_run(redis_url: str, tmp_path: Path) -> None:
    stream = f"t-rec-junk-{uuid.uuid4().hex[:6]}"
    bus = await RedisBus.connect(redis_url, stream)
    try:
        await append_all(bus, [(1, b"not msgpack \xc1")])
        done = dralab("record", "--redis", redis_url, "--stream", stream, "--log", str(tmp_path / "j.dralog"))
    finally:
        await bus.close()
    assert done.returncode == 2
    assert f"--stream: {stream}: log entry at offset 1" in done.stderr and "dralab run" in done.stderr


def test_unreachable_or_bad_redis_url_exits_without_the_password(tmp_path: Path) -> None:
    out = str(tmp_path / "x.dralog")
    down = dralab("record", "--redis", "redis://:s3cr3t-pw@127.0.0.1:1/0", "--stream", "s", "--log", out)
    assert down.returncode == 3
    assert "cannot reach Redis at 127.0.0.1:1" in down.stderr and "s3cr3t-pw" not in down.stderr + down.stdout
    bad = dralab("record", "--redis", "http://:s3cr3t-pw@127.0.0.1:1/0", "--stream", "s", "--log", out)
    assert bad.returncode == 2
    assert "--redis: bad Redis URL http://***@127.0.0.1:1/0" in bad.stderr and "s3cr3t-pw" not in bad.stderr
    env = {k: v for k, v in os.environ.items() if k != "DRALAB_REDIS_URL"}
    none = subprocess.run([sys.executable, "-m", "dralab", "record", "--stream", "s", "--log", out],
                          capture_output=True, text=True, env=env, timeout=60)
    assert none.returncode == 2 and "--redis: no Redis URL given" in none.stderr


async def test_a_paused_recorder_holds_trimming_and_misses_nothing(redis_url: str, tmp_path: Path) -> None:
    """SIGSTOP the recorder: every other group acknowledges everything and the stream is trimmed, yet
    nothing the recorder has not acknowledged goes; SIGCONT, and the file holds the whole log."""
    entries = sim_entries()
    stream = f"t-rec-pause-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "paused.dralog"
    bus = await RedisBus.connect(redis_url, stream)
    proc = start_recorder(redis_url, stream, out, "--until-idle", "0")
    try:
        await bus.create_group("other")
        await append_all(bus, entries[:5])
        await wait_caught_up(bus, 5)
        proc.send_signal(signal.SIGSTOP)
        await bus.append_many([(p, f"t/{o}", {}, []) for o, p in entries[5:]])
        delivered = await bus.read_group("other", "c", 1000)
        await bus.ack("other", [e.offset for e in delivered])
        assert await bus.trim_acknowledged() == 5  # only what the recorder holds
        oldest = await bus._cmd.xrange(bus.log_key, count=1)
        assert oldest[0][0] == b"6-0"
        proc.send_signal(signal.SIGCONT)
        await wait_caught_up(bus, entries[-1][0])
        proc.send_signal(signal.SIGTERM)
        code, summary = await finish(proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        await bus.close()
    assert code == 0 and summary["records"] == len(entries) and summary["gaps"] == []
    assert read_log(out).entries == entries


async def test_entries_gone_from_the_middle_are_reported_as_gaps(redis_url: str, tmp_path: Path) -> None:
    entries = sim_entries()
    stream = f"t-rec-gap-{uuid.uuid4().hex[:6]}"
    bus = await RedisBus.connect(redis_url, stream)
    try:
        await append_all(bus, entries)
        assert await bus._cmd.xdel(bus.log_key, "5-0", "6-0") == 2  # what no trim does: a hole in the middle
        done = dralab("record", "--redis", redis_url, "--stream", stream, "--log", str(tmp_path / "g.dralog"),
                      "--until-idle", "0.5", "-o", "json")
    finally:
        await bus.close()
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert summary["gaps"] == [[5, 6]] and summary["records"] == len(entries) - 2
    assert read_log(tmp_path / "g.dralog").entries == [e for e in entries if e[0] not in (5, 6)]
