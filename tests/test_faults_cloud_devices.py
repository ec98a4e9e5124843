"""The cloud and device faults of `spec.faults`: `cloud-stockout`, `quota-cut`, `partial-fulfilment` acted
on by the cloud, `driver-crash`, `driver-slow`, `device-unhealthy` acted on by the drivers; each one's
effect while it is in force and its end, through the simulator (every invariant checked, the log
verified) and by calling the cloud on folded states; and the two chaos scenarios' stories."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import (
    GPU_TOLERATION,
    Log,
    arrival,
    group,
    key,
    node_template,
    pod,
    scenario_doc,
    simulated,
    sourced_events,
)

from dralab.core.checks.log_check import check_records
from dralab.core.controllers.cloud import Cloud
from dralab.core.engine.contract import decision_rng
from dralab.core.log.events import (
    FaultApplied,
    FaultInjected,
    NodeProvisioning,
    PodBound,
    ResourceSlicePublished,
    ScaleUpFailed,
    ScaleUpRequested,
)
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.logfile import LogFile

ROOT = Path(__file__).resolve().parents[1]
MINUTE = 60_000
GPU_DRIVER, NIC_DRIVER = "gpu.example.com", "nic.example.com"


# ---------------------------------------------------------------- the cloud faults


def cloud_doc(faults: list[dict[str, Any]], count: int = 1) -> dict[str, Any]:
    """One 8-GPU group (1m to come up), `count` 8-GPU pods at t=0: each needs a node of its own."""
    g = group("gpu", max=10, delay="1m", template=node_template(gpu=8))
    d = scenario_doc([g], duration="30m",
                     workload=[arrival(0, pod("train", gpu=8, tolerations=[GPU_TOLERATION]), count=count)])
    d["spec"]["faults"] = faults
    return d


def answers(result: Any) -> tuple[list[Any], list[Any], list[Any]]:
    asked = [(t, e.delta) for t, _, e in sourced_events(result.entries, ScaleUpRequested)]
    failed = [(t, e.delta, e.reason) for t, _, e in sourced_events(result.entries, ScaleUpFailed)]
    made = [(t, e.name) for t, _, e in sourced_events(result.entries, NodeProvisioning)]
    return asked, failed, made


def test_a_cloud_stockout_fails_requests_out_of_stock_until_it_ends() -> None:
    result = simulated(cloud_doc([{"at": "0s", "kind": "cloud-stockout", "group": "gpu", "for": "3m"}]), seed=1)
    asked, failed, made = answers(result)
    # asked at the first scan once the GPU pod is 30 s old (the release's GPU pod-age buffer), in the stockout
    assert failed == [(30_000, 1, "out-of-stock")]
    # the group backs off 5 min; the retry, after the stockout ended (3m), is delivered
    assert asked == [(30_000, 1), (330_000, 1)] and made == [(330_000, "gpu-0")]
    calm = simulated(cloud_doc([]), seed=1)
    assert answers(calm)[1] == [] and answers(calm)[2] == [(30_000, "gpu-0")]


def test_a_quota_cut_fails_the_nodes_beyond_it_with_reason_quota() -> None:
    result = simulated(cloud_doc([{"at": "0s", "kind": "quota-cut", "group": "gpu", "quota": 1, "for": "3m"}],
                                 count=3), seed=1)
    asked, failed, made = answers(result)
    assert asked[0] == (30_000, 3) and failed == [(30_000, 2, "quota")] and made[0] == (30_000, "gpu-0")
    assert made[1:] == [(330_000, "gpu-1"), (330_000, "gpu-2")]  # the quota is the group's again (none)
    assert len(result.state.pods_by_phase["Running"]) == 3


def test_partial_fulfilment_delivers_the_floor_of_the_fraction_and_fails_the_rest_out_of_stock() -> None:
    result = simulated(cloud_doc([{"at": "0s", "kind": "partial-fulfilment", "group": "gpu", "fraction": 0.5,
                                   "for": "3m"}], count=3), seed=1)
    asked, failed, made = answers(result)
    assert asked[0] == (30_000, 3) and failed == [(30_000, 2, "out-of-stock")]  # floor(3 * 0.5) = 1 made
    assert made == [(30_000, "gpu-0"), (330_000, "gpu-1"), (330_000, "gpu-2")]  # after it: in full


def fault_log(kind: str, **params: Any) -> Log:
    """A group `gpu` and a fault on it in force from t=0 until 2m."""
    lg = Log()
    lg.group("gpu", max=20, delay=(1_000, 1_000))
    lg.append(FaultInjected(fault="fault/0", kind=kind, target="gpu", until_ms=2 * MINUTE, params=params), t=0)
    return lg


def cloud(view: ClusterState, now: int) -> tuple[Any, ...]:
    return Cloud().react(view, now, decision_rng(0, "cloud", view.offset, now)).events


@pytest.mark.parametrize(("kind", "params"), [("cloud-stockout", {}), ("quota-cut", {"quota": 3}),
                                              ("partial-fulfilment", {"fraction": 0.9})])
def test_an_atomic_request_under_a_cloud_fault_fails_whole_and_is_whole_after_it(kind: str,
                                                                                  params: dict[str, Any]) -> None:
    lg = fault_log(kind, **params)
    lg.append(ScaleUpRequested(group="gpu", delta=4, atomic=True), t=MINUTE)
    reason = "quota" if kind == "quota-cut" else "out-of-stock"
    assert cloud(lg.state, MINUTE) == (ScaleUpFailed(group="gpu", delta=4, reason=reason),)
    assert [type(e) for e in cloud(lg.state, 2 * MINUTE)] == [NodeProvisioning] * 4  # it has ended at 2m


def test_a_quota_cut_never_raises_the_group_quota_and_fraction_one_delivers_all() -> None:
    import msgspec

    lg = fault_log("quota-cut", quota=5)
    lg2 = Log()
    lg2.append(msgspec.structs.replace(lg.records[0].events[0], quota=2), t=0)  # type: ignore[type-var]
    lg2.append(lg.records[1].events[0], t=0)
    lg2.append(ScaleUpRequested(group="gpu", delta=4), t=MINUTE)
    events = cloud(lg2.state, MINUTE)
    assert [type(e) for e in events] == [ScaleUpFailed, NodeProvisioning, NodeProvisioning]
    assert events[0] == ScaleUpFailed(group="gpu", delta=2, reason="quota")
    whole = fault_log("partial-fulfilment", fraction=1.0)
    whole.append(ScaleUpRequested(group="gpu", delta=3), t=MINUTE)
    assert [type(e) for e in cloud(whole.state, MINUTE)] == [NodeProvisioning] * 3


# ---------------------------------------------------------------- the device faults

SLICES = [
    {"spec": {"driver": GPU_DRIVER, "devices": [{"name": f"gpu-{i}"} for i in range(4)]}},
    {"spec": {"driver": NIC_DRIVER, "devices": [{"name": "nic-0"}]}},
]
OBJECTS = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU_DRIVER}"'}}]}},
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
     "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}},
]


def gpu_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]}}


def device_doc(faults: list[dict[str, Any]], *, nodes: int = 1, workload: list[dict[str, Any]] | None = None,
               **options: Any) -> dict[str, Any]:
    """One DRA group `h100` (a 4-GPU driver and a NIC driver), `nodes` starting nodes, the DRA autoscaler."""
    g = group("h100", max=1 if nodes else 2, delay=options.pop("delay", "1m"), template=node_template(gpu=0))
    g["resourceSlices"] = copy.deepcopy(SLICES)
    g.update(options)
    d = scenario_doc([g], nodes={"h100": nodes} if nodes else None, duration="20m",
                     workload=workload if workload is not None else [])
    d["spec"].update(objects=copy.deepcopy(OBJECTS), policy={"autoscaler": "dra"}, faults=faults)
    return d


def published(result: Any, driver: str = GPU_DRIVER) -> list[tuple[int, str, int, tuple[str, ...]]]:
    """(time, source, pool generation, tainted devices) of each publication of `driver`'s slices."""
    out = []
    for t, source, e in sourced_events(result.entries, ResourceSlicePublished):
        spec = e.manifest["spec"]
        if spec["driver"] == driver:
            tainted = tuple(d["name"] for d in spec["devices"] if d.get("taints"))
            out.append((t, source, spec["pool"]["generation"], tainted))
    return out


