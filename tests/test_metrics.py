"""Metrics of a run (core/analysis/metrics.py): each one checked exactly on hand-built logs, then end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import GPU_TOLERATION, Log, node_template, pod

from dralab.core.analysis.gpu_units import template_gpus
from dralab.core.analysis.metrics import compute_metrics
from dralab.core.analysis.run_metrics import RunMetrics, sample
from dralab.core.analysis.summary import render_text, summarize
from dralab.core.kube.manifests import check_node
from dralab.core.log.events import (
    ClaimAllocated,
    ClaimReleased,
    Event,
    NodeCreated,
    NodeGroupDefined,
    NodeReady,
    ResourceClaimCreated,
    ResourceSlicePublished,
    ScaleUpRequested,
    node_key,
)
from dralab.core.scenario.dra import render_slice_templates
from dralab.core.scenario.load import load_scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.simulation.sim import Simulator

ROOT = Path(__file__).resolve().parents[1]
H = 3_600_000  # ms in an hour
S = 1000


def metrics(log: Log, end_ms: int | None = None) -> RunMetrics:
    return compute_metrics(enumerate(log.records, start=1), end_ms)


def gpu_pod(name: str, gpu: int) -> dict[str, Any]:
    return pod(name, gpu=gpu, tolerations=[GPU_TOLERATION])


# ---------------------------------------------------------------- paid, used, idle, allocation ratio


def test_one_node_one_pod_for_an_hour() -> None:
    """One 8-GPU node for 2 h, a 4-GPU pod on it for the first hour: 16 GPU-h paid, 4 used, 12 idle."""
    log = Log()
    log.group("g")
    log.node("g-0", group="g", t=0)
    p = log.pod(gpu_pod("a", 4), t=0)
    log.bind(p, "g-0", t=0)
    log.finish(p, t=H)
    m = metrics(log, end_ms=2 * H)
    assert m.end_s == 7200
    assert m.node_hours_paid == 2
    assert m.gpu_hours_paid == 16
    assert m.gpu_hours_paid_by_group == {"g": 16}
    assert m.gpu_hours_used == 4
    assert m.gpu_hours_idle == 12  # nothing pending: every free GPU is idle
    assert m.gpu_hours_unready == 0
    assert m.gpu_allocation_ratio_mean == pytest.approx(0.25)  # 0.5 for 1 h, 0 for 1 h
    assert m.gpu_allocation_ratio_series == [[0.0, 0.5], [3600.0, 0.0]]
    assert m.pending_pod_seconds_by_reason == {}
    assert m.time_to_schedule_s == {"p50": 0.0, "p99": 0.0}
    assert (m.scale_ups, m.scale_ups_without_pod, m.nodes_never_used) == (0, 0, 0)


def test_without_end_the_run_ends_at_the_last_record() -> None:
    log = Log()
    log.node("n", t=0)
    log.pod(gpu_pod("a", 1), t=H)
    m = metrics(log)
    assert (m.end_s, m.gpu_hours_paid, m.node_hours_paid) == (3600, 8, 1)


def test_free_gpus_a_pending_pod_could_use_are_not_idle() -> None:
    """6 of 8 GPUs used; 2 free. A pending 4-GPU pod cannot use them (idle); a pending 1-GPU pod could."""
    log = Log()
    log.node("n", t=0)
    a = log.pod(gpu_pod("a", 6), t=0)
    log.bind(a, "n", t=0)
    b = log.pod(gpu_pod("b", 4), t=0)
    log.unschedulable(b, cause="capacity", t=0)
    c = log.pod(gpu_pod("c", 1), t=H)  # from 1 h on, c could use the 2 free GPUs
    log.unschedulable(c, cause="selector", t=H)
    m = metrics(log, end_ms=2 * H)
    assert m.gpu_hours_idle == 2  # the first hour only
    assert m.gpu_hours_used == 12
    assert m.pending_pod_seconds_by_reason == {"capacity": 7200, "selector": 3600}


def test_pods_asking_for_no_gpu_leave_free_gpus_idle() -> None:
    log = Log()
    log.node("n", t=0)
    p = log.pod(pod("cpu-only", cpu="500"), t=0)
    log.unschedulable(p, cause="resources", t=0)
    assert metrics(log, end_ms=H).gpu_hours_idle == 8


def test_pending_time_follows_the_reason_at_each_moment() -> None:
    log = Log()
    log.node("n", template=node_template(gpu=2), t=0)
    p = log.pod(gpu_pod("a", 4), t=0)
    log.unschedulable(p, cause="capacity", t=10 * S)  # not tried for 10 s
    log.unschedulable(p, cause="fragmentation", t=40 * S)  # capacity for 30 s
    q = log.pod(gpu_pod("b", 1), t=50 * S)
    log.bind(q, "n", t=60 * S)  # b: not tried for 10 s, then bound
    m = metrics(log, end_ms=100 * S)
    assert m.pending_pod_seconds_by_reason == {"not-yet-tried": 20, "capacity": 30, "fragmentation": 60}
    assert m.time_to_schedule_s == {"p50": 10.0, "p99": 10.0}


def test_time_never_goes_backwards() -> None:
    """A live log may append a decision computed a little before an input already in it: time is clamped."""
    log = Log()
    log.node("n", t=0)
    log.pod(gpu_pod("a", 1), t=10 * S)
    log.pod(gpu_pod("b", 1), t=5 * S)  # appended after, computed earlier: counts from 10 s
    m = metrics(log, end_ms=20 * S)
    assert m.pending_pod_seconds_by_reason == {"not-yet-tried": 20}


# ---------------------------------------------------------------- scale-ups, readiness


def created(log: Log, name: str, group: str = "g", *, t: int) -> None:
    log.append(NodeCreated(name=name, group=group, node=check_node(node_template()) | {"metadata": {"name": name}},
                           ready_at=-1, initial=False), t=t)


def test_nodes_not_ready_are_paid_not_idle() -> None:
    log = Log()
    log.group("g")
    log.append(ScaleUpRequested(group="g", delta=2), t=0)
    created(log, "g-0", t=0)
    created(log, "g-1", t=0)
    log.ready("g-0", t=H // 2)
    log.ready("g-1", t=H // 2)
    p = log.pod(gpu_pod("a", 8), t=H // 2)
    log.bind(p, "g-0", t=H // 2)
    m = metrics(log, end_ms=H)
    assert m.gpu_hours_paid == 16
    assert m.gpu_hours_unready == 8  # two nodes, half an hour each
    assert m.gpu_hours_used == 4
    assert m.gpu_hours_idle == 4  # g-1, Ready for half an hour, nothing pending
    assert m.gpu_allocation_ratio_mean == pytest.approx(0.5)  # undefined while no node is Ready
    assert m.gpu_allocation_ratio_series == [[0.0, None], [1800.0, 0.5]]
    assert (m.scale_ups, m.scale_ups_without_pod, m.nodes_never_used) == (1, 0, 1)
    assert m.nodes_added == {"g": 2}


def test_scale_ups_get_their_nodes_first_in_first_out() -> None:
    """Two scale-ups of one node each: the first node is the first's; a pod only on the second node."""
    log = Log()
    log.group("g")
    log.group("h")
    log.node("g-init", group="g", t=0)  # a starting node: never attributed
    log.append(ScaleUpRequested(group="g", delta=1), t=0)
    log.append(ScaleUpRequested(group="h", delta=1), t=0)  # its node never comes: it brought no pod
    log.append(ScaleUpRequested(group="g", delta=1), t=10 * S)
    created(log, "g-1", t=20 * S)
    created(log, "g-2", t=20 * S)
    log.ready("g-1", t=30 * S)
    log.ready("g-2", t=30 * S)
    p = log.pod(gpu_pod("a", 1), t=30 * S)
    log.bind(p, "g-2", t=30 * S)
    m = metrics(log)
    assert (m.scale_ups, m.scale_ups_without_pod, m.nodes_never_used) == (3, 2, 1)


