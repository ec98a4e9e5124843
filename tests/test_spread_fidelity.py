"""Spread/affinity details as upstream (helper "fidelity"): NotReady nodes are topology domains in release
profiles (upstream counts every node of its snapshot: podtopologyspread/filtering.go calPreFilterState over
snapshot.NodeInfos().List()), unless nodeTaintsPolicy Honor and the pod does not tolerate the lifecycle
controller's not-ready taint; the legacy model keeps counting the Ready nodes only (its logs never change)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from builders import Log, node_template, pod

from dralab.core.engine.contract import decision_rng
from dralab.core.kube.versions import make_profile, profile_config
from dralab.core.scheduler.cycle import Cycle
from dralab.core.scheduler.placement import cycle_pods
from dralab.core.scheduler.plugins import pod_topology_spread as pts
from dralab.core.scheduler.reactor import Scheduler

NOT_READY_NO_SCHEDULE = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}
# what DefaultTolerationSeconds adds to every pod: NoExecute only, so it does not make a NotReady node a domain
DEFAULT_NO_EXECUTE = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                      "tolerationSeconds": 300}


def web(name: str, policy: str | None = None, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    manifest = pod(name, cpu="100m")
    manifest["metadata"]["labels"] = {"app": "web"}
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                  "labelSelector": {"matchLabels": {"app": "web"}}}
    if policy is not None:
        constraint["nodeTaintsPolicy"] = policy
    manifest["spec"]["topologySpreadConstraints"] = [constraint]
    if tolerations:
        manifest["spec"]["tolerations"] = tolerations
    return manifest


def cluster(incoming: dict[str, Any]) -> tuple[Log, str]:
    """Zone a: a Ready node with one web pod; zone b: a NotReady node (registered, never Ready)."""
    lg = Log()
    lg.node("a1", template=node_template(cpu="8", labels={"zone": "a"}))
    lg.node("b1", template=node_template(cpu="8", labels={"zone": "b"}), ready=False)
    lg.bind(lg.pod(web("running")), "a1")
    return lg, lg.pod(incoming)


def decide(lg: Log, release: bool) -> dict[str, str]:
    kubernetes = profile_config(make_profile("1.37")) if release else None
    events = Scheduler(kubernetes=kubernetes).react(lg.state, 1, decision_rng(1, "scheduler", lg.state.offset,
                                                                               1)).events
    return {e.pod: e.node for e in events if type(e).__name__ == "PodBound"}


@pytest.mark.parametrize(("policy", "tolerations", "counted"), [
    (None, None, True),  # default Ignore: the NotReady node's zone is a domain with 0 pods
    ("Ignore", [NOT_READY_NO_SCHEDULE], True),
    ("Honor", None, False),  # the not-ready NoSchedule taint is not tolerated: not a domain
    ("Honor", [DEFAULT_NO_EXECUTE], False),
    ("Honor", [NOT_READY_NO_SCHEDULE], True),
])
def test_not_ready_node_is_a_domain_in_release_profiles(policy: str | None, tolerations: Any, counted: bool) -> None:
    lg, key = cluster(web("new", policy, tolerations))
    incoming = lg.state.pods[key]
    cycle = Cycle(lg.state, random.Random(0))
    pods = cycle_pods(cycle, upstream=True)
    cs = pts.constraints(incoming, "DoNotSchedule")
    assert pods.spread_counts(incoming, cs) == [{"a": 1, "b": 0} if counted else {"a": 1}]
    # zone b's 0 is the global minimum: a second pod in zone a makes the skew 2 > 1, and b1 takes no pod
    assert decide(lg, release=True) == ({} if counted else {key: "a1"})


@pytest.mark.parametrize("policy", [None, "Honor"])
def test_legacy_model_counts_ready_nodes_only(policy: str | None) -> None:
    lg, key = cluster(web("new", policy, [NOT_READY_NO_SCHEDULE]))
    cycle = Cycle(lg.state, random.Random(0))
    assert [n.name for n in cycle_pods(cycle).domain_nodes()] == ["a1"]
    assert decide(lg, release=False) == {key: "a1"}


@pytest.mark.parametrize("release", [True, False])
def test_liveness_check_counts_the_same_domains_as_the_scheduler(release: bool) -> None:
    """The liveness invariant's own scheduling pass (checks/liveness.py) must not call a pod fitting that the
    release profile's scheduler keeps pending (a NotReady zone holds the minimum at 0)."""
    from dralab.core.checks.liveness import Liveness

    lg, key = cluster(web("new"))
    scheduler = Scheduler(kubernetes=profile_config(make_profile("1.37")) if release else None)
    assert Liveness(scheduler=scheduler).fitting(lg.state) == ([] if release else [key])
    assert decide(lg, release) == ({} if release else {key: "a1"})


class _Sim:
    """capacity.SimNode as SimPlacement sees it."""

    def __init__(self, node: Any) -> None:
        self.node, self.pods = node, []


@pytest.mark.parametrize("release", [True, False])
def test_autoscaler_snapshot_counts_not_ready_nodes_as_cluster_autoscaler(release: bool) -> None:
    """CA's snapshot holds all nodes but the NotStarted ones it replaces by upcoming templates: a NotReady node
    that is not an upcoming template (here: of no node group) is a domain of the simulation's spread counts in
    release profiles; the legacy model leaves it out."""
    from dralab.core.autoscaler.simulation.sim_pods import SimPlacement

    lg, key = cluster(web("new"))
    view = lg.state
    incoming = view.pods[key]
    cs = pts.constraints(incoming, "DoNotSchedule")
    placement = SimPlacement(view, lambda n: n.ready, None, release)
    assert placement.spread_counts(incoming, cs) == [{"a": 1, "b": 0} if release else {"a": 1}]
    # once b1 is an upcoming template (its group live), the template stands for it, as CA's NotStarted rule
    replaced = SimPlacement(view, lambda n: n.ready, None, release)
    upcoming = dataclasses.replace(view.nodes["b1"], name="upcoming-b1")
    replaced.register(_Sim(upcoming))  # type: ignore[arg-type]
    assert [n.name for n in replaced.snapshot_nodes()] == ["a1", "upcoming-b1"]