def allocated(state: ClusterState, pod_name: str) -> str:
    [claim] = state.dra.pod_claims[f"pod/default/{pod_name}"].values()
    allocation = state.dra.claims[claim].allocation
    assert allocation is not None
    return str(allocation["devices"]["results"][0]["device"])


def test_a_driver_crash_publishes_nothing_new_then_restarts_with_the_next_generation() -> None:
    """The restart due at 2m (restartAfter) falls in the crash (1m to 4m): nothing is published until the
    driver is back at 4m, with generation 1 + 1 (restartAfter) + 1 (the crash). The slices stay published
    meanwhile (shorter than the kubelet's 30 s wiping grace is what dralab models), the NIC driver is
    untouched."""
    d = device_doc([{"at": "1m", "kind": "driver-crash", "node": "h100-0", "driver": GPU_DRIVER, "for": "3m"}],
                   drivers=[{"name": GPU_DRIVER, "restartAfter": "2m"}])
    result = simulated(d, seed=1)
    assert published(result) == [(0, "scenario", 1, ()), (4 * MINUTE, "drivers", 3, ())]
    assert published(result, NIC_DRIVER) == [(0, "scenario", 1, ())]
    without = simulated(device_doc([], drivers=[{"name": GPU_DRIVER, "restartAfter": "2m"}]), seed=1)
    assert published(without) == [(0, "scenario", 1, ()), (2 * MINUTE, "drivers", 2, ())]


