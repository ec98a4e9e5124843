"""Several reactors in one actor process on one shared fold (`dralab run --hosts N`, actors/hosts.py).

In-process (no Ray): the layout, and a host loop's decisions, each under its own reactor's name and
record id. Live (real redis-server, real local Ray): a run with two hosts ends as an undisturbed
run with one actor per reactor; a host killed mid-run comes back from its snapshot and the run still
ends the same, nothing lost, nothing applied twice; the consumer groups, snapshots and trimming are
the hosts'.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from test_faults_live import _options, _scenario, check_log, outcome

from dralab.actors.bus import RECORDER_GROUP
from dralab.actors.hosts import host_layout
from dralab.actors.live import LiveResult, LiveRun, run_live_async
from dralab.actors.memory_bus import MemoryBus
from dralab.actors.reactor_loop import ReactorLoop
from dralab.actors.redis_bus import RedisBus
from dralab.core.log.events import decode_record, encode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.run.inputs import scenario_inputs

NAMES = [r.name for r in build_reactors(run_config(_scenario()))]


def test_layout_deals_reactors_round_robin_into_hosts() -> None:
    assert host_layout(NAMES) == {n: [n] for n in NAMES}  # the default: one actor per reactor
    two = host_layout(NAMES, 2)
    assert list(two) == ["host-0", "host-1"]
    assert two["host-0"] == NAMES[0::2] and two["host-1"] == NAMES[1::2]
    assert sorted(n for hosted in two.values() for n in hosted) == sorted(NAMES)
    assert host_layout(NAMES, 1) == {"host-0": NAMES}
    assert len(host_layout(NAMES, 99)) == len(NAMES)  # never an empty host


async def test_a_host_loop_folds_once_and_each_reactor_decides_under_its_own_name() -> None:
    """One read and one fold for all hosted reactors; each decision is recorded as its reactor's
    (record id, source, per-reactor counters), with the view offset it was made on."""
    scenario = _scenario()
    bus = MemoryBus()
    for r in scenario_inputs(scenario, 5, mode="local", speed=1000.0):
        await bus.append(encode_record(r), id=r.id, expect={}, writes=r.writes())
    inputs_end = await bus.last_offset()
    loop = ReactorLoop("host-0", bus, "host-0", "host-0-0", reactors=NAMES)
    await loop._fold(await loop.rebuild())
    assert set(loop.hosted) == set(NAMES) and loop.reactor is not None
    for _ in range(20):  # decide, fold what was decided, decide again
        await loop._decide_all()
        await loop._fold(await bus.read(loop.state.offset))
    records = [decode_record(e.payload, e.offset) for e in bus.read_nowait()[inputs_end:]]
    assert records, "nobody decided anything"
    sources = {r.source for r in records}
    assert sources <= set(NAMES) and len(sources) >= 3
    for r in records:
        assert r.id.startswith(f"{r.source}@{r.view}/") and 0 < r.view < inputs_end + len(records)
    per = loop.stats["reactors"]
    assert sum(per[n]["decisions"] for n in NAMES) == loop.stats["decisions"] == len(records)
    assert {n for n in NAMES if per[n]["decisions"]} == sources
    assert await bus.group_info("host-0") is not None


# `undisturbed` (conftest.py): test_faults_live.py's scenario run live with one actor per reactor and no
# fault, made once per session; the runs here must end as it did.


@pytest.mark.live
@pytest.mark.timeout(150)
async def test_two_hosts_end_as_one_actor_per_reactor(redis_url: str, ray_session: None,
                                                      undisturbed: LiveResult) -> None:
    scenario = _scenario()
    opts = _options(redis_url, "hosts-2")
    opts.hosts = 2
    live = await run_live_async(scenario, opts)
    assert live.completed, live.error
    assert set(live.extra["actors"]) == {"host-0", "host-1"}
    assert outcome(live.state) == outcome(undisturbed.state)
    check_log(live, scenario, 5)
    sources = {decode_record(p, o).source for o, p in live.entries}
    assert set(NAMES) <= sources  # every hosted reactor decided
    assert live.extra["trimmed"] > 0  # trimming went by the hosts' snapshots and groups
    bus = await RedisBus.connect(redis_url, opts.stream or "")
    try:
        assert set(await bus.snapshot_offsets()) == {"host-0", "host-1"}
        for group in ("host-0", "host-1", RECORDER_GROUP):
            info = await bus.group_info(group)
            assert info.pending == 0 and info.last_delivered == len(live.entries)
    finally:
        await bus.close()


@pytest.mark.live
@pytest.mark.timeout(150)
async def test_a_killed_host_restarts_all_its_reactors_from_its_snapshot(
        redis_url: str, ray_session: None, undisturbed: LiveResult) -> None:
    scenario = _scenario()
    opts = _options(redis_url, "hosts-kill")
    opts.hosts = 2
    seen: dict[str, Any] = {}

    async def kill_mid_run(run: LiveRun) -> None:
        if "after" in seen:
            return
        status = (await run.actor_status())["host-0"]
        if "killed_pid" in seen:
            if status.get("pid") not in (None, seen["killed_pid"]) and status.get("ready"):
                seen["after"] = status
            return
        s = run.state
        if not (s.pods_by_phase["Pending"] and s.pods_by_phase["Running"]) or not status.get("snapshots_saved"):
            return
        seen["before"], seen["killed_pid"] = status, status["pid"]
        os.kill(status["pid"], signal.SIGKILL)

    live = await run_live_async(scenario, opts, hook=kill_mid_run)
    assert "killed_pid" in seen, "the run ended before host-0 could be killed"
    assert live.completed, live.error
    after = seen.get("after")
    assert isinstance(after, dict), "host-0 did not come back"
    assert after["hosts"] == host_layout(NAMES, 2)["host-0"]
    assert after["rebuilt_from"] == "snapshot" and after["snapshot_of"] == "host-0"
    assert after["snapshot_offset"] >= seen["before"]["snapshot_at"]
    assert after["anomalies"] == []
    assert set(after["reactors"]) == set(after["hosts"])
    assert outcome(live.state) == outcome(undisturbed.state)
    check_log(live, scenario, 5)


def test_hosts_must_not_be_negative() -> None:
    from test_cli_run import QUICKSTART, dralab

    proc = dralab("run", QUICKSTART, "--hosts", "-1")
    assert proc.returncode == 2 and "--hosts" in proc.stderr


# `dralab run --hosts 1` as a user calls it (every reactor in one actor, the run verifies) is
# tests/test_cli_run.py::test_run_then_verify_as_a_user_would: one CLI run checks both.
