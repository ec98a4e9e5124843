"""Node lifecycle and device drivers: per-driver publish delays (Ready before slices), a driver restart
bumping the pool's generation, an unhealthy device tainted, node failure, taints and deletion.

Through the simulator (no invariant violation, verified byte for byte) and by calling the reactors and
the node operations on folded states.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders import Log, arrival, group, node_template, scenario_doc, simulated, sourced_events

from dralab.core.cluster.nodes import delete_node, node_not_ready, set_taints
from dralab.core.controllers.claims import ClaimController
from dralab.core.controllers.drivers import Drivers, driver_slices, mark_unhealthy, unhealthy_taint
from dralab.core.engine.contract import decision_rng
from dralab.core.log.events import (
    ClaimReleased,
    NodeDeleted,
    NodeReady,
    NodeTaintsChanged,
    PodBound,
    PodFinished,
    ResourceSlicePublished,
)
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.dra import check_slice_templates
from dralab.core.scenario.load import ScenarioError, parse_scenario
from dralab.core.scheduler.reactor import Scheduler
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.sim import SimResult

GPU_DRIVER, NIC_DRIVER = "gpu.example.com", "nic.example.com"
MINUTE = 60_000


def run(d: dict[str, Any], seed: int = 3) -> SimResult:
    result: SimResult = simulated(d, seed, "drivers.yaml")
    return result


def events_of(result: SimResult, kind: type) -> list[tuple[int, str, Any]]:
    return sourced_events(result.entries, kind)


def gpu_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]}}


SLICES = [
    {"spec": {"driver": GPU_DRIVER, "devices": [{"name": f"gpu-{i}"} for i in range(4)]}},
    {"spec": {"driver": NIC_DRIVER, "devices": [{"name": "nic-0"}, {"name": "nic-1"}]}},
]
OBJECTS = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
     "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}},
]


def doc(drivers: list[dict[str, Any]] | None = None, *, nodes: int = 0, workload: list[dict[str, Any]] | None = None,
        delay: str = "1m", duration: str = "20m", policy: str = "dra") -> dict[str, Any]:
    g = group("h100", max=3, delay=delay, template=node_template(gpu=0))
    g["resourceSlices"] = copy.deepcopy(SLICES)
    if drivers is not None:
        g["drivers"] = drivers
    d = scenario_doc([g], nodes={"h100": nodes} if nodes else None, duration=duration,
                     workload=workload if workload is not None else [arrival(0, gpu_pod("train"))])
    d["spec"]["objects"] = copy.deepcopy(OBJECTS)
    d["spec"]["policy"] = {"autoscaler": policy}
    return d


def allocated_device(state: ClusterState, pod: str) -> str:
    [claim] = state.dra.pod_claims[f"pod/default/{pod}"].values()
    allocation = state.dra.claims[claim].allocation
    assert allocation is not None
    [result] = allocation["devices"]["results"]
    return str(result["device"])


# ---------------------------------------------------------------- publish delays


def test_each_driver_publishes_after_its_own_delay_the_node_is_ready_before() -> None:
    result = run(doc([{"name": GPU_DRIVER, "publishDelay": "2m"}]))
    [(t_ready, _, ready)] = events_of(result, NodeReady)
    published = {e.manifest["spec"]["driver"]: (t, source)
                 for t, source, e in events_of(result, ResourceSlicePublished)}
    assert published == {NIC_DRIVER: (t_ready, "drivers"), GPU_DRIVER: (t_ready + 2 * MINUTE, "drivers")}
    [(t_bound, _, bound)] = events_of(result, PodBound)
    assert bound.node == ready.name and t_bound >= t_ready + 2 * MINUTE
    assert len(result.state.nodes) == 1  # the DRA-aware autoscaler waited for the drivers


def test_publish_delay_ranges_are_drawn_per_node_by_the_cloud_and_recorded() -> None:
    result = run(doc([{"name": GPU_DRIVER, "publishDelay": {"min": "1m", "max": "3m"}}],
                     workload=[arrival(0, gpu_pod(f"p{i}")) for i in range(3)]
                     + [arrival(0, gpu_pod(f"q{i}")) for i in range(3)]))
    for node in result.state.nodes.values():
        delay = node.publish_delay_ms[GPU_DRIVER]
        assert MINUTE <= delay <= 3 * MINUTE and set(node.publish_delay_ms) == {GPU_DRIVER}
        [t] = [t for t, _, e in events_of(result, ResourceSlicePublished)
               if e.manifest["spec"]["nodeName"] == node.name and e.manifest["spec"]["driver"] == GPU_DRIVER]
        assert t == node.ready_t + delay


def test_default_publishes_at_ready_and_starting_nodes_publish_in_the_setup() -> None:
    result = run(doc(nodes=1, workload=[arrival(0, gpu_pod(f"p{i}")) for i in range(5)]))
    made = [(t, s, e.manifest["metadata"]["name"]) for t, s, e in events_of(result, ResourceSlicePublished)]
    ready = {e.name: t for t, _, e in events_of(result, NodeReady)}
    assert [m for m in made if m[1] == "scenario"] == [(0, "scenario", f"h100-0-{GPU_DRIVER}-0"),
                                                       (0, "scenario", f"h100-0-{NIC_DRIVER}-0")]
    assert {(t, name) for t, s, name in made if s == "drivers"} == {
        (ready["h100-1"], f"h100-1-{GPU_DRIVER}-0"), (ready["h100-1"], f"h100-1-{NIC_DRIVER}-0")}


# ---------------------------------------------------------------- restart and unhealthy devices


def test_a_driver_restart_republishes_its_pool_with_the_next_generation() -> None:
    result = run(doc([{"name": GPU_DRIVER, "restartAfter": "5m"}], nodes=1,
                     workload=[arrival(0, gpu_pod("before")), arrival("6m", gpu_pod("after"))]))
    republished = [(t, e.manifest) for t, s, e in events_of(result, ResourceSlicePublished) if s == "drivers"]
    assert [(t, m["metadata"]["name"], m["spec"]["pool"]["generation"]) for t, m in republished] == [
        (5 * MINUTE, f"h100-0-{GPU_DRIVER}-0", 2)]
    assert result.state.dra.slices[f"h100-0-{GPU_DRIVER}-0"].generation == 2
    assert result.state.dra.slices[f"h100-0-{NIC_DRIVER}-0"].generation == 1  # the other driver did not restart
    assert allocated_device(result.state, "before") == "gpu-0"  # allocated before: kept
    assert allocated_device(result.state, "after") == "gpu-1"  # from the new generation, gpu-0 still taken
    assert result.state.pods_by_phase["Pending"] == {}


def test_an_unhealthy_device_is_tainted_and_not_allocated() -> None:
    result = run(doc([{"name": GPU_DRIVER, "unhealthy": [{"device": "gpu-0", "after": "1m"}]}], nodes=1,
                     workload=[arrival("2m", gpu_pod("late"))]))
    [(t, _, e)] = [x for x in events_of(result, ResourceSlicePublished) if x[1] == "drivers"]
    assert t == MINUTE and e.manifest["spec"]["pool"]["generation"] == 1
    devices = {d["name"]: d.get("taints") for d in e.manifest["spec"]["devices"]}
    assert devices == {"gpu-0": [unhealthy_taint(GPU_DRIVER)], "gpu-1": None, "gpu-2": None, "gpu-3": None}
    assert allocated_device(result.state, "late") == "gpu-1"


def test_mark_unhealthy_republishes_one_slice_and_the_driver_keeps_it() -> None:
    sc = parse_scenario(doc(nodes=1, workload=[]))
    lg = Log()
    lg.extend(scenario_inputs(sc, 1))
    [event] = mark_unhealthy(lg.state, "h100-0", GPU_DRIVER, "gpu-2")
    assert isinstance(event, ResourceSlicePublished)
    lg.append(event)
    assert mark_unhealthy(lg.state, "h100-0", GPU_DRIVER, "gpu-2") == []  # already
    assert Drivers().react(lg.state, MINUTE, decision_rng(0, "drivers", lg.offset, MINUTE)).events == ()


def test_republishing_keeps_partitionable_devices_and_consumable_capacity() -> None:
    templates = check_slice_templates([
        {"spec": {"driver": GPU_DRIVER, "sharedCounters": [
            {"name": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}]}},
        {"spec": {"driver": GPU_DRIVER, "devices": [
            {"name": "gpu-0", "consumesCounters": [{"counterSet": "gpu-0-counters",
                                                    "counters": {"memory": {"value": "40Gi"}}}]},
            {"name": "gpu-0-half", "consumesCounters": [{"counterSet": "gpu-0-counters",
                                                         "counters": {"memory": {"value": "20Gi"}}}]},
            {"name": "shared", "allowMultipleAllocations": True,
             "capacity": {"bw": {"value": "100G", "requestPolicy": {"default": "10G"}}}}]}},
    ], "spec.nodeGroups[0].resourceSlices", "g")
    first = driver_slices(templates, "g-0", GPU_DRIVER)
    again = driver_slices(templates, "g-0", GPU_DRIVER, generation_bump=1, unhealthy=frozenset({"gpu-0-half"}))
    assert [m["spec"]["pool"] for m in again] == [{"name": "g-0", "generation": 2, "resourceSliceCount": 2}] * 2
    for before, after in zip(first, again, strict=True):
        before, after = copy.deepcopy(before), copy.deepcopy(after)
        del before["spec"]["pool"], after["spec"]["pool"]
        for d in after["spec"].get("devices") or []:
            if d["name"] == "gpu-0-half":
                assert d.pop("taints") == [unhealthy_taint(GPU_DRIVER)]
        assert before == after
    log = Log()  # the republished slices load as the allocator's pool
    for m in again:
        log.append(ResourceSlicePublished(manifest=m))
    assert log.state.anomalies == [] and len(log.state.dra.slices) == 2
    from dralab.core.dra.model import Node as DraNode
    from dralab.core.dra.pools import gather_pools

    [pool] = gather_pools(log.state.dra.slice_index(), DraNode(name="g-0"))
    assert not pool.invalid and pool.generation == 2


# ---------------------------------------------------------------- node failure, taints, deletion


def started(nodes: int = 2, workload: list[dict[str, Any]] | None = None) -> Log:
    """A log with the scenario's inputs and the claim controller and scheduler run once at t=0."""
    sc = parse_scenario(doc(nodes=nodes, workload=workload if workload is not None else [arrival(0, gpu_pod("a"))]))
    lg = Log()
    lg.extend(scenario_inputs(sc, 1))
    for reactor in (ClaimController(), Scheduler()):
        events = reactor.react(lg.state, 0, decision_rng(1, reactor.name, lg.offset, 0)).events
        if events:
            lg.append(*events, t=0, source=reactor.name)
    return lg


