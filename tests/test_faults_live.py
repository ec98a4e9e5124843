"""Faults on the live path (real redis-server, real local Ray): kill each kind of reactor actor mid-run
(two kinds per run), and restart redis-server mid-run with AOF on. Each run must end in the same final state as an
undisturbed run of the same scenario, lose no event and apply none twice (checked from the log), and a
restarted actor must rebuild its view from its latest snapshot plus the tail.

The scenario (built here) is DRA-based so that every actor kind has work: the cloud makes a node, the
lifecycle makes it Ready, the drivers publish its ResourceSlice, the claim controller makes the pods'
ResourceClaims, the scheduler allocates and binds, the autoscaler scales up, and the broker (Kueue's
ProvisioningRequest admission check) holds the late pair back until its atomic ProvisioningRequest is
Provisioned. Its outcome does not depend on timing: four pods of four GPUs in one NVLink domain need
exactly the two nodes the group allows, so however late a restarted actor acts, every pod ends Running
on a node of the group (a broker down for a whole booking retries with a second request, which finds
the capacity already there). Its
duration is long (60 min) so that every run ends by settling, never by running out of cluster time
while actors restart (after a Redis restart Ray brings all six back in about 10 s of wall time here,
minutes of cluster time at this speed).

Trimming runs every half second in every run here, so each run also shows that a live log trimmed
under the reactors' feet still ends complete and verifies.

Restarting the reactors' processes in-process (no Ray) is covered first, on the in-memory bus:
restore from a snapshot, and refuse the snapshots that must not be used.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from dralab.actors.live import LiveOptions, LiveResult, LiveRun, run_live_async
from dralab.actors.memory_bus import MemoryBus
from dralab.actors.reactor_loop import ReactorLoop, SnapshotPolicy
from dralab.actors.redis_bus import RedisBus
from dralab.actors.redis_server import RedisServer, redis_server_available
from dralab.core.log.events import PodBound, decode_record, encode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import Scenario, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.core.state.codec import encode_state
from dralab.replay.logs.logfile import LogFile
from dralab.replay.simulation.sim import simulate
from dralab.replay.simulation.verify import verify

SPEED = 45.0
SNAPSHOTS = SnapshotPolicy(every=4, max_age_s=0.5, min_gap_s=0.2)  # small, so a snapshot exists mid-run

_SLICE = {"driver": "gpu.example.com", "devices": [
    {"name": f"gpu-{i}", "attributes": {"nvlinkDomain": {"int": i // 4}}, "capacity": {"memory": {"value": "80Gi"}}}
    for i in range(8)]}
_POD = {"metadata": {"name": "train"}, "spec": {
    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-gpus-one-domain"}],
    "containers": [{"name": "main", "image": "trainer:1.0",
                    "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "claims": [{"name": "gpus"}]}}]}}
# The late pair goes through Kueue (the broker): gated, one atomic ProvisioningRequest, then admitted.
_LATE = {"name": "late", "labels": {"kueue.x-k8s.io/queue-name": "training", "kueue.x-k8s.io/pod-group-name": "late"},
         "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}}
FAULTS = {
    "apiVersion": "dralab.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "faults"},
    "spec": {
        "seed": 5, "duration": "60m", "policy": {"autoscaler": "dra"},
        # the late pair's ProvisioningRequest claims from a template: without the fix of autoscaler#10065 (open
        # upstream, so on in 1.37: core/kube/bugs.py) it would never find capacity, and this story is not about it
        "kubernetes": {"bugs": {"autoscaler#10065": False}},
        "autoscaler": {"scanInterval": "10s", "maxNodeProvisionTime": "15m"},
        "objects": [
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
             "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "four-gpus-one-domain"},
             "spec": {"spec": {"devices": {
                 "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 4}}],
                 "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/nvlinkDomain"}]}}}},
        ],
        "nodeGroups": [{
            "name": "h100", "min": 0, "max": 2, "provisionDelay": {"min": "90s", "max": "100s"},
            "template": {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": {"gpu": "h100"}},
                         "status": {"allocatable": {"cpu": "192", "memory": "2000Gi", "pods": "110"}}},
            "resourceSlices": [{"spec": _SLICE}],
        }],
        "nodes": [{"group": "h100", "count": 1}],
        "workload": [{"at": "0s", "count": 2, "pod": _POD},
                     {"at": "10s", "count": 2, "pod": {**_POD, "metadata": _LATE}}],
    },
}
FAULTS["spec"]["objects"] += [  # type: ignore[index]
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ProvisioningRequestConfig", "metadata": {"name": "atomic"},
     "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "capacity"},
     "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
              "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "atomic"}}},
]


def _scenario() -> Scenario:
    return parse_scenario(yaml.safe_load(yaml.safe_dump(FAULTS)), "faults")


# scheduler, autoscaler, cloud, lifecycle, drivers, claims, broker
KINDS = [r.name for r in build_reactors(run_config(_scenario()))]


def outcome(state: ClusterState) -> dict[str, Any]:
    """What a run's end state must agree on whatever the timing: pods and phases, nodes per group,
    every pod scheduled, every claim allocated, the slices published."""
    return {
        "pods": {k: p.phase for k, p in state.pods.items()},
        "scheduled": sorted(k for k, p in state.pods.items() if p.node is not None),
        "nodes_by_group": {g: len(n) for g, n in state.nodes_by_group.items()},
        "ready": sum(n.ready for n in state.nodes.values()),
        # claim names have a random suffix (drawn on the view the controller decided on): owners
        "claims": sorted(c.owner for c in state.dra.claims.values() if c.allocation is not None),
        "slices": len(state.dra.slices),
        "anomalies": state.anomalies,
    }


def check_log(live: LiveResult, scenario: Scenario, seed: int) -> None:
    """No event lost, none applied twice, from the log: offsets dense from 1, every record id once,
    every scenario input in it once, each pod bound once, no anomaly, and the log verifies."""
    assert [o for o, _ in live.entries] == list(range(1, len(live.entries) + 1))
    records = [decode_record(p, o) for o, p in live.entries]
    ids = Counter(r.id for r in records)
    assert not [i for i, n in ids.items() if n > 1], "a record appended twice"
    inputs = {r.id for r in scenario_inputs(scenario, seed, mode="local")}
    assert inputs <= set(ids), f"inputs lost: {sorted(inputs - set(ids))[:5]}"
    bound = [e.pod for r in records for e in r.events if isinstance(e, PodBound)]
    assert sorted(bound) == sorted(set(bound)) == sorted(live.state.pods)
    assert live.state.anomalies == []
    assert live.violations == []
    result = verify(LogFile("live", {}, live.entries))
    assert result.ok, result.divergence and result.divergence.render()


def _options(redis_url: str, tag: str, drivers_shards: int = 1) -> LiveOptions:
    return LiveOptions(seed=5, redis_url=redis_url, stream=f"t-fault-{tag}-{uuid.uuid4().hex[:6]}", speed=SPEED,
                       timeout_s=120, snapshots=SNAPSHOTS, trim_every_s=0.5, reconnect_s=30,
                       drivers_shards=drivers_shards)


# `undisturbed`, the scenario run live with no fault (the end state every run here must reach), is made
# once per session in conftest.py: tests/test_live_hosts.py compares its runs with it too.


def test_scenario_outcome_is_the_simulators() -> None:
    """The scenario does what the module docstring says, in virtual time; every actor kind has work."""
    result = simulate(_scenario(), 5)
    sim = result.state
    sources = {decode_record(p, o).source for o, p in result.entries}
    assert set(KINDS) <= sources and "broker" in KINDS
    assert [c.state for c in sim.provisioning.admission.values()] == ["Ready"]
    assert outcome(sim)["nodes_by_group"] == {"h100": 2}
    assert set(outcome(sim)["pods"].values()) == {"Running"} and len(sim.pods) == 4
    assert len(outcome(sim)["scheduled"]) == len(outcome(sim)["claims"]) == 4


def _mid_run(run: LiveRun) -> bool:
    """Work done and work left: a pod bound, a pod pending."""
    s = run.state
    return bool(s.pods_by_phase["Pending"]) and bool(s.pods_by_phase["Running"])


# Every kind of actor is killed, two per run: the run goes on with both restarting at once, and must still
# end as the undisturbed run did. Each pair holds a kind whose work the run still waits for mid-run (the
# scheduler, the autoscaler, the cloud making the second node, drivers-0 publishing its slice). The last
# run has two driver shards and kills one of them (drivers-0 hosts both nodes' drivers).
KILLS = [(("scheduler", "claims"), 1), (("autoscaler", "lifecycle"), 1), (("cloud", "drivers"), 1),
         (("broker", "drivers-0"), 2)]


def test_the_kill_runs_kill_every_kind_of_actor() -> None:
    killed = [k for kinds, _ in KILLS for k in kinds]
    assert sorted(k for k in killed if k != "drivers-0") == sorted(KINDS) and "drivers-0" in killed
    assert len(killed) == len(set(killed))


@pytest.mark.live
@pytest.mark.timeout(150)
@pytest.mark.parametrize(("kinds", "shards"), KILLS, ids=["+".join(k) for k, _ in KILLS])
async def test_killed_actor_same_end_state_nothing_lost_nothing_twice(
        kinds: tuple[str, ...], shards: int, redis_url: str, ray_session: None, undisturbed: LiveResult) -> None:
    """Each kind of actor, and one shard of two driver actors, SIGKILLed mid-run once it has a snapshot:
    Ray restarts it, it rebuilds from its snapshot plus the tail, and the run ends as the undisturbed one."""
    scenario = _scenario()
    seen: dict[str, dict[str, Any]] = {kind: {} for kind in kinds}

    async def kill_mid_run(run: LiveRun) -> None:
        if all("after" in s for s in seen.values()):
            return
        status = await run.actor_status()
        for kind, s in seen.items():
            st = status[kind]
            if "after" in s:
                continue
            if "killed_pid" in s:
                if st.get("pid") not in (None, s["killed_pid"]) and st.get("ready"):
                    s["after"] = st
                continue
            if not _mid_run(run) or not st.get("snapshots_saved"):
                continue  # wait for work done and work left, and for a snapshot to restart from
            s["before"] = st
            s["killed_pid"] = st["pid"]
            s["log_end"] = run.state.offset
            os.kill(st["pid"], signal.SIGKILL)

    live = await run_live_async(scenario, _options(redis_url, "+".join(kinds), shards), hook=kill_mid_run)
    for kind, s in seen.items():
        assert "killed_pid" in s, f"the run ended before {kind} could be killed"
    assert live.completed, live.error
    for kind, s in seen.items():
        after = s.get("after")
        assert isinstance(after, dict), f"{kind} did not come back"
        assert after["pid"] != s["killed_pid"], kind
        # rebuilt from its snapshot plus the tail, not from the whole log
        assert after["rebuilt_from"] == "snapshot", (kind, after)
        assert 0 < after["snapshot_offset"] <= after["view_offset"], (kind, after)
        assert after["snapshot_offset"] >= s["before"]["snapshot_at"], (kind, after, s["before"])
        assert after["rebuilt"] <= after["view_offset"] - after["snapshot_offset"], (kind, after)
        assert after["anomalies"] == [], (kind, after)
    assert outcome(live.state) == outcome(undisturbed.state)
    check_log(live, scenario, 5)


@pytest.mark.live
@pytest.mark.timeout(150)
async def test_redis_restart_with_aof_same_end_state(tmp_path: Path, ray_session: None,
                                                      undisturbed: LiveResult) -> None:
    if not redis_server_available():
        pytest.skip("redis-server is not on PATH")
    scenario = _scenario()
    seen: dict[str, Any] = {}
    with RedisServer(tmp_path / "redis", appendfsync="everysec") as server:
        restarted: list[asyncio.Task[str]] = []

        async def restart_redis_mid_run(run: LiveRun) -> None:
            if "killed" in seen or not _mid_run(run):
                return
            status = await run.actor_status()
            if not all(s.get("snapshots_saved") for s in status.values()):
                return
            seen["before"] = status
            seen["killed"] = run.state.offset
            server.kill()  # SIGKILL: what was acknowledged is in the AOF file (written before replies)

            async def start_again() -> str:
                await asyncio.sleep(1.5)
                return await asyncio.to_thread(server.start)

            restarted.append(asyncio.create_task(start_again()))

        live = await run_live_async(scenario, _options(server.url, "redis"), hook=restart_redis_mid_run)
        assert "killed" in seen, "the run ended before Redis could be restarted"
        assert restarted and restarted[0].done()
        assert live.completed, live.error
        assert live.extra["bus_outages_s"] and live.extra["bus_outages_s"][0] >= 1.0
        # the actors exited on the lost connection and Ray restarted them, from their snapshots
        for name, st in live.extra["actors"].items():
            assert st["rebuilt_from"] == "snapshot", (name, st)
        assert outcome(live.state) == outcome(undisturbed.state)
        check_log(live, scenario, 5)
        # what Redis holds after the restart agrees with the log the driver kept
        bus = await RedisBus.connect(server.url, live.extra["bus"].split("stream ")[1])
        try:
            assert await bus.last_offset() == len(live.entries)
            for name in KINDS:
                info = await bus.group_info(name)
                assert info.pending == 0 and info.last_delivered == len(live.entries)
        finally:
            await bus.close()


# -- the reactor loop restarted in-process, on the in-memory bus ---------------------------------


def _sim_log(bus: MemoryBus, scenario: Scenario, seed: int) -> ClusterState:
    """The simulator's log of the scenario, appended to ``bus``; the state folded from it."""
    state = ClusterState()
    for offset, payload in simulate(scenario, seed).entries:
        record = decode_record(payload, offset)
        bus.append_nowait(payload, id=record.id, expect={}, writes=record.writes())
        state.apply(offset, record)
    return state


