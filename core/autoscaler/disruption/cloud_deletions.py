"""What cluster-autoscaler does when the cloud fails to delete a node it scaled down.

The deletion runs in a goroutine of the actuator (core/scaledown/actuation/delete_in_batch.go): when
`NodeGroup.DeleteNodes` returns an error, `CleanUpAndRecordFailedScaleDownEvent` writes a `ScaleDownFailed`
event, removes the `ToBeDeletedByClusterAutoscaler` taint (`taints.CleanToBeDeleted`) and ends the
deletion in the tracker. The node stays, drained and billed, and is a scale-down candidate again once it
has been unneeded for `--scale-down-unneeded-time`. No cooldown follows: `RegisterFailedScaleDown` is empty
in 1.34-1.37 (clusterstate.go) and `--scale-down-delay-after-failure` is armed only by an error of the
loop's own `StartDeletion` (static_autoscaler.go `lastScaleDownFailTime`), not by the goroutine's.

Here the cloud's `NodeDeletionFailed` (core/controllers/cloud_ops.py) plays the event; the loop that first
sees it removes the taint. A deletion still under way is left alone: `delete_node` asks the cloud only once.
"""

from __future__ import annotations

from ...cluster.nodes import set_taints
from ...log.events import AnyEvent
from ...state.cluster import ClusterState
from .candidates import TAINT_KEY


def failed_deletions(view: ClusterState) -> list[AnyEvent]:
    """Remove the ToBeDeleted taint of nodes whose deletion the cloud failed after they were tainted."""
    ops = view.cloud_ops
    if not ops.failed_deletions:
        return []
    events: list[AnyEvent] = []
    for name, failed_t in ops.failed_deletions.items():
        node = view.nodes.get(name)
        if node is None or name in ops.deleting:
            continue
        for taint in node.taints:
            if taint.get("key") == TAINT_KEY and int(str(taint.get("value") or "0") or 0) <= failed_t:
                events += set_taints(view, name, [t for t in node.taints if t.get("key") != TAINT_KEY])
                break
    return events