def test_node_not_ready_keeps_its_pods_and_takes_no_new_ones() -> None:
    lg = started(nodes=1)
    assert lg.state.pods["pod/default/a"].node == "h100-0"
    lg.append(*node_not_ready("h100-0"), t=1_000)
    assert not lg.state.nodes["h100-0"].ready and lg.state.nodes["h100-0"].ready_t == 0
    assert lg.state.pods["pod/default/a"].phase == "Running"
    lg.pod({"apiVersion": "v1", "kind": "Pod", **gpu_pod("b")}, t=2_000)
    lg.append(*ClaimController().react(lg.state, 2_000, decision_rng(1, "claims", lg.offset, 2_000)).events)
    events = Scheduler().react(lg.state, 2_000, decision_rng(1, "scheduler", lg.offset, 2_000)).events
    assert not any(isinstance(e, PodBound) for e in events)
    room = lg.state.room_offset
    lg.append(NodeReady(name="h100-0"), t=3_000)  # back: room for the pending pod, first Ready time kept
    assert lg.state.room_offset > room and lg.state.nodes["h100-0"].ready_t == 0
    from dralab.core.checks.invariants import check

    assert check(lg.state) == []


def test_taints_change_on_the_node_and_a_removal_is_room() -> None:
    lg = started(nodes=1, workload=[])
    taint = {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}
    [event] = set_taints(lg.state, "h100-0", [taint])
    assert event == NodeTaintsChanged(name="h100-0", taints=(taint,))
    lg.append(event)
    assert lg.state.nodes["h100-0"].taints == [taint]
    assert set_taints(lg.state, "h100-0", [taint]) == []
    room = lg.state.room_offset
    lg.append(*set_taints(lg.state, "h100-0", []))
    assert lg.state.nodes["h100-0"].taints == [] and lg.state.room_offset > room
    assert "taints" not in lg.state.nodes["h100-0"].manifest["spec"]


