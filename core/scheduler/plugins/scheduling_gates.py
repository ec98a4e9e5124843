"""SchedulingGates (pkg/scheduler/framework/plugins/schedulinggates): a pod with any spec.schedulingGates
left is kept out of the queue (PreEnqueue) and shows reason SchedulingGated until the last gate goes.

UnschedulableAndUnresolvable, as upstream: only removing the gates (a PodUngated) lets it in."""

from __future__ import annotations

from ...state.cluster import PodState
from ..framework import ExtensionPoint, Status, unresolvable

NAME = "SchedulingGates"
EXTENSION_POINTS = (ExtensionPoint.PRE_ENQUEUE,)

SCHEDULING_GATED = "SchedulingGated"  # v1.PodReasonSchedulingGated
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def gated(pod: PodState) -> Status | None:
    """PreEnqueue: None when no gate is left, else the rejection naming the gates."""
    gates = pod.manifest.get("spec", {}).get("schedulingGates")
    if not gates:
        return None
    names = [str(g.get("name")) for g in gates]
    return unresolvable(GATED_MESSAGE, "gated", NAME, f"waiting for scheduling gates: {names}")