class NodeProvisioning(Event, tag="NodeProvisioning", frozen=True):
    """Stands for the cloud's event (recognised by name and fields): a VM made for a scale-up."""

    name: str
    group: str


class ScaleUpFailed(Event, tag="ScaleUpFailed", frozen=True):
    """Stands for the cloud's event: `delta` nodes of the group's oldest unanswered scale-up will not come."""

    group: str
    delta: int


def test_cloud_answers_take_scale_ups_in_order() -> None:
    """A VM provisioned answers the first scale-up, a failure the second: the node is the first's."""
    log = Log()
    log.group("g")
    log.append(ScaleUpRequested(group="g", delta=1), ScaleUpRequested(group="g", delta=1), t=0)
    log.append(NodeProvisioning(name="g-0", group="g"), t=0)  # type: ignore[arg-type]
    log.append(ScaleUpFailed(group="g", delta=1), t=0)  # type: ignore[arg-type]
    log.append(ScaleUpRequested(group="g", delta=1), t=0)
    created(log, "g-0", t=10 * S)  # the first scale-up's VM registers
    created(log, "g-1", t=10 * S)  # the third's node
    log.ready("g-0", t=10 * S)
    p = log.pod(gpu_pod("a", 1), t=10 * S)
    log.bind(p, "g-0", t=10 * S)
    m = metrics(log)
    assert (m.scale_ups, m.scale_ups_without_pod, m.nodes_never_used) == (3, 2, 1)