def test_deleting_a_node_fails_its_pods_and_the_claim_controller_frees_their_devices() -> None:
    lg = started(nodes=2)
    node = lg.state.pods["pod/default/a"].node
    assert node is not None
    events = delete_node(lg.state, node, "scale-down")
    assert events == [PodFinished(pod="pod/default/a", phase="Failed"), NodeDeleted(name=node, reason="scale-down")]
    lg.append(*events, t=5_000)
    state = lg.state
    assert state.anomalies == [] and node not in state.nodes and node not in state.nodes_by_group["h100"]
    assert state.pods["pod/default/a"].phase == "Failed" and state.pods["pod/default/a"].finished_t == 5_000
    group = state.node_groups["h100"]
    assert (group.deleted, group.target_size, group.outstanding) == (1, 1, 0)
    assert not any(s.pool == node for s in state.dra.slices.values())  # its slices went with it
    released = ClaimController().react(state, 5_000, decision_rng(1, "claims", lg.offset, 5_000)).events
    assert len(released) == 1 and isinstance(released[0], ClaimReleased) and released[0].deallocate
    lg.append(*released)
    assert not state.dra.allocated.devices
    assert delete_node(state, node) == []  # already gone


def test_a_deletion_without_failing_the_pods_first_is_an_anomaly_but_applied() -> None:
    lg = started(nodes=1)
    lg.append(NodeDeleted(name="h100-0"))
    assert lg.state.pods["pod/default/a"].phase == "Failed"
    assert lg.state.anomalies and "deleted with pods still on it" in lg.state.anomalies[0]


