"""The scheduler's filter chain and what its failures say, apart from the reactor (reactor.py).

Filters are kube-scheduler's filter plugins, each in its module under plugins/ (NodeUnschedulable,
NodeAffinity, TaintToleration, NodeResourcesFit), small pure functions of (pod, node, usage) that answer
with a Status (framework.py) or None; FILTERS is their order. The failure helpers here turn the reasons
counted over nodes into upstream's FitError (message, pending cause, code). They live apart from the
reactor because they hold no decision state and others use them too (the autoscaler's capacity
simulation runs the same filters, the snapshot the same toleration check). reactor.py re-exports the
names callers import from it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from ..kube.provreq import consumed_request
from ..state.cluster import ClusterState, NodeState, PodState
from .framework import Code, FilterPlugin, Status
from .plugins.dynamic_resources import DRA_FAILURE
from .plugins.inter_pod_affinity import AFFINITY_NOT_MATCH, ANTI_AFFINITY_NOT_MATCH, EXISTING_ANTI_AFFINITY_NOT_MATCH
from .plugins.node_affinity import node_selector
from .plugins.node_resources_fit import TOO_MANY_PODS
from .plugins.node_resources_fit import fits_resources as fits_resources
from .plugins.node_unschedulable import node_ready as node_ready
from .plugins.pod_topology_spread import CONSTRAINTS_NOT_MATCH
from .plugins.pod_topology_spread import LABEL_NOT_MATCH as SPREAD_LABEL_NOT_MATCH
from .plugins.taint_toleration import taints
from .plugins.taint_toleration import tolerates as tolerates

Filter = FilterPlugin  # None (Success) or why the pod cannot go on this node (framework.py)
# dralab's pending causes that no room freed or node of the same kind added could resolve: the filters
# that answer them return UnschedulableAndUnresolvable, as upstream's.
UNRESOLVABLE_CAUSES = frozenset({"not-ready", "selector", "taint"})


class NodeUsage(Protocol):
    """Each node's usage by name (a plain dict, or the scheduler's decision overlay `Used`)."""

    def __getitem__(self, name: str, /) -> dict[str, int]: ...


def first_failure(filters: tuple[Filter, ...], pod: PodState, node: NodeState, used: dict[str, int]) -> str | None:
    """The reason (upstream's FitError text) of the first filter that rejects the node, or None: what the
    scheduler's node lists keep per node (a Diagnosis counts reasons, not Statuses)."""
    for f in filters:
        status = f(pod, node, used)
        if status is not None:
            return status.message
    return None


FILTERS: tuple[Filter, ...] = (node_ready, node_selector, taints, fits_resources)
# The filters whose answer depends only on the node and the pod's placement constraints, not on
# what is in use: within one decision they are evaluated once per distinct set of constraints.
STATIC_FILTERS: tuple[Filter, ...] = (node_ready, node_selector, taints)


def num_feasible_nodes_to_find(num_all_nodes: int) -> int:
    """percentageOfNodesToScore's adaptive default (pkg/scheduler/schedule_one.go,
    numFeasibleNodesToFind): all nodes below 100, else 50% - nodes/125 (at least 5%), at least 100."""
    if num_all_nodes < 100:
        return num_all_nodes
    percentage = max(50 - num_all_nodes // 125, 5)
    return max(num_all_nodes * percentage // 100, 100)


def static_shape(pod: PodState) -> str:
    spec = pod.manifest.get("spec", {})
    return repr((pod.node_selector, (spec.get("affinity") or {}).get("nodeAffinity"), pod.tolerations,
                 consumed_request(pod.manifest)))


def fragmented(view: ClusterState, pod: PodState, used: NodeUsage) -> bool:
    """Enough free extended resource in total over Ready nodes, but no node has enough (`used`: the
    decision's usage, bindings made earlier in it included): refines a `capacity` pending cause."""
    wanted = {r: a for r, a in pod.requests.items() if "/" in r and a > 0}
    if not wanted:
        return False
    ready = [n for n in view.nodes.values() if n.ready]
    for resource, amount in wanted.items():
        free = [n.allocatable.get(resource, 0) - used[n.name].get(resource, 0) for n in ready]
        if sum(free) >= amount and max(free, default=0) < amount:
            return True
    return False


class ShapeMemo:
    """`static_shape` per pod across decisions, a cache a reactor holds.

    Why: the scheduler and the autoscaler need every pending pod's shape in every decision, and it is a
    repr of the pod's placement constraints. It depends on the pod's manifest alone, which the fold
    replaces (PodUngated), never changes in place: an answer is kept with the manifest it came from
    and used only while the pod still has that very manifest."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[str, tuple[dict[str, Any], str]] = {}

    def __call__(self, pod: PodState) -> str:
        hit = self._memo.get(pod.key)
        if hit is not None and hit[0] is pod.manifest:
            return hit[1]
        shape = static_shape(pod)
        if len(self._memo) > 65_536:
            self._memo.clear()
        self._memo[pod.key] = (pod.manifest, shape)
        return shape


def unschedulable_message(total: int, reasons: Counter[str]) -> str:
    """Upstream's FitError text (pkg/scheduler/framework/types.go, FitError.Error): the
    '<count> <reason>' strings sorted as strings (sort.Strings), e.g.
    '0/3 nodes are available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu.'."""
    parts = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."


_PLACEMENT_CAUSES = {
    SPREAD_LABEL_NOT_MATCH: (2, "selector"),
    CONSTRAINTS_NOT_MATCH: (5, "spread"),
    AFFINITY_NOT_MATCH: (5, "affinity"),
    ANTI_AFFINITY_NOT_MATCH: (5, "affinity"),
    EXISTING_ANTI_AFFINITY_NOT_MATCH: (5, "affinity"),
}


# The stage at which a node failed, from furthest to closest: a pod that failed a later filter on
# some node came closer there, so that node's failure is the pod's pending reason.
def _stage(reason: str) -> tuple[int, str]:
    if reason.startswith(DRA_FAILURE):
        return 6, "capacity"
    # PodTopologySpread and InterPodAffinity run after NodeResourcesFit (placement.py); a node missing a spread
    # constraint's key fails as NodeAffinity's mismatch does: unresolvable
    if reason in _PLACEMENT_CAUSES:
        return _PLACEMENT_CAUSES[reason]
    if reason.startswith("Insufficient") or reason == TOO_MANY_PODS:
        extended = "/" in reason.removeprefix("Insufficient ")
        return 4, "capacity" if extended else "resources"
    if reason.startswith("node(s) had untolerated taint"):
        return 3, "taint"
    if reason.startswith("node(s) didn't match"):
        return 2, "selector"
    return 1, "not-ready"


def fit_error(total: int, reasons: Counter[str]) -> Status:
    """The pod's Status after no node passed the filters (upstream's FitError): the FitError text and the
    pending cause; UnschedulableAndUnresolvable when the node that came closest failed a filter that
    answers so (then every node did: those filters come first), else Unschedulable."""
    cause = pending_cause(reasons)
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if cause in UNRESOLVABLE_CAUSES else Code.UNSCHEDULABLE
    return Status(code, unschedulable_message(total, reasons), cause)


def pending_cause(reasons: Counter[str]) -> str:
    """dralab's structured pending reason (issue 4's categories) from the per-node failures:
    the category of the node that came closest; `capacity` on a cluster with no node at all."""
    if not reasons:
        return "capacity"
    return max(_stage(r) for r in reasons)[1]
