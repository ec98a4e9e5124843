"""One cluster snapshot per loop for scale-up and scale-down (core/autoscaler/simulation/loop_snapshot.py), and
the scale-down events and unremovable reasons of release profiles (core/autoscaler/disruption/report.py).

The issue-22 case: a pending pod (its Unschedulable condition written before room appeared) fits the empty node
`idle`, unneeded for more than 10 minutes. cluster-autoscaler's FilterOutSchedulable puts the pod on `idle` in
the loop's snapshot and the planner, reading the same snapshot, finds `idle` needed: no taint, no new node. The
legacy profile's scale-down made a snapshot of its own, without the pod: it tainted `idle`, and the next loop,
the pod no longer fitting a node about to go, bought a new one."""

from __future__ import annotations

from typing import Any

from builders import Log, node_template, pod

from dralab.core.autoscaler.reactor import Autoscaler
from dralab.core.engine.contract import decision_rng
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.log.events import (
    AnyEvent,
    NodesUnremovable,
    NodeTaintsChanged,
    PodUnschedulable,
    ScaleDownReported,
    ScaleUpRequested,
)

T = 700_000  # 11m40s: `idle` has been empty since 0


def release() -> dict[str, Any] | None:
    return profile_config(make_profile("1.37"))


def stale_pending() -> Log:
    lg = Log()
    lg.group("cpu", template=node_template(cpu="4", gpu=0))
    lg.node("idle", group="cpu", template=node_template(cpu="4", gpu=0))
    lg.node("busy", group="cpu", template=node_template(cpu="4", gpu=0))
    lg.bind(lg.pod(pod("long", cpu="3")), "busy")
    k = lg.pod(pod("p", cpu="2"), t=T)
    lg.append(PodUnschedulable(pod=k, reason="Unschedulable", message="0/2 nodes are available.", cause="cpu"), t=T)
    return lg


def loop(lg: Log, now: int, kubernetes: dict[str, Any] | None) -> list[AnyEvent]:
    decision = Autoscaler(kubernetes=kubernetes).react(lg.state, now, decision_rng(0, "autoscaler", lg.offset, now))
    lg.append(*decision.events, t=now, source="autoscaler")
    return list(decision.events)


def test_a_node_filter_out_schedulable_filled_is_not_scaled_down_in_the_same_loop() -> None:
    lg = stale_pending()
    events = loop(lg, T, release())
    assert not [e for e in events if isinstance(e, NodeTaintsChanged | ScaleUpRequested)]
    # `idle` is needed in this loop (NotUnneededLongEnough), `busy` in use (NotUnderutilized): ordinary, not written
    assert not [e for e in events if isinstance(e, NodesUnremovable)]
    assert not [e for e in loop(lg, T + 10_000, release()) if isinstance(e, ScaleUpRequested)]


def test_the_legacy_profile_taints_it_and_buys_a_node_for_the_pod() -> None:
    lg = stale_pending()
    taints = [e for e in loop(lg, T, None) if isinstance(e, NodeTaintsChanged)]
    assert [e.name for e in taints] == ["idle"]
    assert [(e.group, e.delta) for e in loop(lg, T + 10_000, None) if isinstance(e, ScaleUpRequested)] == [("cpu", 1)]


def test_empty_node_events_as_upstream_writes_them() -> None:
    lg = Log()
    lg.group("cpu", template=node_template(cpu="4", gpu=0))
    lg.node("idle", group="cpu", template=node_template(cpu="4", gpu=0))
    marked = loop(lg, T, release())
    reports = [(e.kind, e.name, e.reason, e.message) for e in marked if isinstance(e, ScaleDownReported)]
    assert reports == [("ConfigMap", "cluster-autoscaler-status", "ScaleDownEmpty",
                        'Scale-down: removing empty node "idle"'),
                       ("Node", "idle", "ScaleDown", "marked the node as toBeDeleted/unschedulable")]
    assert lg.state.scale_down.deleting == {"idle": "empty"}
    deleted = loop(lg, T + 10_000, release())
    assert [(e.reason, e.message) for e in deleted if isinstance(e, ScaleDownReported)] == [
        ("ScaleDown", "nodes removed by cluster autoscaler")]
    assert lg.state.scale_down.last_delete_t == T  # the deletion started with the taint
    loop(lg, T + 20_000, release())
    assert lg.state.scale_down.unremovable == {}  # the node is gone: its reason too
