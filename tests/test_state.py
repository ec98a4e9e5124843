"""The state fold: each event applied as the log says, idempotent per offset, indexes kept in step."""

from __future__ import annotations

import copy

import pytest
from builders import GPU, Log, checked_pod, fold, node_template, pod, record

from dralab.core.log.events import (
    AnyEvent,
    NodeCreated,
    NodeReady,
    PodBound,
    PodCreated,
    PodFinished,
    PodUnschedulable,
    RunStarted,
    ScaleUpRequested,
)
from dralab.core.state.cluster import PENDING, RUNNING, SUCCEEDED, ClusterState


def assert_indexes_consistent(state: ClusterState) -> None:
    """Every index agrees with the objects it indexes."""
    by_phase: dict[str, set[str]] = {}
    for k, p in state.pods.items():
        by_phase.setdefault(p.phase, set()).add(k)
    for phase, keys in state.pods_by_phase.items():
        assert set(keys) == by_phase.get(phase, set()), f"pods_by_phase[{phase}]"
    unindexed = set(by_phase) - set(state.pods_by_phase)
    assert not unindexed, f"phases without an index: {unindexed}"
    for g, names in state.nodes_by_group.items():
        assert set(names) == {n for n, node in state.nodes.items() if node.group == g}
    for name, node in state.nodes.items():
        if node.group:
            assert name in state.nodes_by_group[node.group]
        running_here = [k for k in state.pods_by_phase[RUNNING] if state.pods[k].node == name]
        assert list(node.pods) == running_here
        expected_used: dict[str, int] = {"pods": len(running_here)}
        for k in running_here:
            for r, a in state.pods[k].requests.items():
                expected_used[r] = expected_used.get(r, 0) + a
        assert {r: a for r, a in node.used.items() if a} == {r: a for r, a in expected_used.items() if a}
    for resource in ("nvidia.com/gpu", "cpu", "pods"):
        assert state.free_by_node(resource) == {
            n: node.allocatable.get(resource, 0) - node.used.get(resource, 0)
            for n, node in state.nodes.items() if node.ready
        }


@pytest.fixture
def log() -> Log:
    lg = Log()
    lg.group("gpu", max=4, template=node_template(gpu=8, cpu="32"))
    lg.node("gpu-0", group="gpu")
    return lg


# ---------------------------------------------------------------- each event


def test_run_started_is_kept() -> None:
    lg = Log()
    run = RunStarted(scenario="s", seed=3, config={"x": 1})
    lg.append(run)
    assert lg.state.run == run
    assert lg.state.versions == {"run": 1}


def test_node_group_defined(log: Log) -> None:
    g = log.state.node_groups["gpu"]
    assert (g.min, g.max, g.provision_delay_ms, g.cost_per_hour) == (0, 4, (0, 0), 0.0)
    assert g.allocatable[GPU] == 8 and g.allocatable["cpu"] == 32_000 and g.allocatable["pods"] == 110
    assert (g.requested, g.created, g.initial, g.outstanding, g.target_size) == (0, 1, 1, 0, 1)


def test_node_created_then_ready(log: Log) -> None:
    log.node("gpu-1", group="gpu", ready=False, ready_at=5_000, initial=False, t=100)
    node = log.state.nodes["gpu-1"]
    assert (node.ready, node.ready_t, node.ready_at, node.created_t) == (False, -1, 5_000, 100)
    assert "gpu-1" not in log.state.free_by_node(GPU)
    assert list(log.state.nodes_by_group["gpu"]) == ["gpu-0", "gpu-1"]
    g = log.state.node_groups["gpu"]
    assert (g.created, g.initial) == (2, 1)
    log.ready("gpu-1", t=5_000)
    assert (node.ready, node.ready_t) == (True, 5_000)
    assert log.state.free_by_node(GPU) == {"gpu-0": 8, "gpu-1": 8}


def test_node_outside_any_group_is_not_indexed_by_group() -> None:
    lg = Log()
    lg.node("lonely")
    assert lg.state.nodes["lonely"].group == ""
    assert lg.state.nodes_by_group == {}
    assert lg.state.anomalies == []


def test_pod_created_is_pending_with_its_requests(log: Log) -> None:
    k = log.pod(pod("a", gpu=2, cpu="500m", memory="1Gi", priority=7), t=42)
    p = log.state.pods[k]
    assert k == "pod/default/a"
    assert p.requests == {GPU: 2, "cpu": 500, "memory": 1024**3}
    assert (p.priority, p.created_t, p.created_offset, p.phase, p.node, p.condition) == (7, 42, 3, PENDING, None, None)
    assert list(log.state.pods_by_phase[PENDING]) == [k]
    assert [p.key for p in log.state.pending_pods()] == [k]


