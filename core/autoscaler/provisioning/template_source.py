"""Where a node group's template comes from, for autoscaler#10199 (core/kube/bugs.py): cluster-api's scale-from-zero
template (kubernetes/autoscaler cloudprovider/clusterapi, `InstanceResourceSlices`).

cluster-autoscaler builds a group's template node from one of its healthy nodes when it has one
(MixedTemplateNodeInfoProvider: the node's ResourceSlices copied, pool renamed), else from the cloud provider
(`TemplateNodeInfo`, scale from zero). cluster-api's provider synthesizes the DRA slice of that template from the
MachineSet's annotations `capacity.cluster-autoscaler.kubernetes.io/dra-driver` and `.../gpu-count`; until PR
#10200 it left the pool's `resourceSliceCount` at 0, which the DRA allocator reads as an incomplete pool: its
devices are ignored and no DRA pod triggers a scale-up from zero ("clusterapi: DRA pods never trigger
scale-from-zero on CA 1.35+"). A group scales normally once it has a node.

In dralab a group's template (spec.nodeGroups[].template) carrying the `dra-driver` annotation stands for such a
cluster-api group, and its `resourceSlices` for what the provider synthesizes. With the bug on and no node in the
group, :func:`template_group` gives the simulation a copy whose pools say one slice more than they have (a count of
0 is refused by the API's validation, which in-memory templates never meet upstream; an incomplete pool is the
effect either way).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...state.cluster import ClusterState, NodeGroupState

CLUSTERAPI_DRA_DRIVER = "capacity.cluster-autoscaler.kubernetes.io/dra-driver"


def clusterapi_dra(group: NodeGroupState) -> bool:
    """Whether the group's template says cluster-api synthesizes its DRA slices (the MachineSet annotation)."""
    return CLUSTERAPI_DRA_DRIVER in ((group.template.get("metadata") or {}).get("annotations") or {})


def from_zero(view: ClusterState, group: NodeGroupState) -> bool:
    """The template comes from the provider: the group has no registered node to copy."""
    return not view.nodes_by_group.get(group.name)


def template_group(view: ClusterState, group: NodeGroupState) -> NodeGroupState:
    """The group as the simulation templates it under autoscaler#10199 (see the module docstring)."""
    if not group.resource_slices or not clusterapi_dra(group) or not from_zero(view, group):
        return group
    slices: list[dict[str, Any]] = []
    for s in group.resource_slices:
        spec = dict(s.get("spec") or {})
        pool = dict(spec.get("pool") or {})
        pool["resourceSliceCount"] = int(pool.get("resourceSliceCount") or 1) + 1  # never complete
        slices.append({**s, "spec": {**spec, "pool": pool}})
    return replace(group, resource_slices=tuple(slices))
