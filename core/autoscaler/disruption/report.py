"""What scale-down says, as cluster-autoscaler says it (release profiles): the v1 Events of its actuator and the
reasons its planner finds nodes unremovable for (core/log/events_scaledown.py has the upstream sources).

Reasons (simulator/cluster.go UnremovableReason), in the order the planner meets them here:
  CurrentlyBeingDeleted         the node carries ToBeDeletedByClusterAutoscaler
  NotAutoscaled                 no node group
  ScaleDownDisabledAnnotation   cluster-autoscaler.kubernetes.io/scale-down-disabled: "true" (eligibility.go)
  ScaleDownUnreadyDisabled      unready, and --scale-down-unready-enabled=false
  NodeGroupMinSizeReached       its group is at min size (counting the nodes already leaving)
  NotUnneededLongEnough         needed in this loop (pods nominated, in flight or placed there by
                                FilterOutSchedulable), or under the threshold for less than --scale-down-unneeded-time
  NotUnderutilized              utilization at or above the threshold
  NotUnreadyLongEnough          unready for less than --scale-down-unready-time
  BlockedByPod                  a pod that may not move (drain.py's block reasons: NotReplicated, NotEnoughPdb, ...)
  NoPlaceToMovePods             its pods do not all fit elsewhere
A removable node waiting for a parallelism slot has no reason, as upstream gives none.

Only the reasons that keep a node the planner would otherwise remove are written (`blocking`): a node under its
threshold and unneeded long enough, kept by its group's min size, an annotation, a pod or the lack of room. The
ordinary states (in use: NotUnderutilized; recently in use: NotUnneededLongEnough, NotUnreadyLongEnough; being
deleted, which the ScaleDown events show) are left out, so that a run whose nodes are simply busy writes no
record it did not write before (a new record moves every later view offset, and with them the seeded choices).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...log.events import AnyEvent, NodesUnremovable, ScaleDownReported
from ...log.events_scaledown import STATUS_CONFIGMAP
from ...state.cluster import ClusterState, NodeState, PodState
from ...state.scale_down import REMOVED_MESSAGE

BEING_DELETED = "CurrentlyBeingDeleted"
NOT_AUTOSCALED = "NotAutoscaled"
DISABLED_ANNOTATION = "ScaleDownDisabledAnnotation"
UNREADY_DISABLED = "ScaleDownUnreadyDisabled"
MIN_SIZE = "NodeGroupMinSizeReached"
NOT_UNNEEDED_LONG_ENOUGH = "NotUnneededLongEnough"
NOT_UNREADY_LONG_ENOUGH = "NotUnreadyLongEnough"
NOT_UNDERUTILIZED = "NotUnderutilized"
BLOCKED_BY_POD = "BlockedByPod"
NO_PLACE_TO_MOVE_PODS = "NoPlaceToMovePods"


def marked(node: str, moving: list[PodState], util: float) -> list[AnyEvent]:
    """The taint's events: the status ConfigMap's ScaleDownEmpty or ScaleDown (utilization as a number: upstream
    prints its UtilizationInfo struct) and the node's ScaleDown."""
    if moving:
        pods = ",".join(p.key.split("/", 1)[1] for p in moving)
        status = ScaleDownReported("ConfigMap", STATUS_CONFIGMAP, "ScaleDown",
                                   f"Scale-down: removing node {node}, utilization: {util:.3f}, "
                                   f"pods to reschedule: {pods}", node=node)
    else:
        status = ScaleDownReported("ConfigMap", STATUS_CONFIGMAP, "ScaleDownEmpty",
                                   f'Scale-down: removing empty node "{node}"', node=node)
    return [status, ScaleDownReported("Node", node, "ScaleDown", "marked the node as toBeDeleted/unschedulable")]


def evicted(pods: list[str]) -> list[AnyEvent]:
    return [ScaleDownReported("Pod", key, "ScaleDown", "deleting pod for node scale down") for key in pods]


def removed(node: str) -> list[AnyEvent]:
    return [ScaleDownReported("Node", node, "ScaleDown", REMOVED_MESSAGE)]


def failed(node: str, message: str) -> list[AnyEvent]:
    return [ScaleDownReported("Node", node, "ScaleDownFailed", message, "Warning")]


def reasons_changed(view: ClusterState, reasons: dict[str, str]) -> list[AnyEvent]:
    """One NodesUnremovable with the nodes whose reason is not the one the log last gave ("" : none now), in the
    view's node order, then the nodes gone since; none when nothing changed."""
    known = view.scale_down.unremovable
    changes = [(name, reason) for name, reason in reasons.items() if known.get(name, "") != reason]
    changes += [(name, "") for name in known if name not in reasons]
    return [NodesUnremovable(tuple(changes))] if changes else []


EARLY = (NOT_AUTOSCALED, DISABLED_ANNOTATION, UNREADY_DISABLED, MIN_SIZE)  # decided before utilization and time
LATE = (BLOCKED_BY_POD, NO_PLACE_TO_MOVE_PODS)  # decided after them: the node was under its threshold long enough


def blocking(of: Callable[[NodeState], Any], view: ClusterState, reasons: dict[str, str],
             waited: Callable[[NodeState], bool]) -> dict[str, str]:
    """The reasons worth writing: those that keep a node under its threshold and unneeded long enough. `of`: the
    ScaleDown a node's group sees (its threshold and utilization)."""
    out = {}
    for name, reason in reasons.items():
        if reason in LATE:
            out[name] = reason
        elif reason in EARLY:
            node = view.nodes[name]
            own = of(node)
            if waited(node) and own._utilization(view, node, True) < own.threshold(node):
                out[name] = reason
    return out
