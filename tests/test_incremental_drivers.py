"""The incremental drivers reactor and the slice index kept by the fold (issue 24) against full recomputes.

- At every decision of real runs (random workloads with scale-up and scale-down, driver publish delays,
  restarts, unhealthy devices, device faults, node failures; and the scenario files with driver faults),
  the drivers reactor, which looks only at the nodes whose inputs changed (core/controllers/drivers_cache.py),
  decides exactly what a fresh reactor deciding from scratch decides; and the fold's slice index, kept by
  every change (SliceIndex.put/drop), equals one built from the slices.
- The kept index equals a built one after random sequences of publications, republications under another
  node or pool, and removals.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
from builders import arrival, group, node_template, scenario_doc

from dralab.core.controllers.drivers import Drivers
from dralab.core.dra.model import NodeSelection, Slice
from dralab.core.dra.pools import SliceIndex
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import load_scenario, parse_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.sim import Simulator

ROOT = Path(__file__).resolve().parents[1]
GPU, NIC = "gpu.example.com", "nic.example.com"


def same_index(kept: SliceIndex, built: SliceIndex) -> None:
    """The same slices (the same objects) in the same places and order; positions may differ by the gaps
    removals leave, never in their order."""
    def order(index: SliceIndex) -> list[str]:
        return sorted(index.positions, key=lambda name: index.positions[name][0])

    def ids(entries: list[Any]) -> list[int]:
        return [id(e[1] if isinstance(e, tuple) else e) for e in entries]

    assert order(kept) == order(built)
    assert {n: ids(v) for n, v in kept.by_node.items()} == {n: ids(v) for n, v in built.by_node.items()}
    assert ids(kept.shared) == ids(built.shared)
    assert {k: ids(v) for k, v in kept.by_pool.items()} == {k: ids(v) for k, v in built.by_pool.items()}
    assert kept.named == built.named
    for entries in [*kept.by_node.values(), kept.shared]:
        assert [pos for pos, _ in entries] == sorted(pos for pos, _ in entries)


class Checked:
    """Drivers.react, checked at every call against a fresh reactor and the slice index against a build."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.decisions = self.published = self.indexes = 0
        original = Drivers.react

        def react(reactor: Drivers, view: ClusterState, now: int, rng: random.Random) -> Any:
            got = original(reactor, view, now, rng)
            fresh = Drivers(reactor.name, reactor.trigger, reactor.shard, reactor.shards)
            want = original(fresh, view, now, random.Random(0))
            assert got == want, f"t={now}: incremental {got} != full {want}"
            self.decisions += 1
            self.published += len(got.events)
            if view.dra._index is not None:
                same_index(view.dra._index, SliceIndex.build(list(view.dra.slices.values())))
                self.indexes += 1
            return got

        monkeypatch.setattr(Drivers, "react", react)


def gpu_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]}}


OBJECTS = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
     "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}},
]


