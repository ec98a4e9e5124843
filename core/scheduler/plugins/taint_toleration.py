"""TaintToleration (pkg/scheduler/framework/plugins/tainttoleration): a NoSchedule or NoExecute taint the
pod does not tolerate rejects the node; a ProvisioningRequest's booking taint admits its own consumers.

UnschedulableAndUnresolvable, as upstream. `tolerates` is also the snapshot audit's toleration check."""

from __future__ import annotations

from typing import Any

from ...kube.provreq import BOOKING_TAINT, booking_value, consumed_request
from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable

NAME = "TaintToleration"
EXTENSION_POINTS = (ExtensionPoint.FILTER,)


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