async def test_loop_restores_from_its_snapshot_and_folds_only_the_tail() -> None:
    bus = MemoryBus()
    full = _sim_log(bus, _scenario(), 5)
    end = full.offset
    cut = end // 2
    first = ReactorLoop("scheduler", bus, "scheduler", "scheduler-0")
    first._apply(bus.read_nowait(0, cut))
    await first._save_snapshot()
    assert bus.snapshot_offsets_nowait() == {"scheduler": cut}

    again = ReactorLoop("scheduler", bus, "scheduler", "scheduler-0")
    await again.rebuild()
    assert again.stats["rebuilt_from"] == "snapshot" and again.stats["snapshot_offset"] == cut
    assert again.stats["rebuilt"] == end - cut
    assert encode_state(again.state) == encode_state(full)
    assert again.reactor is not None and again.clock is not None and again.seed == 5

    # another reactor without a snapshot of its own starts from the scheduler's
    other = ReactorLoop("autoscaler", bus, "autoscaler", "autoscaler-0")
    await other.rebuild()
    assert other.stats["rebuilt_from"] == "snapshot" and other.stats["snapshot_of"] == "scheduler"
    assert encode_state(other.state) == encode_state(full)


@pytest.mark.parametrize("damage", ["corrupt", "ahead", "other-run"])
async def test_loop_refolds_the_log_when_its_snapshot_cannot_be_used(damage: str) -> None:
    bus = MemoryBus()
    full = _sim_log(bus, _scenario(), 5)
    if damage == "corrupt":
        bus.put_snapshot_nowait("cloud", 3, b"\x93not a snapshot")
    elif damage == "ahead":  # a snapshot of a longer log (Redis lost the log's last second, say)
        longer = MemoryBus()
        state = _sim_log(longer, _scenario(), 5)
        extra = scenario_inputs(_scenario(), 5)[-1]
        state.apply(state.offset + 1, extra)
        bus.put_snapshot_nowait("cloud", state.offset, encode_state(state))
    else:  # the same stream name reused by another run: another RunStarted at offset 1
        other = MemoryBus()
        _sim_log(other, _scenario(), 6)
        prefix = ClusterState()
        for e in other.read_nowait(0, 5):
            prefix.apply(e.offset, decode_record(e.payload, e.offset))
        bus.put_snapshot_nowait("cloud", 5, encode_state(prefix))
    loop = ReactorLoop("cloud", bus, "cloud", "cloud-0", snapshots=SnapshotPolicy(every=1))
    await loop.rebuild()
    assert loop.stats["rebuilt_from"] == "log" and loop.stats["rebuilt"] == full.offset
    assert loop.stats["snapshot_discarded"]
    assert encode_state(loop.state) == encode_state(full)
    # the unusable snapshot was replaced by a good one at once
    assert bus.get_snapshot_nowait("cloud") == (full.offset, encode_state(full))