def random_doc(seed: int) -> dict[str, Any]:
    """Two groups of GPU nodes (two drivers each), drivers that publish late, restart and report devices
    unhealthy, pods arriving at random with run times (scale-up, then scale-down of empty nodes), and
    device and node faults on the starting nodes."""
    rnd = random.Random(seed)
    groups = []
    for name in ("a", "b"):
        g = group(name, max=8, delay=(f"{rnd.randint(10, 40)}s", f"{rnd.randint(50, 120)}s"),
                  template=node_template(gpu=0))
        g["resourceSlices"] = [
            {"spec": {"driver": GPU, "devices": [{"name": f"gpu-{i}"} for i in range(rnd.randint(2, 4))]}},
            {"spec": {"driver": NIC, "devices": [{"name": "nic-0"}]}},
        ]
        g["drivers"] = [
            {"name": GPU, "publishDelay": {"min": "0s", "max": f"{rnd.randint(1, 60)}s"},
             "restartAfter": f"{rnd.randint(2, 9)}m",
             "unhealthy": [{"device": "gpu-1", "after": f"{rnd.randint(1, 8)}m"}]},
            {"name": NIC, "publishDelay": f"{rnd.randint(0, 20)}s"},
        ]
        groups.append(g)
    workload = [arrival(f"{rnd.randint(0, 1500)}s", gpu_pod(f"p{i}"), count=rnd.randint(1, 4),
                        run_for=f"{rnd.randint(60, 600)}s") for i in range(12)]
    # a group without devices, and pods of cpu only on it: there utilization is the cpu's
    groups.append(group("c", max=4, delay="30s", template=node_template(gpu=0, cpu="8", labels={"pool": "cpu"})))
    cpu_spec = {"nodeSelector": {"pool": "cpu"}, "containers": [{"name": "main", "image": "x"}]}
    for i in range(6):
        spec = copy.deepcopy(cpu_spec)
        spec["containers"][0]["resources"] = {"requests": {"cpu": f"{rnd.randint(1, 6)}"}}
        workload.append(arrival(f"{rnd.randint(0, 1500)}s", {"metadata": {"name": f"cpu{i}"}, "spec": spec},
                                count=rnd.randint(1, 3), run_for=f"{rnd.randint(60, 600)}s"))
    d = scenario_doc(groups, nodes={"a": 2, "b": 1, "c": 1}, duration="40m", workload=workload)
    d["spec"]["objects"] = copy.deepcopy(OBJECTS)
    d["spec"]["policy"] = {"autoscaler": "dra"}
    d["spec"]["faults"] = [
        {"at": f"{rnd.randint(30, 300)}s", "kind": "driver-crash", "node": "a-0", "driver": GPU, "for": "3m"},
        {"at": f"{rnd.randint(30, 600)}s", "kind": "device-unhealthy", "node": "a-1", "driver": GPU,
         "device": "gpu-0", "for": "4m"},
        {"at": f"{rnd.randint(30, 600)}s", "kind": "driver-slow", "node": "b-0", "driver": NIC, "delay": "45s",
         "for": "10m"},
        {"at": f"{rnd.randint(600, 1200)}s", "kind": "node-fail", "node": "b-0"},
    ]
    return d


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_drivers_decide_as_a_full_pass_on_random_workloads(seed: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    checked = Checked(monkeypatch)
    result = Simulator(parse_scenario(random_doc(seed), "random.yaml"), seed).run()
    assert checked.decisions > 50 and checked.published > 10 and checked.indexes > 10
    deleted = sum(1 for g in result.state.node_groups.values() for _ in range(g.deleted))
    assert deleted > 0, "the workload must scale down too (node deletion removes slices from the kept index)"


@pytest.mark.parametrize("path", ["scenarios/chaos/driver-crash.yaml", "scenarios/chaos/driver-republish.yaml",
                                  "scenarios/examples/every-field.yaml"])
def test_incremental_drivers_decide_as_a_full_pass_on_the_scenario_files(path: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    checked = Checked(monkeypatch)
    sc = load_scenario(ROOT / path)
    Simulator(sc, 1).run()
    assert checked.decisions > 5 and checked.published > 0


def test_sharded_drivers_stay_incremental_and_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = Checked(monkeypatch)
    sc = parse_scenario(random_doc(4), "sharded.yaml")
    Simulator(sc, 4, inputs=scenario_inputs(sc, 4, drivers_shards=3)).run()
    assert checked.decisions > 50 and checked.published > 10


def slice_of(name: str, node: str | None, pool: str, driver: str, generation: int, counters: bool) -> Slice:
    return Slice(name=name, driver=driver, pool=pool, generation=generation, resource_slice_count=1,
                 node_selection=NodeSelection(node_name=node) if node else NodeSelection(all_nodes=True),
                 per_device_node_selection=False, devices=(),
                 shared_counters={"c": {}} if counters else {}, manifest={})


@pytest.mark.parametrize("seed", range(5))
def test_the_kept_slice_index_equals_a_built_one_after_every_change(seed: int) -> None:
    rnd = random.Random(seed)
    slices: dict[str, Slice] = {}
    kept = SliceIndex.build([])
    for _ in range(400):
        name = f"s{rnd.randint(0, 30)}"
        if rnd.random() < 0.3:
            slices.pop(name, None)
            kept = kept.drop(name)
        else:
            node = rnd.choice([None, "n0", "n1", "n2", "n3"])
            slc = slice_of(name, node, rnd.choice(["p0", "p1", node or "p2"]), rnd.choice([GPU, NIC]),
                           rnd.randint(1, 3), rnd.random() < 0.2)
            slices[name] = slc
            kept = kept.put(slc)
        same_index(kept, SliceIndex.build(list(slices.values())))


def test_a_slice_written_by_someone_else_is_seen_through_the_journal() -> None:
    """The fold's journal of slice changes brings back a node the reactor had settled: another writer's
    slice under the driver's name (another generation) is replaced at the next decision, as a full pass
    replaces it; the nodes nothing happened to are not looked at."""
    from builders import Log

    from dralab.core.engine.contract import decision_rng
    from dralab.core.log.events import ResourceSlicePublished

    d = random_doc(5)
    d["spec"]["faults"] = []
    sc = parse_scenario(d, "journal.yaml")
    lg = Log()
    lg.extend(scenario_inputs(sc, 5))
    reactor = Drivers()
    now = 60 * 60_000  # every driver has published, restarted and tainted its device long ago
    settled = reactor.react(lg.state, now, decision_rng(5, "drivers", lg.offset, now))
    lg.append(*settled.events, t=now)
    assert reactor.react(lg.state, now, decision_rng(5, "drivers", lg.offset, now)).events == ()
    assert reactor._cache.dirty(lg.state, now, set()) == []  # nothing changed: no node to look at
    mine = lg.state.dra.slices[f"a-1-{NIC}-0"].manifest
    foreign = {**mine, "spec": {**mine["spec"], "pool": {**mine["spec"]["pool"], "generation": 9}}}
    lg.append(ResourceSlicePublished(manifest=foreign), t=now)
    got = reactor.react(lg.state, now, decision_rng(5, "drivers", lg.offset, now))
    want = Drivers().react(lg.state, now, decision_rng(5, "drivers", lg.offset, now))
    assert got == want and [e.manifest["metadata"]["name"] for e in got.events] == [f"a-1-{NIC}-0"]


@pytest.mark.parametrize("release", [None, "1.35", "1.37"])
def test_kept_utilizations_equal_fresh_ones_at_every_loop(release: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scale-down's utilization cache (core/autoscaler/disruption/utilization_cache.py) gives, at every call of
    every loop, what scale_down.utilization computes from scratch; and scale-down does take nodes away."""
    from dralab.core.autoscaler.disruption import scale_down

    calls = [0, 0]
    original = scale_down.ScaleDown._utilization

    def checked(sd: Any, view: ClusterState, node: Any, release_: bool) -> float:
        got = original(sd, view, node, release_)
        want = scale_down.utilization(view, node, release_, sd.ignore_daemonsets_utilization,
                                      sd.ignore_mirror_pods_utilization)
        assert got == want, f"{node.name}: kept {got} != fresh {want}"
        calls[0] += 1
        calls[1] += got > 0
        return got

    monkeypatch.setattr(scale_down.ScaleDown, "_utilization", checked)
    for seed in (1, 2):
        d = random_doc(seed)
        if release:
            d["spec"]["kubernetes"] = {"version": release, "featureGates": {"DRADeviceTaints": True}}
        result = Simulator(parse_scenario(d, "utilization.yaml"), seed).run()
        assert sum(g.deleted for g in result.state.node_groups.values()) > 0
    assert calls[0] > 200 and calls[1] > 10  # many loops, and busy nodes among them


def test_an_allocation_alone_changes_a_kept_utilization() -> None:
    """A device allocated or freed with no pod bound or finished in the same record (a shared claim, the claim
    controller's later release): only the journal of allocations names the node, and the kept value follows."""
    from builders import Log

    from dralab.core.autoscaler.disruption.scale_down import ScaleDown, utilization
    from dralab.core.engine.contract import decision_rng
    from dralab.core.log.events import ClaimAllocated, ClaimReleased, ResourceClaimCreated

    d = random_doc(6)
    d["spec"]["faults"] = []
    sc = parse_scenario(d, "alloc.yaml")
    lg = Log()
    lg.extend(scenario_inputs(sc, 6))
    lg.append(*Drivers().react(lg.state, 0, decision_rng(6, "drivers", lg.offset, 0)).events, t=0)
    node = lg.state.nodes["a-0"]
    sd = ScaleDown()
    assert sd._utilization(lg.state, node, True) == 0.0
    lg.append(ResourceClaimCreated(manifest={
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}), t=1)
    result = {"request": "gpu", "driver": GPU, "pool": "a-0", "device": "gpu-0"}
    lg.append(ClaimAllocated(claim="claim/default/shared", pod="pod/default/x",
                             allocation={"devices": {"results": [result]}}), t=2)
    busy = sd._utilization(lg.state, node, True)
    assert busy > 0 and busy == utilization(lg.state, node, True)
    lg.append(ClaimReleased(claim="claim/default/shared", pod="pod/default/x", deallocate=True), t=3)
    assert sd._utilization(lg.state, node, True) == 0.0
