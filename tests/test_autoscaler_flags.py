"""cluster-autoscaler's scale-up flags as spec.autoscaler fields (core/scenario/autoscaler_flags.py, issue 22): one
test per knob, showing its effect as upstream's flags.go help text and FAQ describe it, under a release profile;
the legacy profile keeps its logs (no new run-config key, no Event)."""

from __future__ import annotations

from typing import Any

import pytest
from builders import GPU_TOLERATION, arrival, group, node_template, pod, scenario_doc, simulated, simulated_scenario

from dralab.core.autoscaler.provisioning.backoff import backoff_until
from dralab.core.autoscaler.provisioning.balance import balance, similar
from dralab.core.autoscaler.provisioning.expanders import Option, expand
from dralab.core.autoscaler.provisioning.pod_age import cluster_healthy, pod_delay
from dralab.core.kube.errors import ScenarioError
from dralab.core.kube.versions import LEGACY_PROFILE
from dralab.core.log.events import AutoscalerEvent, ScaleUpRequested, decode_record
from dralab.core.run.config import run_config
from dralab.core.scenario.load import parse_scenario
from dralab.core.state.cluster import ClusterState, NodeGroupState, PodState


def doc(groups: list[dict[str, Any]] | None = None, workload: list[Any] | None = None, version: str | None = "1.37",
        duration: str = "5m", **flags: Any) -> dict[str, Any]:
    d = scenario_doc(groups or [group("cpu", max=10, delay="1m", template=node_template(gpu=0, cpu="4"))],
                     workload=workload, duration=duration)
    if version is not None:
        d["spec"]["kubernetes"] = {"version": version}
    d["spec"]["autoscaler"] = {**d["spec"].get("autoscaler", {}), **flags}
    return d