def test_a_driver_crash_over_a_new_nodes_first_publication_holds_its_devices_back() -> None:
    """The node registers NotReady at 70 s, turns Ready at 130 s; its GPU driver is down from 80 s to 5m:
    the NIC slice comes at Ready, the GPU slice at 5m (generation 2: a restart), and the pod waits."""
    faults = [{"at": "80s", "kind": "driver-crash", "node": "h100-0", "driver": GPU_DRIVER, "for": "220s"}]
    d = device_doc(faults, nodes=0, delay="2m", notReadyFor="1m", workload=[arrival(0, gpu_pod("train"))])
    result = simulated(d, seed=1)
    assert published(result, NIC_DRIVER) == [(130_000, "drivers", 1, ())]
    assert published(result) == [(5 * MINUTE, "drivers", 2, ())]
    [(t_bound, _, bound)] = sourced_events(result.entries, PodBound)
    assert bound.node == "h100-0" and t_bound >= 5 * MINUTE
    assert len(result.state.nodes) == 1  # the DRA-aware autoscaler did not add a node meanwhile


def test_a_crash_that_never_ends_publishes_nothing_more_and_a_fault_on_a_later_node_is_ignored() -> None:
    faults = [{"at": "1m", "kind": "driver-crash", "node": "h100-0", "driver": GPU_DRIVER},
              {"at": "1m", "kind": "device-unhealthy", "node": "h100-0", "driver": GPU_DRIVER, "device": "gpu-0"}]
    result = simulated(device_doc(faults, drivers=[{"name": GPU_DRIVER, "restartAfter": "2m"}]), seed=1)
    assert published(result) == [(0, "scenario", 1, ())]
    later = simulated(device_doc([{"at": "0s", "kind": "driver-crash", "node": "h100-0", "driver": GPU_DRIVER,
                                   "for": "10m"}], nodes=0, workload=[arrival(0, gpu_pod("train"))]), seed=1)
    notes = [e.note for _, _, e in sourced_events(later.entries, FaultApplied)]
    assert notes[0] == "node h100-0 does not exist"
    assert [p[2] for p in published(later)] == [1]  # the node came at 70 s: its driver was never down


def test_a_slow_driver_publishes_late_only_what_is_due_while_it_is_slow() -> None:
    """The node registers at 70 s and is Ready at 130 s; the GPU driver is slow (90 s) from 75 s to 3m:
    its first publication, due at 130 s, comes at 220 s; its restart, due at 220 s + 5m (no longer
    slow), is on time. The NIC driver is not slowed."""
    faults = [{"at": "75s", "kind": "driver-slow", "node": "h100-0", "driver": GPU_DRIVER, "delay": "90s",
               "for": "105s"}]
    d = device_doc(faults, nodes=0, delay="2m", notReadyFor="1m", workload=[arrival(0, gpu_pod("train"))],
                   drivers=[{"name": GPU_DRIVER, "restartAfter": "5m"}])
    result = simulated(d, seed=1)
    assert published(result, NIC_DRIVER) == [(130_000, "drivers", 1, ())]
    assert published(result) == [(220_000, "drivers", 1, ()), (520_000, "drivers", 2, ())]


