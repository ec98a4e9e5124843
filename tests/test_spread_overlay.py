"""The decision's pods-per-node overlay (scheduler/placement.py over Cycle.moves): bindings, a preemption dry
run's removals and restores, and rollbacks change what PodTopologySpread and InterPodAffinity count, and the
counts kept incrementally always equal a recount."""

from __future__ import annotations

import random

from builders import Log, node_template, pod

from dralab.core.scheduler.cycle import Cycle
from dralab.core.scheduler.placement import attempt_filter, cycle_pods
from dralab.core.scheduler.plugins import inter_pod_affinity as ipa
from dralab.core.scheduler.plugins import pod_topology_spread as pts

SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "web"}}}]
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}]}}


def web(name: str, **spec: object) -> dict[str, object]:
    manifest = pod(name, cpu="100m")
    manifest["metadata"]["labels"] = {"app": "web"}
    manifest["spec"].update(spec)
    return manifest


def cluster() -> Log:
    lg = Log()
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        lg.node(name, template=node_template(cpu="8", labels={"zone": zone}))
    for i, node in enumerate(("a1", "a2", "b1")):
        lg.bind(lg.pod(web(f"running-{i}", affinity=ANTI if node == "b1" else None)), node)
    return lg


def recount(cycle: Cycle, incoming: object) -> tuple[object, object]:
    pods = cycle_pods(cycle)
    cs = pts.constraints(incoming, "DoNotSchedule")  # type: ignore[arg-type]
    full = pts.domain_counts(incoming, cs, pods.domain_nodes(), pods)  # type: ignore[arg-type]
    return pods.spread_counts(incoming, cs), full  # type: ignore[arg-type]


def test_removal_restore_and_rollback_are_counted() -> None:
    lg = cluster()
    view = lg.state
    incoming = view.pods[lg.pod(web("new", topologySpreadConstraints=SPREAD))]
    cycle = Cycle(view, random.Random(0))
    got, full = recount(cycle, incoming)
    assert got == full == [{"a": 2, "b": 1}]
    # zone b's pod has anti-affinity against app=web: the new pod cannot go to zone b, and a second in a
    # would make the skew 3 - 1 > 1
    assert attempt_filter(cycle, incoming)(view.nodes["b1"]).message == ipa.EXISTING_ANTI_AFFINITY_NOT_MATCH
    assert attempt_filter(cycle, incoming)(view.nodes["a1"]).message == pts.CONSTRAINTS_NOT_MATCH
    sp = cycle.savepoint()
    victim = view.pods["pod/default/running-2"]
    cycle.remove(victim, [])  # a preemption dry run takes zone b's pod off
    got, full = recount(cycle, incoming)
    assert got == full == [{"a": 2, "b": 0}]
    assert attempt_filter(cycle, incoming)(view.nodes["b1"]) is None  # no anti-affinity left, skew 0 + 1 - 0
    cycle.restore(victim, [])
    got, full = recount(cycle, incoming)
    assert got == full == [{"a": 2, "b": 1}]
    cycle.remove(view.pods["pod/default/running-0"], [])
    got, full = recount(cycle, incoming)
    assert got == full == [{"a": 1, "b": 1}]
    cycle.rollback(sp)  # everything since the savepoint undone
    got, full = recount(cycle, incoming)
    assert got == full == [{"a": 2, "b": 1}]
    assert attempt_filter(cycle, incoming)(view.nodes["b1"]).message == ipa.EXISTING_ANTI_AFFINITY_NOT_MATCH


def test_pods_bound_earlier_in_the_decision_count() -> None:
    lg = Log()
    for name, zone in (("a1", "a"), ("b1", "b")):
        lg.node(name, template=node_template(cpu="8", labels={"zone": zone}))
    keys = [lg.pod(web(f"w{i}", topologySpreadConstraints=SPREAD)) for i in range(4)]
    from dralab.core.engine.contract import decision_rng
    from dralab.core.scheduler.reactor import Scheduler

    events = Scheduler().react(lg.state, 1, decision_rng(1, "scheduler", lg.state.offset, 1)).events
    bound = {e.pod: e.node for e in events if type(e).__name__ == "PodBound"}
    assert sorted(bound) == sorted(keys)  # 2 + 2: every binding of the decision counted for the next pod
    assert sorted(bound.values()) == ["a1", "a1", "b1", "b1"]
