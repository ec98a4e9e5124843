"""NodeUnschedulable (pkg/scheduler/framework/plugins/nodeunschedulable), with the not-ready taint that
upstream's TaintToleration rejects: a NotReady or cordoned node takes no new pod.

UnschedulableAndUnresolvable, as upstream: no room freed on the node changes the answer."""

from __future__ import annotations

from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable

NAME = "NodeUnschedulable"
EXTENSION_POINTS = (ExtensionPoint.FILTER,)
_NOT_READY = unresolvable("node(s) were not ready", "not-ready", NAME)
_CORDONED = unresolvable("node(s) were unschedulable", "not-ready", NAME)


def node_ready(pod: PodState, node: NodeState, used: dict[str, int]) -> Status | None:
    """Filter: a NotReady node, then a cordoned one (spec.unschedulable)."""
    if not node.ready:
        return _NOT_READY
    if node.manifest.get("spec", {}).get("unschedulable"):
        return _CORDONED
    return None