# ---------------------------------------------------------------- deleted nodes


class NodeDeleted(Event, tag="NodeDeleted", frozen=True):
    """Stands for a future event: dralab has no NodeDeleted yet."""

    name: str

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


def deleted_log() -> Log:
    log = Log()
    log.node("a", t=0)
    log.node("b", t=0)
    log.append(NodeDeleted(name="a"), t=H)  # type: ignore[arg-type]
    return log


def test_a_deleted_node_is_paid_until_its_deletion() -> None:
    m = metrics(deleted_log(), end_ms=2 * H)  # the fold keeps the node (an unhandled event)
    assert (m.node_hours_paid, m.gpu_hours_paid, m.gpu_hours_idle) == (3, 24, 24)


def test_a_node_gone_from_the_state_is_paid_until_then(monkeypatch: pytest.MonkeyPatch) -> None:
    apply_event = ClusterState._apply_event

    def removing(self: ClusterState, offset: int, t: int, event: object) -> None:
        if isinstance(event, NodeDeleted):
            del self.nodes[event.name]
        else:
            apply_event(self, offset, t, event)

    monkeypatch.setattr(ClusterState, "_apply_event", removing)
    m = metrics(deleted_log(), end_ms=2 * H)
    assert (m.node_hours_paid, m.gpu_hours_paid, m.gpu_hours_idle) == (3, 24, 24)


def test_the_logs_own_node_deletion_stops_billing() -> None:
    """With the log's NodeDeleted (once core/log/events.py has it): billed until then, its GPUs gone."""
    from dralab.core.log import events

    deleted = getattr(events, "NodeDeleted", None)
    if deleted is None:
        pytest.skip("no NodeDeleted event in this version of the log")
    log = Log()
    log.node("a", t=0)
    log.node("b", t=0)
    log.append(deleted(name="a"), t=H)
    assert "a" not in log.state.nodes or log.state.anomalies
    m = metrics(log, end_ms=2 * H)
    assert (m.node_hours_paid, m.gpu_hours_paid, m.gpu_hours_idle) == (3, 24, 24)


# ---------------------------------------------------------------- DRA devices

DRIVER = "gpu.example.com"


def slice_template(devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {},
            "spec": {"driver": DRIVER, "pool": {"generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def test_partitions_of_one_gpu_count_once() -> None:
    """Plain devices count one each; devices consuming counters count once per counter set."""
    devices = [{"name": "gpu-0"}, {"name": "gpu-1"},
               {"name": "gpu-2", "consumesCounters": [{"counterSet": "gpu-2", "counters": {}}]},
               {"name": "gpu-2-mig-a", "consumesCounters": [{"counterSet": "gpu-2", "counters": {}}]},
               {"name": "gpu-2-mig-b", "consumesCounters": [{"counterSet": "gpu-2", "counters": {}}]}]
    assert template_gpus([slice_template(devices)], "n") == 3


def claim_manifest(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER,
                                                                          "count": count}}]}}}


def allocation(node: str, *devices: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": d}
                                    for d in devices]}}


def test_dra_devices_of_a_node_are_paid_used_and_freed() -> None:
    """A DRA-only node: 4 devices from its group's slice; a claim holds 2 for an hour, then releases them."""
    templates = (slice_template([{"name": f"gpu-{i}"} for i in range(4)]),)
    log = Log()
    log.append(NodeGroupDefined(name="dra", min=0, max=3, provision_delay_ms=(0, 0),
                                template=check_node(node_template(gpu=0)), resource_slices=templates), t=0)
    node = check_node(node_template(gpu=0)) | {"metadata": {"name": "dra-0"}}
    slices = [ResourceSlicePublished(manifest=m) for m in render_slice_templates(templates, "dra-0")]
    log.append(NodeCreated(name="dra-0", group="dra", node=node, initial=True), NodeReady(name="dra-0"), *slices, t=0)
    p = log.pod(pod("a"), t=0)
    log.append(ResourceClaimCreated(manifest=claim_manifest("c", 2)), t=0)
    log.append(ClaimAllocated(claim="claim/default/c", allocation=allocation("dra-0", "gpu-0", "gpu-1"), pod=p), t=0)
    log.append(ClaimReleased(claim="claim/default/c", pod=p, deallocate=True), t=H)
    assert log.state.anomalies == []
    m = metrics(log, end_ms=2 * H)
    assert m.gpu_hours_paid == 8
    assert m.gpu_hours_used == 2
    assert m.gpu_hours_idle == 6
    assert m.gpu_allocation_ratio_series == [[0.0, 0.5], [3600.0, 0.0]]


