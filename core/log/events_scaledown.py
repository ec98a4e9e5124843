"""Events of cluster-autoscaler's scale-down as it records them (release profiles only; the tagged union and the
codec are in :mod:`.events`).

`ScaleDownReported` is one v1 Event the autoscaler writes, with upstream's reason and message:
- on the node it taints: ScaleDown "marked the node as toBeDeleted/unschedulable" (core/scaledown/actuation/
  actuator.go taintNode), and once it is deleted ScaleDown "nodes removed by cluster autoscaler"
  (actuation/delete_in_batch.go);
- on its status ConfigMap (kind ConfigMap, name cluster-autoscaler-status): ScaleDownEmpty "Scale-down: removing
  empty node %q" (deleteAsyncEmpty) or ScaleDown "Scale-down: removing node %s, utilization: %v, pods to
  reschedule: %s" (deleteAsyncDrain);
- on each pod a drain evicts: ScaleDown "deleting pod for node scale down" (actuation/drain.go evictPod);
- on a node whose deletion was aborted: ScaleDownFailed (Warning) with the abort's error, e.g. "failed to delete
  empty node %q, new pods scheduled" (actuator.go deleteNodesAsync), after which the taint is removed.

`NodesUnremovable` carries the reasons (simulator.UnremovableReason) the planner found nodes unremovable for,
only those that changed since the last such event (the fold keeps the current map, core/state/scale_down.py):
upstream exposes them in its logs and the unremovable_nodes_count metric, not as API events.
"""

from __future__ import annotations

from .event_base import Event

STATUS_CONFIGMAP = "cluster-autoscaler-status"


class ScaleDownReported(Event, tag="ScaleDownReported", frozen=True):
    kind: str  # the involved object's kind: Node | Pod | ConfigMap
    name: str  # its name ("namespace/name" for a pod, as dralab keys pods)
    reason: str  # ScaleDown | ScaleDownEmpty | ScaleDownFailed
    message: str
    severity: str = "Normal"  # the v1 Event's type: Normal | Warning
    node: str = ""  # on the status ConfigMap: the node it is about (upstream names it in the message only)


class NodesUnremovable(Event, tag="NodesUnremovable", frozen=True):
    # (node, reason) for each node whose reason changed; reason "" when the node is no longer unremovable
    # (removable, tainted for deletion or gone)
    nodes: tuple[tuple[str, str], ...]