def test_device_unhealthy_taints_the_device_while_in_force_and_untaints_it_at_the_end() -> None:
    faults = [{"at": "2m", "kind": "device-unhealthy", "node": "h100-0", "driver": GPU_DRIVER, "device": "gpu-0",
               "for": "3m"}]
    workload = [arrival("3m", gpu_pod("during")), arrival("6m", gpu_pod("after"))]
    result = simulated(device_doc(faults, workload=workload), seed=1)
    assert published(result) == [(0, "scenario", 1, ()), (2 * MINUTE, "drivers", 1, ("gpu-0",)),
                                 (5 * MINUTE, "drivers", 1, ())]
    assert allocated(result.state, "during") != "gpu-0" and allocated(result.state, "after") == "gpu-0"
    calm = simulated(device_doc([], workload=workload), seed=1)
    assert allocated(calm.state, "during") == "gpu-0"  # without the fault, the first device is taken


def test_device_unhealthy_ending_keeps_the_drivers_own_unhealthy_taint() -> None:
    faults = [{"at": "1m", "kind": "device-unhealthy", "node": "h100-0", "driver": GPU_DRIVER, "device": "gpu-1",
               "for": "3m"}]
    d = device_doc(faults, drivers=[{"name": GPU_DRIVER, "unhealthy": [{"device": "gpu-1", "after": "2m"}]}])
    assert published(simulated(d, seed=1)) == [(0, "scenario", 1, ()), (MINUTE, "drivers", 1, ("gpu-1",))]


# ---------------------------------------------------------------- the chaos scenarios


def chaos(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "scenarios" / "chaos" / f"{name}.yaml").read_text())
    return loaded


def verified(result: Any) -> None:
    full = check_records((o, r) for o, r in LogFile("x", {}, result.entries).records())
    assert full.ok, full.violations


def test_the_chaos_cloud_stockout_scenario_tells_its_story() -> None:
    """scenarios/chaos/cloud-stockout.yaml, as its header says: the a100-8x request in the stockout fails
    out-of-stock, the next scan gets h100-8x nodes, the wave after the stockout gets a100-8x again."""
    d = chaos("cloud-stockout")
    result = simulated(d, seed=d["spec"]["seed"])
    verified(result)
    failed = [(t, e.group, e.delta, e.reason) for t, _, e in sourced_events(result.entries, ScaleUpFailed)]
    assert failed == [(150_000, "a100-8x", 3, "out-of-stock")]  # the GPU pods 30 s old (pod-age buffer)
    made = [(t, e.group) for t, _, e in sourced_events(result.entries, NodeProvisioning)]
    assert made == [(160_000, "h100-8x")] * 3 + [(930_000, "a100-8x")] * 2
    assert not result.state.pods_by_phase["Pending"]
    bound = {e.pod: e.node for _, _, e in sourced_events(result.entries, PodBound)}
    assert all(bound[key(f"train-a-{i}")].startswith("h100-8x") for i in range(3))
    assert all(bound[key(f"train-b-{i}")].startswith("a100-8x") for i in range(2))
    del d["spec"]["faults"]
    calm = simulated(d, seed=d["spec"]["seed"])
    assert sourced_events(calm.entries, ScaleUpFailed) == []
    assert {e.group for _, _, e in sourced_events(calm.entries, NodeProvisioning)} == {"a100-8x"}


def test_the_chaos_driver_crash_scenario_tells_its_story() -> None:
    """scenarios/chaos/driver-crash.yaml, as its header says: nothing published from 2m to 8m, infer-0
    gets the failing gpu-0, the restart at 8m republishes generation 2 with gpu-0 tainted, infer-1 gets
    another GPU; without the fault gpu-0 is tainted at 3m and nobody gets it."""
    d = chaos("driver-crash")
    result = simulated(d, seed=d["spec"]["seed"])
    verified(result)
    assert published(result) == [(0, "scenario", 1, ()), (8 * MINUTE, "drivers", 2, ("gpu-0",))]
    assert allocated(result.state, "infer-0") == "gpu-0" and allocated(result.state, "infer-1") != "gpu-0"
    assert len(result.state.nodes) == 1
    del d["spec"]["faults"]
    calm = simulated(d, seed=d["spec"]["seed"])
    assert published(calm) == [(0, "scenario", 1, ()), (3 * MINUTE, "drivers", 1, ("gpu-0",))]
    assert "gpu-0" not in (allocated(calm.state, "infer-0"), allocated(calm.state, "infer-1"))