def dra_node(log: Log, devices: list[dict[str, Any]], counters: dict[str, Any] | None = None) -> None:
    """A Ready DRA-only node `dra-0` publishing a slice of `devices` (and one of `sharedCounters`)."""
    templates: tuple[dict[str, Any], ...] = (slice_template(devices),)
    if counters:
        shared = slice_template([])
        del shared["spec"]["devices"]
        shared["spec"]["sharedCounters"] = [{"name": k, "counters": v} for k, v in counters.items()]
        shared["spec"]["pool"]["resourceSliceCount"] = 2
        templates[0]["spec"]["pool"]["resourceSliceCount"] = 2
        templates = (shared, *templates)
    log.append(NodeGroupDefined(name="dra", min=0, max=3, provision_delay_ms=(0, 0),
                                template=check_node(node_template(gpu=0)), resource_slices=templates), t=0)
    node = check_node(node_template(gpu=0)) | {"metadata": {"name": "dra-0"}}
    slices = [ResourceSlicePublished(manifest=m) for m in render_slice_templates(templates, "dra-0")]
    log.append(NodeCreated(name="dra-0", group="dra", node=node, initial=True), NodeReady(name="dra-0"), *slices, t=0)


def partitionable_gpu(log: Log) -> None:
    """One GPU with 7 compute slices: the whole GPU (7 slices) and two 1-slice partitions."""
    def consumes(n: int) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0", "counters": {"slices": {"value": str(n)}}}]
    dra_node(log, [{"name": "gpu-0", "consumesCounters": consumes(7)},
                   {"name": "gpu-0-1g-0", "consumesCounters": consumes(1)},
                   {"name": "gpu-0-1g-1", "consumesCounters": consumes(1)}],
             counters={"gpu-0": {"slices": {"value": "7"}}})


def test_a_partially_used_gpu_leaves_its_unused_share_idle() -> None:
    """One partition (1/7 of the GPU) allocated for an hour, nothing pending: the GPU counts as used,
    1/7 of it by share, and the other 6/7 are idle (as gpu_hours_used_by_share weighs it); then all of it."""
    log = Log()
    partitionable_gpu(log)
    p = log.pod(pod("a"), t=0)
    log.append(ResourceClaimCreated(manifest=claim_manifest("c", 1)), t=0)
    log.append(ClaimAllocated(claim="claim/default/c", allocation=allocation("dra-0", "gpu-0-1g-0"), pod=p), t=0)
    log.append(ClaimReleased(claim="claim/default/c", pod=p, deallocate=True), t=H)
    assert log.state.anomalies == []
    m = metrics(log, end_ms=2 * H)
    assert m.gpu_hours_paid == 2
    assert m.gpu_hours_used == 1
    assert m.gpu_hours_used_share == pytest.approx(1 / 7)
    assert m.gpu_hours_idle == pytest.approx(6 / 7 + 1)
    assert m.gpu_hours_used_share + m.gpu_hours_idle == pytest.approx(m.gpu_hours_paid)


@pytest.mark.parametrize(("demand", "idle"), [(1, 0.0), (2, 6 / 7)])
def test_a_partially_used_gpu_is_wanted_by_a_pending_pod_asking_for_no_more_devices(demand: int,
                                                                                    idle: float) -> None:
    """The node offers one partially used GPU (it may still hold a partition): a pending pod asking for
    one device could use it (not idle); one asking for two could not (its unused 6/7 are idle)."""
    log = Log()
    partitionable_gpu(log)
    p = log.pod(pod("a"), t=0)
    log.append(ResourceClaimCreated(manifest=claim_manifest("c", 1)), t=0)
    log.append(ClaimAllocated(claim="claim/default/c", allocation=allocation("dra-0", "gpu-0-1g-0"), pod=p), t=0)
    waiting = log.pod(gpu_pod("w", demand), t=0)
    log.unschedulable(waiting, cause="capacity", t=0)
    m = metrics(log, end_ms=H)
    assert m.gpu_hours_idle == pytest.approx(idle)
    assert m.gpu_hours_used == 1


