"""Nominated pods in PodTopologySpread and InterPodAffinity as upstream (helper "fidelity"):
RunFilterPluginsWithNominatedPods adds, for the node being filtered, the pods nominated to that node whose
priority is at least the pod's, runs the filters, and runs them again without those pods; the node must pass
both. Release profiles follow it (CyclePods.upstream); the legacy model counts every kept nomination as a
placed pod, everywhere (its logs never change)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import Log, node_template, pod

from dralab.core.scheduler.cycle import Cycle
from dralab.core.scheduler.placement import attempt_filter, cycle_pods
from dralab.core.scheduler.plugins import inter_pod_affinity as ipa
from dralab.core.scheduler.plugins import pod_topology_spread as pts

SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "web"}}}]


def labelled(name: str, app: str, priority: int = 0, **spec: Any) -> dict[str, Any]:
    manifest = pod(name, cpu="100m", priority=priority)
    manifest["metadata"]["labels"] = {"app": app}
    manifest["spec"].update(spec)
    return manifest


def required(kind: str, app: str, key: str) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}]}}


def verdicts(lg: Log, nominated: dict[str, str], incoming: str, upstream: bool) -> dict[str, str | None]:
    """The two plugins' verdict per node for the incoming pod, with `nominated` kept in the decision."""
    view = lg.state
    cycle = Cycle(view, random.Random(0), nominated=nominated)
    cycle_pods(cycle, upstream=upstream)
    node_filter = attempt_filter(cycle, view.pods[incoming])
    out: dict[str, str | None] = {}
    for name, node in view.nodes.items():
        status = None if node_filter is None else node_filter(node)
        out[name] = None if status is None else status.message
    return out


def test_a_nominated_pod_counts_only_on_its_node() -> None:
    """Zone a: a web pod on a1; zone b: a web pod nominated to b1. Upstream, filtering a1 sees zone b empty
    (global minimum 0, skew 2); filtering b1 sees it with the nominated pod (skew 1) and without (skew 1)."""
    lg = Log()
    lg.node("a1", template=node_template(cpu="8", labels={"zone": "a"}))
    lg.node("b1", template=node_template(cpu="8", labels={"zone": "b"}))
    lg.bind(lg.pod(labelled("running", "web")), "a1")
    nominated = lg.pod(labelled("preemptor", "web", priority=10))
    incoming = lg.pod(labelled("new", "web", topologySpreadConstraints=SPREAD))
    assert verdicts(lg, {nominated: "b1"}, incoming, upstream=True) == {"a1": pts.CONSTRAINTS_NOT_MATCH, "b1": None}
    # the legacy model: the nominated pod is in zone b for every node, the minimum is 1
    assert verdicts(lg, {nominated: "b1"}, incoming, upstream=False) == {"a1": None, "b1": None}


def test_affinity_is_not_met_by_a_nominated_pod_alone() -> None:
    """The second pass, without nominated pods: the only db pod is nominated to n1, so the web pod's required
    affinity to db fails there too (upstream's reason: a nominated pod may never arrive)."""
    lg = Log()
    for name in ("n1", "n2"):
        lg.node(name, template=node_template(cpu="8", labels={"kubernetes.io/hostname": name}))
    db = lg.pod(labelled("db", "db", priority=10))
    incoming = lg.pod(labelled("web", "web", affinity=required("podAffinity", "db", "kubernetes.io/hostname")))
    assert verdicts(lg, {db: "n1"}, incoming, upstream=True) == {"n1": ipa.AFFINITY_NOT_MATCH,
                                                                 "n2": ipa.AFFINITY_NOT_MATCH}
    assert verdicts(lg, {db: "n1"}, incoming, upstream=False) == {"n1": None, "n2": ipa.AFFINITY_NOT_MATCH}


@pytest.mark.parametrize(("priority", "n1"), [(10, ipa.ANTI_AFFINITY_NOT_MATCH), (0, ipa.ANTI_AFFINITY_NOT_MATCH),
                                              (-1, None)])
def test_only_nominated_pods_of_at_least_the_pods_priority_count(priority: int, n1: str | None) -> None:
    """The incoming pod (priority 0) has hostname anti-affinity against web; a web pod nominated to n1 counts
    there only if its priority is >= 0 (addGENominatedPods)."""
    lg = Log()
    for name in ("n1", "n2"):
        lg.node(name, template=node_template(cpu="8", labels={"kubernetes.io/hostname": name}))
    other = lg.pod(labelled("preemptor", "web", priority=priority))
    incoming = lg.pod(labelled("new", "db", affinity=required("podAntiAffinity", "web", "kubernetes.io/hostname")))
    assert verdicts(lg, {other: "n1"}, incoming, upstream=True) == {"n1": n1, "n2": None}


def test_a_nominated_pods_anti_affinity_holds_on_its_node_only() -> None:
    """A pod nominated to a1 with zone anti-affinity against web: upstream adds it (AddPod, the filtered node's
    labels) only when a1 is filtered, so a2 in the same zone passes; the legacy model blocks the whole zone."""
    lg = Log()
    for name in ("a1", "a2"):
        lg.node(name, template=node_template(cpu="8", labels={"zone": "a"}))
    other = lg.pod(labelled("guard", "db", priority=10, affinity=required("podAntiAffinity", "web", "zone")))
    incoming = lg.pod(labelled("new", "web"))
    assert verdicts(lg, {other: "a1"}, incoming, upstream=True) == {
        "a1": ipa.EXISTING_ANTI_AFFINITY_NOT_MATCH, "a2": None}
    assert verdicts(lg, {other: "a1"}, incoming, upstream=False) == {
        "a1": ipa.EXISTING_ANTI_AFFINITY_NOT_MATCH, "a2": ipa.EXISTING_ANTI_AFFINITY_NOT_MATCH}