# ---------------------------------------------------------------- the scenario's fields


@pytest.mark.parametrize(("drivers", "path", "message"), [
    ([{"name": "other.example.com"}], "drivers[0].name",
     "no `resourceSlices` of driver `other.example.com` in this node group (drivers: `gpu.example.com`, "
     "`nic.example.com`)"),
    ([{"name": GPU_DRIVER}, {"name": GPU_DRIVER}], "drivers[1].name", f"duplicate driver `{GPU_DRIVER}`"),
    ([{"name": GPU_DRIVER, "unhealthy": [{"device": "nic-0", "after": "1m"}]}], "drivers[0].unhealthy[0].device",
     "no device `nic-0` in this driver's resourceSlices"),
    ([{"name": GPU_DRIVER, "restartAfter": "0s"}], "drivers[0].restartAfter", "must be longer than 0s"),
    ([{"name": GPU_DRIVER, "publishDelay": {"min": "2m", "max": "1m"}}], "drivers[0].publishDelay.max",
     "must be >= min (2m0s), got 1m0s"),
    ([{"name": GPU_DRIVER, "delay": "1m"}], "drivers[0].delay", None),
])
def test_bad_driver_fields_are_refused_with_their_path(drivers: list[dict[str, Any]], path: str,
                                                       message: str | None) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(drivers), "s.yaml")
    assert info.value.path == f"spec.nodeGroups[0].{path}"
    if message is not None:
        assert info.value.message == message


def test_driver_fields_are_parsed() -> None:
    [spec] = parse_scenario(doc([{"name": GPU_DRIVER, "publishDelay": "30s", "restartAfter": "1h",
                                  "unhealthy": [{"device": "gpu-3", "after": "10m"}]}])).node_groups[0].drivers
    assert (spec.name, spec.publish_delay_ms, spec.restart_after_ms) == (GPU_DRIVER, (30_000, 30_000), 3_600_000)
    assert [(u.device, u.after_ms) for u in spec.unhealthy] == [("gpu-3", 600_000)]


# ---------------------------------------------------------------- sharded drivers (live runs)


def test_driver_shards_split_the_nodes_and_together_publish_what_one_reactor_does() -> None:
    from dralab.core.controllers.drivers import shard_of
    from dralab.core.run.config import build_reactors, run_config

    d = doc([{"name": GPU_DRIVER, "restartAfter": "5m"}], nodes=9, workload=[])
    d["spec"]["nodeGroups"][0]["max"] = 9
    sc = parse_scenario(d)
    assert run_config(sc) == run_config(sc, drivers_shards=1)  # one shard: the config as before
    config = run_config(sc, drivers_shards=3)
    shards = [r for r in build_reactors(config) if r.name.startswith("drivers")]
    assert [r.name for r in shards] == ["drivers-0", "drivers-1", "drivers-2"]
    lg = Log()
    lg.extend(scenario_inputs(sc, 1))
    now = 10 * MINUTE  # every node's GPU driver restarted: every node republishes its pool
    whole = Drivers().react(lg.state, now, decision_rng(1, "drivers", lg.offset, now)).events
    parts = [r.react(lg.state, now, decision_rng(1, r.name, lg.offset, now)).events for r in shards]
    names = [[e.manifest["spec"]["nodeName"] for e in part] for part in parts]  # type: ignore[union-attr]
    def key(e: Any) -> str:
        return str(e.manifest["metadata"]["name"])

    assert len(whole) == 9 and sorted((e for part in parts for e in part), key=key) == sorted(whole, key=key)
    assert all(shard_of(n, 3) == i for i, part in enumerate(names) for n in part)
    assert all(names)  # nine nodes spread over the three shards
    with pytest.raises(ValueError, match="shard 3 of 3"):
        Drivers(shard=3, shards=3)
