"""NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity): spec.nodeSelector and the required node
affinity (requiredDuringSchedulingIgnoredDuringExecution) against the node's labels and name.

UnschedulableAndUnresolvable, as upstream: only another node (or other labels) can satisfy it."""

from __future__ import annotations

from ...kube.nodeselector import node_selector_matches
from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable

NAME = "NodeAffinity"
EXTENSION_POINTS = (ExtensionPoint.FILTER,)
_MISMATCH = unresolvable("node(s) didn't match Pod's node affinity/selector", "selector", NAME)


def node_selector(pod: PodState, node: NodeState, used: dict[str, int]) -> Status | None:
    """Filter: every nodeSelector label, then the required affinity's terms."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return _MISMATCH
    affinity = (pod.manifest.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not node_selector_matches(required, labels, node.name):
        return _MISMATCH
    return None