async def test_driver_trims_only_below_every_snapshot_and_the_recorder() -> None:
    """LiveRun.trim on the in-memory bus: nothing while a reactor has no snapshot, then the floor is
    the lowest snapshot's tail, and never above what the recorder (the driver) holds."""
    scenario = _scenario()
    bus = MemoryBus()
    from dralab.actors.bus_factory import BusSpec

    run = LiveRun(scenario, LiveOptions(), bus, BusSpec("memory"))
    await bus.create_group("recorder")
    for r in scenario_inputs(scenario, 5):
        await bus.append(encode_record(r), id=r.id, expect={}, writes=r.writes())
    end = await bus.last_offset()
    await run._record(0)  # the driver reads and acknowledges everything
    assert run.state.offset == end
    names = [r.name for r in build_reactors(run_config(scenario))]
    for n in names[:-1]:
        await bus.put_snapshot(n, end, b"x")
    assert await run.trim() == 0  # the last reactor has no snapshot: it would refold from 1
    await bus.put_snapshot(names[-1], 1, b"x")
    assert await run.trim() == 1 and bus.read_nowait()[0].offset == 2
    for n in names:
        await bus.put_snapshot(n, end, b"x")
    run.state.offset = 2  # as if the driver had not read past 2: what it holds bounds the floor
    assert await run.trim() == 1
    assert [e.offset for e in bus.read_nowait()] == list(range(3, end + 1))