def test_a_consumable_capacity_share_counts_by_the_capacity_it_consumes() -> None:
    """A GPU shared through consumable capacity (80Gi): a 20Gi share uses a quarter of it; 3/4 idle."""
    log = Log()
    dra_node(log, [{"name": "gpu-0", "allowMultipleAllocations": True,
                    "capacity": {"memory": {"value": "80Gi"}}}])
    p = log.pod(pod("a"), t=0)
    log.append(ResourceClaimCreated(manifest=claim_manifest("c", 1)), t=0)
    share = {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "dra-0", "device": "gpu-0",
                                      "shareID": "1", "consumedCapacity": {"memory": "20Gi"}}]}}
    log.append(ClaimAllocated(claim="claim/default/c", allocation=share, pod=p), t=0)
    assert log.state.anomalies == []
    m = metrics(log, end_ms=H)
    assert (m.gpu_hours_paid, m.gpu_hours_used) == (1, 1)
    assert m.gpu_hours_used_share == pytest.approx(0.25)
    assert m.gpu_hours_idle == pytest.approx(0.75)


# ---------------------------------------------------------------- summary and end to end


def test_sample_keeps_first_and_last_and_caps() -> None:
    series: list[tuple[float, float | None]] = [(float(i), i / 1000) for i in range(1001)]
    out = sample(series, 500)
    assert len(out) == 500 and out[0] == [0.0, 0.0] and out[-1] == [1000.0, 1.0]
    assert sample(series[:3], 500) == [[0.0, 0.0], [1.0, 0.001], [2.0, 0.002]]


def test_summary_gains_the_contract_keys_and_agrees_with_itself() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    result = Simulator(scenario, 7).run()
    from dralab.core.analysis.metrics import metrics_from_entries

    m = metrics_from_entries(result.entries, end_ms=scenario.duration_ms)
    plain = summarize(result.state, result.violations)
    summary = summarize(result.state, result.violations, metrics=m)
    assert {k: v for k, v in summary.items() if k in plain} == plain  # existing keys unchanged
    assert summary["time_to_schedule_s"] == m.time_to_schedule_s
    assert summary["nodes_added"] == m.nodes_added
    details = summary["metrics"]
    assert summary["gpu_hours_paid"] == pytest.approx(
        details["gpu_hours_used"] + summary["gpu_hours_idle"] + details["gpu_hours_unready"], abs=0.01)
    assert sum(details["gpu_hours_paid_by_group"].values()) == pytest.approx(summary["gpu_hours_paid"], abs=0.001)
    assert "GPU-h paid" in render_text(summary)
    assert "GPU-h" not in render_text(plain)


def test_sim_json_has_the_four_contract_keys() -> None:
    out = subprocess.run([sys.executable, "-m", "dralab", "sim", str(ROOT / "scenarios" / "quickstart.yaml"),
                          "-o", "json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert isinstance(summary["gpu_hours_paid"], float) and summary["gpu_hours_paid"] > 0
    assert isinstance(summary["gpu_hours_idle"], float)
    assert isinstance(summary["scale_ups_without_pod"], int)
    assert isinstance(summary["pending_pod_seconds_by_reason"], dict)
    assert all(round(v, 3) == v for v in summary["pending_pod_seconds_by_reason"].values())
    assert {"node_hours_paid", "gpu_hours_paid_by_group", "gpu_hours_unready", "gpu_allocation_ratio",
            "nodes_never_used"} <= set(summary["metrics"])
    assert summary["metrics"]["end_s"] == 600.0


def test_fragmentation_is_the_share_of_free_gpus_no_pending_pod_can_use() -> None:
    """Two 8-GPU nodes with 5 and 7 GPUs in use leave 3 + 1 free. For an hour a 4-GPU pod waits: none
    of the 4 free GPUs can take it: fragmentation 1.0 over that hour (enough free in total, split)."""
    log = Log()
    log.group("g")
    log.node("g-0", group="g", t=0)
    log.node("g-1", group="g", t=0)
    for name, gpus, node in (("a", 5, "g-0"), ("b", 7, "g-1")):
        log.bind(log.pod(gpu_pod(name, gpus), t=0), node, t=0)
    big = log.pod(gpu_pod("big", 4), t=0)
    log.unschedulable(big, t=0)
    m = metrics(log, end_ms=H)
    assert m.details()["gpu_fragmentation"] == {"mean": 1.0, "over_s": 3600.0}
