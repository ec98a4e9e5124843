"""TaintToleration (pkg/scheduler/framework/plugins/tainttoleration): a NoSchedule or NoExecute taint the
pod does not tolerate rejects the node; a ProvisioningRequest's booking taint admits its own consumers.

UnschedulableAndUnresolvable, as upstream. `tolerates` is also the snapshot audit's toleration check.

Score (with the scheduler configuration, scoring.py): the node's PreferNoSchedule taints the pod's
tolerations (those of effect PreferNoSchedule or none) do not tolerate, counted, then normalized reversed
over the scored nodes (DefaultNormalizeScore(100, true)): fewer is better. When no node has such a taint
every node scores the same, so PreScore skips the plugin (a constant added to all nodes picks the same one)."""

from __future__ import annotations

from typing import Any

from ...kube.provreq import BOOKING_TAINT, booking_value, consumed_request
from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable
from .node_affinity import default_normalize

NAME = "TaintToleration"
EXTENSION_POINTS = (ExtensionPoint.FILTER, ExtensionPoint.PRE_SCORE, ExtensionPoint.SCORE)


def tolerates(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    """v1 Toleration.ToleratesTaint (k8s.io/api/core/v1/toleration.go)."""
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("key") and tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator", "Equal") == "Exists":
            return True
        if tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def taints(pod: PodState, node: NodeState, used: dict[str, int]) -> Status | None:
    """Filter: the first untolerated NoSchedule/NoExecute taint, in the node's order."""
    for taint in node.taints:
        # a ProvisioningRequest's reserved capacity (autoscaler.reserveBookings): its consumers only
        if taint.get("key") == BOOKING_TAINT and booking_value(consumed_request(pod.manifest)) == taint.get("value"):
            continue
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(taint, pod.tolerations):
            return unresolvable(f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}",
                                "taint", NAME)
    return None


def intolerable_prefer_no_schedule(node_taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> int:
    """countIntolerableTaintsPreferNoSchedule."""
    return sum(1 for t in node_taints if t.get("effect") == "PreferNoSchedule" and not tolerates(t, tolerations))


_UNSEEN = object()  # no decision seen yet


class TaintTolerationScore:
    NAME = NAME
    POINTWISE = False  # normalized over the scored nodes

    def __init__(self, args: dict[str, Any], nonzero: Any = None) -> None:
        self._cycle: object = _UNSEEN
        self._tainted: list[NodeState] = []
        self._manifests: list[dict[str, Any]] = []  # the nodes' manifests `_tainted` was read from

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> Any | None:
        """The pod's tolerations that can tolerate PreferNoSchedule (getAllTolerationPreferNoSchedule);
        None when no node of the decision has a PreferNoSchedule taint the pod does not tolerate."""
        if cycle is not self._cycle:
            self._cycle = cycle
            manifests = [n.manifest for n in nodes]  # the fold replaces a node's manifest, never edits it
            if manifests != self._manifests:
                self._manifests = manifests
                self._tainted = [n for n in nodes if any(t.get("effect") == "PreferNoSchedule" for t in n.taints)]
        if not self._tainted:
            return None
        tolerations = [t for t in pod.tolerations if t.get("effect") in (None, "", "PreferNoSchedule")]
        if not any(intolerable_prefer_no_schedule(n.taints, tolerations) for n in self._tainted):
            return None
        return tolerations

    def score(self, state: Any, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        return intolerable_prefer_no_schedule(node.taints, state)

    def normalize(self, state: Any, scores: dict[str, int]) -> None:
        default_normalize(scores, True)