def cpu_pod(name: str, cpu: str = "3", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    m = pod(name, cpu=cpu)
    if annotations:
        m["metadata"]["annotations"] = annotations
    return m


def scale_ups(result: Any) -> list[tuple[int, str, int]]:
    out = []
    for o, p in result.entries:
        rec = decode_record(p, o)
        out += [(rec.t, e.group, e.delta) for e in rec.events if isinstance(e, ScaleUpRequested)]
    return out


def autoscaler_events(result: Any) -> list[tuple[int, AutoscalerEvent]]:
    out = []
    for o, p in result.entries:
        rec = decode_record(p, o)
        out += [(rec.t, e) for e in rec.events if isinstance(e, AutoscalerEvent)]
    return out


# ----------------------------------------------------------------------------------- the pod-age filters


def test_new_pod_scale_up_delay_and_its_annotation() -> None:
    """--new-pod-scale-up-delay: "Pods less than this old will not be considered for scale-up. Can be increased
    for individual pods through annotation 'cluster-autoscaler.kubernetes.io/pod-scale-up-delay'"."""
    base = simulated(doc(workload=[arrival(0, cpu_pod("a"))]), 1)
    assert [t for t, _, _ in scale_ups(base)] == [10_000]  # the first loop once the pod is past the 2 s buffer
    delayed = simulated(doc(workload=[arrival(0, cpu_pod("a"))], newPodScaleUpDelay="45s"), 1)
    assert [t for t, _, _ in scale_ups(delayed)] == [50_000]  # age must be > 45 s
    note = {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "2m"}
    longer = simulated(doc(workload=[arrival(0, cpu_pod("a", annotations=note))], newPodScaleUpDelay="45s"), 1)
    assert [t for t, _, _ in scale_ups(longer)] == [130_000]
    note = {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "10s"}  # shorter than the flag: ignored
    shorter = simulated(doc(workload=[arrival(0, cpu_pod("a", annotations=note))], newPodScaleUpDelay="45s"), 1)
    assert [t for t, _, _ in scale_ups(shorter)] == [50_000]


def test_pod_delay_reads_go_durations_only() -> None:
    def p(value: str) -> PodState:
        manifest = {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": value}}}
        return PodState("pod/default/a", manifest, {}, 0, 0, 0, -1)

    assert pod_delay(p("1m30s"), 0) == 90_000
    assert pod_delay(p("300"), 0) == 0  # Go's ParseDuration wants a unit: logged and ignored upstream
    assert pod_delay(p("soon"), 5_000) == 5_000


def test_gpu_pods_wait_thirty_seconds_in_release_profiles_only() -> None:
    """allPodsAreNew: "nodes with GPU are very expensive and we're ready to sacrifice a bit more latency"."""
    gpu_group = [group("gpu", max=4, delay="1m", template=node_template(gpu=8))]
    work = [arrival(0, pod("g", gpu=8, tolerations=[GPU_TOLERATION]))]
    assert [t for t, _, _ in scale_ups(simulated(doc(gpu_group, work), 1))] == [30_000]
    legacy_doc = doc(gpu_group, work, version=None)
    legacy = simulated_scenario(parse_scenario(legacy_doc, "x.yaml", profile=LEGACY_PROFILE), 1)
    assert [t for t, _, _ in scale_ups(legacy)] == [10_000]  # the first loop after the scheduler's verdict
    assert autoscaler_events(legacy) == []  # the legacy profile writes no Event
    entry = run_config(parse_scenario(legacy_doc, "x.yaml", profile=LEGACY_PROFILE))
    assert "kubernetes" not in entry and set(entry["autoscaler"]) == {
        "policy", "scan_interval_ms", "max_node_provision_time_ms", "max_node_startup_time_ms", "expander",
        "scale_down", "capacity_revoked", "reserve_bookings"}  # what it recorded before the flags existed


# ----------------------------------------------------------------------------------- limits


def test_max_nodes_total_caps_and_then_stops_scale_up() -> None:
    """--max-nodes-total: "Cluster autoscaler will not grow the cluster beyond this number"."""
    d = doc(workload=[arrival(0, cpu_pod(f"p{i}")) for i in range(3)], maxNodesTotal=2, duration="4m")
    d["spec"]["nodes"] = [{"group": "cpu", "count": 1}]
    result = simulated(d, 1)
    assert [(g, n) for _, g, n in scale_ups(result)] == [("cpu", 1)]  # 2 - 1 node there
    said = autoscaler_events(result)
    assert any(e.reason == "MaxNodesTotalReached" and e.message == "Max total nodes in cluster reached: 2"
               and e.warning and e.pod == "" for _, e in said)
    assert any(e.reason == "NotTriggerScaleUp"
               and e.message == "pod didn't trigger scale-up: max total nodes in cluster reached" for _, e in said)


def test_max_nodes_per_scale_up_limits_one_scale_up() -> None:
    """--max-nodes-per-scaleup: "Max nodes added in a single scale-up"."""
    work = [arrival(0, cpu_pod(f"p{i}")) for i in range(5)]
    assert [n for _, _, n in scale_ups(simulated(doc(workload=work, duration="1m"), 1))] == [5]
    assert [n for _, _, n in scale_ups(simulated(doc(workload=work, maxNodesPerScaleUp=2, duration="1m"), 1))][:1] \
        == [2]


def test_an_unhealthy_cluster_does_not_scale_up() -> None:
    """--ok-total-unready-count / --max-total-unready-percentage: "After this is exceeded, CA halts operations"."""
    g = NodeGroupState("g", 0, 10, (0, 0), {}, 0.0, {})
    view = ClusterState()
    view.node_groups["g"] = g
    for i in range(10):
        view.nodes[f"n{i}"] = None  # type: ignore[assignment]  # only counted
    assert cluster_healthy(view, 3, 3, 45.0)  # 3 unready: within the count
    assert cluster_healthy(view, 4, 3, 45.0)  # 4 > 3 but not > 45 % of 10
    assert not cluster_healthy(view, 5, 3, 45.0)
    assert cluster_healthy(view, 5, 5, 45.0)
    # end to end: 4 nodes that never turn Ready are unready once 15 min old (max-node-startup-time): with a 4-node
    # cluster that is more than 3 and more than 45 %, so a pod arriving at 17m gets no node
    groups = [group("bad", max=10, delay="1h", template=node_template(gpu=0, cpu="4", labels={"pool": "bad"})),
              group("cpu", max=10, delay="1m", template=node_template(gpu=0, cpu="4", labels={"pool": "cpu"}))]
    stuck = pod("stuck", cpu="3", node_selector={"pool": "bad"})
    d = doc(groups, workload=[arrival(0, stuck, count=4), arrival("17m", pod("late", cpu="3",
                                                                         node_selector={"pool": "cpu"}))],
            duration="19m")
    d["spec"]["nodeGroups"][0]["notReadyFor"] = "1h"
    d["spec"]["autoscaler"]["scaleDown"] = {"enabled": False}
    result = simulated(d, 1)
    assert [g for _, g, _ in scale_ups(result)] == ["bad"]
    assert [(e.reason, e.message) for _, e in autoscaler_events(result) if e.reason == "ClusterUnhealthy"] == \
        [("ClusterUnhealthy", "Cluster is unhealthy")]
    d["spec"]["autoscaler"]["okTotalUnreadyCount"] = 4
    assert [g for _, g, _ in scale_ups(simulated(d, 1))] == ["bad", "cpu"]


# ----------------------------------------------------------------------------------- expanders, balancing, backoff


def _option(name: str, count: int, waste: float, pods: int = 1) -> Option:
    return Option(NodeGroupState(name, 0, 10, (0, 0), {}, 0.0, {}), count, tuple(f"p{i}" for i in range(pods)), waste)


def test_expander_chain_and_priority_regexes() -> None:
    """--expander: "Specifying multiple values separated by commas will call the expanders in succession until
    there is only one option remaining"; the priority expander's ConfigMap maps priorities to name regexes."""
    import random

    options = [_option("a100-spot", 2, 0.1), _option("h100-ondemand", 1, 0.5), _option("h100-spot", 1, 0.2)]
    regexes = ((50, (".*-spot",)), (10, (".*",)))
    assert expand("priority,least-waste", {}, options, random.Random(0), regexes).group.name == "a100-spot"
    assert expand("priority,least-nodes", {}, options, random.Random(0), regexes).group.name == "h100-spot"
    assert expand("least-waste", {}, options, random.Random(0)).group.name == "a100-spot"
    unmatched = ((5, ("^nothing$",)),)  # no group matches: no option filtered
    assert len({expand("priority", {}, options, random.Random(s), unmatched).group.name for s in range(20)}) == 3


def test_expander_priorities_end_to_end() -> None:
    cheap = group("cheap", max=4, delay="1m", cost=1.0, template=node_template(gpu=0, cpu="4"))
    fast = group("fast-pool", max=4, delay="1m", cost=9.0, template=node_template(gpu=0, cpu="8"))
    work = [arrival(0, cpu_pod("a"))]
    picked = simulated(doc([cheap, fast], work, expander="priority,least-waste",
                           expanderPriorities="100:\n  - fast-.*\n1:\n  - .*\n", duration="1m"), 1)
    assert [g for _, g, _ in scale_ups(picked)] == ["fast-pool"]
    plain = simulated(doc([cheap, fast], work, expander="least-waste", duration="1m"), 1)
    assert [g for _, g, _ in scale_ups(plain)] == ["cheap"]  # 3 of 4 cpus used, against 3 of 8


def test_balance_similar_node_groups_splits_a_scale_up() -> None:
    """--balance-similar-node-groups: "Detect similar node groups and balance the number of nodes between
    them" (same capacity and labels except the zone)."""
    def zonal(name: str, zone: str) -> dict[str, Any]:
        return group(name, max=10, delay="1m", template=node_template(
            gpu=0, cpu="4", labels={"topology.kubernetes.io/zone": zone, "tier": "batch"}))

    work = [arrival(0, cpu_pod(f"p{i}")) for i in range(4)]
    one = simulated(doc([zonal("a", "z1"), zonal("b", "z2")], work, duration="1m"), 1)
    assert sorted(n for _, _, n in scale_ups(one)) == [4]
    split = simulated(doc([zonal("a", "z1"), zonal("b", "z2")], work, balanceSimilarNodeGroups=True,
                          duration="1m"), 1)
    assert sorted((g, n) for _, g, n in scale_ups(split)) == [("a", 2), ("b", 2)]
    triggered = [e.message for _, e in autoscaler_events(split) if e.reason == "TriggeredScaleUp"]
    assert triggered and triggered[0] in ("pod triggered scale-up: [{a 0->2 (max: 10)} {b 0->2 (max: 10)}]",
                                          "pod triggered scale-up: [{b 0->2 (max: 10)} {a 0->2 (max: 10)}]")


def test_similarity_and_balancing_rules() -> None:
    def g(name: str, cpu: int, labels: dict[str, str], size: int = 0, mx: int = 10) -> NodeGroupState:
        out = NodeGroupState(name, 0, mx, (0, 0), {"metadata": {"labels": labels}}, 0.0,
                             {"cpu": cpu, "memory": 1000})
        out.initial = size
        return out

    a = g("a", 4000, {"topology.kubernetes.io/zone": "z1"})
    assert similar(a, g("b", 4000, {"topology.kubernetes.io/zone": "z2"}))
    assert not similar(a, g("c", 8000, {"topology.kubernetes.io/zone": "z2"}))
    assert not similar(a, g("d", 4000, {"tier": "x"}))
    assert balance([g("a", 1, {}, size=3), g("b", 1, {}, size=1), g("c", 1, {}, size=1, mx=2)], 5) == \
        {"b": 3, "c": 1, "a": 1}


def test_backoff_durations_are_fields() -> None:
    g = NodeGroupState("g", 0, 1, (0, 0), {}, 0.0, {})
    g.failures = [(0, 1, "timeout"), (70_000, 1, "timeout")]
    assert backoff_until(g, 60_000, 90_000, 3_600_000) == 70_000 + 90_000  # doubled to 2 min, capped at 90 s
    sc = parse_scenario(doc(initialNodeGroupBackoffDuration="1m", maxNodeGroupBackoffDuration="90s"), "x.yaml")
    entry = run_config(sc)["autoscaler"]
    assert entry["initial_node_group_backoff_ms"] == 60_000 and entry["max_node_group_backoff_ms"] == 90_000
    assert "node_group_backoff_reset_timeout_ms" not in entry  # only what differs from the default is recorded


@pytest.mark.parametrize(("flags", "path"), [
    ({"expander": "cheapest"}, "spec.autoscaler.expander"),
    ({"expander": "priority", "expanderPriorities": {"x": [".*"]}}, "spec.autoscaler.expanderPriorities.x"),
    ({"expander": "priority", "expanderPriorities": {"10": ["("]}}, "spec.autoscaler.expanderPriorities.10[0]"),
    ({"expanderPriorities": {"10": [".*"]}}, "spec.autoscaler.expanderPriorities"),
    ({"maxNodesTotal": -1}, "spec.autoscaler.maxNodesTotal"),
    ({"maxTotalUnreadyPercentage": 120}, "spec.autoscaler.maxTotalUnreadyPercentage"),
    ({"newPodScaleUpDelay": "soon"}, "spec.autoscaler.newPodScaleUpDelay"),
    ({"initialNodeGroupBackoffDuration": "1h"}, "spec.autoscaler.maxNodeGroupBackoffDuration"),
])
def test_bad_flags_name_their_field(flags: dict[str, Any], path: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc(**flags), "x.yaml")
    assert err.value.path == path
