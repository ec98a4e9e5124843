"""Whether a new node's DRA devices are ready, as cluster-autoscaler decides it (release profiles).

processors/customresources/dra_processor.go `FilterOutNodesWithUnreadyResources`: a Ready node of a node group
whose template (TemplateNodeInfo) has ResourceSlices is ready only when its published slices match the
template's, pool by pool (`isEqualResourceSlices`): every (driver, pool) of the template must find a pool of
the node with the same driver and the same set of device names (pool names are not compared; each node pool
matches one template pool; extra pools on the node are fine). Otherwise the node counts as unready
(`ResourceUnready`): an upcoming node for scale-up, not a place to schedule.

What upstream compares per pool is the device set of one slice (`getDevicesBySpecs` keys a map by (pool,
driver) and each slice of the pool overwrites the entry: the last slice listed wins). So a node whose pool is
published partly (fewer slices than `resourceSliceCount`, or slices of two generations) is ready when the slice
listed last has the devices of the template's last slice of that pool, and unready otherwise, whatever the
others hold. dralab lists a node's slices in the order they were published and a template's in template order.
Which generation or how many slices a pool has is not compared either: the scheduler's allocator, not this
check, refuses an incomplete pool.

dralab's legacy model (kept for legacy logs: capacity.py `devices_unpublished`) instead waits until every slice
the group's templates name has been published.
"""

from __future__ import annotations

from ...state.cluster import ClusterState, NodeState


def dra_resources_ready(view: ClusterState, node: NodeState) -> bool:
    """`isEqualResourceSlices` of the node's published slices and its group's template slices; True for a node
    of no group, or of a group whose template has no slices (upstream keeps such nodes as they are)."""
    group = view.node_groups.get(node.group)
    if group is None or not group.resource_slices:
        return True
    template: dict[str, frozenset[str]] = {}  # a group's slices of one driver form one pool on each node
    for manifest in group.resource_slices:
        spec = manifest["spec"]
        template[str(spec["driver"])] = frozenset(str(d.get("name")) for d in spec.get("devices") or [])
    published: dict[tuple[str, str], frozenset[str]] = {}
    for _, slc in view.dra.slice_index().by_node.get(node.name, ()):
        published[(slc.driver, slc.pool)] = frozenset(d.id.device for d in slc.devices)
    for driver, devices in template.items():
        match = next((k for k, v in published.items() if k[0] == driver and v == devices), None)
        if match is None:
            return False
        del published[match]
    return True