def test_pod_in_another_namespace_has_its_own_key(log: Log) -> None:
    k = log.pod(pod("a", namespace="team-a"))
    assert k == "pod/team-a/a" and k in log.state.pods


def test_pod_unschedulable_sets_the_condition(log: Log) -> None:
    k = log.pod(pod("a", gpu=9))
    log.unschedulable(k, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.", "capacity", t=7)
    cond = log.state.pods[k].condition
    assert cond is not None
    assert (cond.status, cond.reason, cond.cause, cond.t) == ("False", "Unschedulable", "capacity", 7)
    assert cond.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    assert log.state.pods[k].phase == PENDING


def test_pod_bound_moves_it_to_running_and_uses_the_node(log: Log) -> None:
    k = log.pod(pod("a", gpu=3, cpu="2"))
    log.unschedulable(k)
    log.bind(k, "gpu-0", t=50)
    p, node = log.state.pods[k], log.state.nodes["gpu-0"]
    assert (p.phase, p.node, p.bound_t) == (RUNNING, "gpu-0", 50)
    assert p.condition is not None and p.condition.status == "True"
    assert node.used == {GPU: 3, "cpu": 2_000, "pods": 1}
    assert list(node.pods) == [k]
    assert log.state.free_by_node(GPU) == {"gpu-0": 5}
    assert log.state.pods_by_phase[PENDING] == {} and list(log.state.pods_by_phase[RUNNING]) == [k]
    assert_indexes_consistent(log.state)


def test_pod_finished_frees_the_node(log: Log) -> None:
    k = log.pod(pod("a", gpu=3))
    log.bind(k, "gpu-0")
    log.finish(k, t=900)
    p, node = log.state.pods[k], log.state.nodes["gpu-0"]
    assert (p.phase, p.finished_t, p.node) == (SUCCEEDED, 900, "gpu-0")
    assert node.free(GPU) == 8 and node.used.get("pods") == 0 and dict(node.pods) == {}
    assert list(log.state.pods_by_phase[SUCCEEDED]) == [k]
    assert_indexes_consistent(log.state)


def test_scale_up_counts_as_requested_and_outstanding(log: Log) -> None:
    log.scale_up("gpu", 2, t=10)
    g = log.state.node_groups["gpu"]
    assert (g.requested, g.outstanding, g.target_size) == (2, 2, 3)
    assert log.state.scale_ups == [(10, "gpu", 2)]
    log.node("gpu-1", group="gpu", ready=False, initial=False)
    assert (g.created, g.outstanding, g.target_size) == (2, 1, 3)


# ---------------------------------------------------------------- offsets and versions


def test_applying_an_offset_twice_changes_nothing(log: Log) -> None:
    k = log.pod(pod("a", gpu=1))
    rec = record(PodBound(pod=k, node="gpu-0"), t=99)
    state = log.state
    assert state.apply(log.offset + 1, rec) is True
    snapshot = copy.deepcopy(state)
    assert state.apply(log.offset + 1, rec) is False
    assert state.apply(1, rec) is False  # any old offset
    assert state == snapshot
    assert state.anomalies == []
    assert state.nodes["gpu-0"].used[GPU] == 1


def test_offsets_must_start_after_zero() -> None:
    state = ClusterState()
    assert state.apply(0, record(NodeReady(name="x"))) is False
    assert state.offset == 0 and state.anomalies == []


def test_a_gap_is_applied_and_noted() -> None:
    state = ClusterState()
    state.apply(1, record(RunStarted(scenario="s", seed=1, config={})))
    assert state.apply(5, record(PodCreated(pod=checked_pod(pod("a"))))) is True
    assert state.offset == 5 and "pod/default/a" in state.pods
    assert any("gap" in a for a in state.anomalies)


def test_versions_are_the_offset_of_the_last_writer(log: Log) -> None:
    a = log.pod(pod("a", gpu=1))
    off_a = log.offset
    b = log.pod(pod("b", gpu=1))
    off_b = log.offset
    assert log.state.version(a) == off_a and log.state.version(b) == off_b
    bind = log.bind(a, "gpu-0")
    assert log.state.version(a) == bind and log.state.version("node/gpu-0") == bind
    assert log.state.version(b) == off_b  # untouched
    un = log.unschedulable(b)
    assert log.state.version(b) == un and log.state.version("node/gpu-0") == bind
    up = log.scale_up("gpu", 1)
    assert log.state.version("group/gpu") == up
    created = log.node("gpu-1", group="gpu", ready=False, initial=False)
    assert log.state.version("group/gpu") == created and log.state.version("node/gpu-1") == created
    assert log.state.version("pod/default/never") == 0


def test_one_record_several_events_one_version(log: Log) -> None:
    a, b = log.pod(pod("a", gpu=1)), log.pod(pod("b", gpu=1))
    off = log.append(PodBound(pod=a, node="gpu-0"), PodBound(pod=b, node="gpu-0"))
    assert {k: log.state.version(k) for k in (a, b, "node/gpu-0")} == {a: off, b: off, "node/gpu-0": off}
    assert log.state.nodes["gpu-0"].used[GPU] == 2
    assert log.state.events_applied == sum(len(r.events) for r in log.records)


def test_fold_of_the_same_records_is_the_same_state(log: Log) -> None:
    k = log.pod(pod("a", gpu=1))
    log.bind(k, "gpu-0")
    assert fold(log.records) == log.state


# ---------------------------------------------------------------- anomalies, not exceptions


def test_double_bind_is_an_anomaly_and_changes_nothing(log: Log) -> None:
    log.node("gpu-1", group="gpu")
    k = log.pod(pod("a", gpu=2))
    log.bind(k, "gpu-0")
    log.bind(k, "gpu-1")
    assert log.state.pods[k].node == "gpu-0"
    assert log.state.nodes["gpu-1"].used.get(GPU, 0) == 0 and log.state.nodes["gpu-0"].used[GPU] == 2
    assert len(log.state.anomalies) == 1 and "bound twice" in log.state.anomalies[0]
    assert_indexes_consistent(log.state)


@pytest.mark.parametrize(
    "event, words",
    [
        (PodBound(pod="pod/default/ghost", node="gpu-0"), "unknown pod or node"),
        (PodBound(pod="pod/default/real", node="ghost"), "unknown pod or node"),
        (PodUnschedulable(pod="pod/default/ghost", reason="Unschedulable", message="m", cause="c"), "unknown pod"),
        (PodFinished(pod="pod/default/ghost"), "finished but was not running"),
        (PodFinished(pod="pod/default/real"), "finished but was not running"),  # still pending
        (NodeReady(name="ghost"), "unknown node"),
        (ScaleUpRequested(group="ghost", delta=1), "unknown group"),
        (NodeCreated(name="x-0", group="ghost", node={"metadata": {"name": "x-0"}}), "unknown group"),
    ],
)
def test_senseless_events_are_anomalies(log: Log, event: AnyEvent, words: str) -> None:
    log.pod(pod("real", gpu=1))
    before = copy.deepcopy(log.state.pods)
    offset = log.append(event)
    assert len(log.state.anomalies) == 1
    assert log.state.anomalies[0].startswith(f"offset {offset}:") and words in log.state.anomalies[0]
    assert log.state.pods == before
    assert log.state.nodes["gpu-0"].used == {}
    assert_indexes_consistent(log.state)


def test_node_created_twice_is_an_anomaly_and_keeps_the_first(log: Log) -> None:
    k = log.pod(pod("a", gpu=1))
    log.bind(k, "gpu-0")
    log.node("gpu-0", group="gpu", template=node_template(gpu=1), ready=False)
    node = log.state.nodes["gpu-0"]
    assert node.allocatable[GPU] == 8 and node.ready and list(node.pods) == [k]
    assert log.state.node_groups["gpu"].created == 1
    assert any("created twice" in a for a in log.state.anomalies)


def test_pod_created_twice_is_an_anomaly_and_keeps_the_first(log: Log) -> None:
    k = log.pod(pod("a", gpu=1))
    log.bind(k, "gpu-0")
    log.pod(pod("a", gpu=5))
    assert log.state.pods[k].requests == {GPU: 1} and log.state.pods[k].phase == RUNNING
    assert any("created twice" in a for a in log.state.anomalies)
    assert_indexes_consistent(log.state)


def test_indexes_stay_consistent_through_a_busy_log(log: Log) -> None:
    log.node("gpu-1", group="gpu", ready=False, initial=False)
    keys = [log.pod(pod(f"p{i}", gpu=1 + i % 3, cpu="1")) for i in range(8)]
    for i, k in enumerate(keys[:6]):
        log.bind(k, "gpu-0" if i % 2 else "gpu-1")
        assert_indexes_consistent(log.state)
    log.ready("gpu-1")
    for k in keys[:3]:
        log.finish(k)
        assert_indexes_consistent(log.state)
    log.bind(keys[6], "gpu-1")
    log.bind(keys[0], "gpu-0")  # finished already: anomaly, no change
    assert_indexes_consistent(log.state)
    assert sum(len(v) for v in log.state.pods_by_phase.values()) == len(log.state.pods) == 8


def test_failed_pod_is_indexed_under_its_own_phase(log: Log) -> None:
    k = log.pod(pod("a", gpu=1))
    log.bind(k, "gpu-0")
    log.finish(k, phase="Failed")
    assert log.state.pods[k].phase == "Failed"
    assert k not in log.state.pods_by_phase[SUCCEEDED]
    assert_indexes_consistent(log.state)
