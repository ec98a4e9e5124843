"""Node operations several reactors share: a node made from its group's template (name, zone, identity
labels), a fast copier of templates, and the events that publish a node's slices, taint it, take it out of
service or delete it (at once, or by asking the cloud where the node's group deletes through it). The cloud,
node lifecycle, the drivers, the chaos reactor and the autoscaler's scale-down and ProvisioningRequest
processing all act on nodes through these, so none of them imports another reactor to do so."""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable
from typing import Any

import msgspec

from ..log.events import (
    AnyEvent,
    NodeDeleted,
    NodeDeletionRequested,
    NodeNotReady,
    NodeTaintsChanged,
    PodEvicted,
    PodFinished,
    PodUnreserved,
    ResourceSlicePublished,
)
from ..scenario.dra import render_slice_templates
from ..state.cluster import FAILED, ClusterState, NodeGroupState

GROUP_LABEL = "dralab.io/node-group"
ZONE_LABEL = "topology.kubernetes.io/zone"


def node_name(group: str, index: int) -> str:
    return f"{group}-{index}"


def zone_of(zones: tuple[str, ...] | list[str], index: int) -> str:
    """The zone of the group's `index`-th node: round-robin over the zones ("" without zones)."""
    return zones[index % len(zones)] if zones else ""


def node_from_template(group: NodeGroupState, name: str, zone: str = "",
                       copy_template: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The group's template Node with its name and identity labels (and zone) filled in.
    `copy_template`: returns a deep copy of the template (a faster one, for a decision making many)."""
    node = copy_template() if copy_template is not None else copy.deepcopy(group.template)
    meta = node.setdefault("metadata", {})
    meta["name"] = name
    labels = meta.setdefault("labels", {}) or {}
    meta["labels"] = labels
    labels.setdefault("kubernetes.io/hostname", name)
    labels[GROUP_LABEL] = group.name
    if zone:
        labels[ZONE_LABEL] = zone
    return node


_COPY_ENCODER = msgspec.msgpack.Encoder()
_COPY_DECODER = msgspec.msgpack.Decoder()


def copier(obj: Any) -> Callable[[], Any]:
    """A function that returns a new deep copy of `obj` at each call: decoding its msgpack bytes,
    several times faster than copy.deepcopy, for plain data (which templates are: checked YAML); the
    same dicts in the same key order, so the same bytes in the log. Anything else: copy.deepcopy."""
    try:
        data = _COPY_ENCODER.encode(obj)
    except (TypeError, ValueError, OverflowError):
        return lambda: copy.deepcopy(obj)
    if _COPY_DECODER.decode(data) != obj:  # e.g. a tuple (it would come back a list)
        return lambda: copy.deepcopy(obj)
    return lambda: _COPY_DECODER.decode(data)


def publish_slices(view: ClusterState, group: str, node: str) -> list[AnyEvent]:
    """All the ResourceSlices the node's drivers publish, at once (for tools that skip the drivers'
    timing, such as `whatif`; in a run the drivers reactor publishes them)."""
    templates = view.node_groups[group].resource_slices if group in view.node_groups else ()
    return [ResourceSlicePublished(manifest=m) for m in render_slice_templates(list(templates), node)]


def node_not_ready(name: str) -> list[AnyEvent]:
    """The node stops being Ready: its pods keep running, nothing new is placed there."""
    return [NodeNotReady(name=name)]


def set_taints(view: ClusterState, name: str, taints: Iterable[dict[str, Any]]) -> list[AnyEvent]:
    """Replace the node's spec.taints (nothing if they are already these)."""
    new = tuple(dict(t) for t in taints)
    node = view.nodes.get(name)
    if node is None or tuple(node.taints) == new:
        return []
    return [NodeTaintsChanged(name=name, taints=new)]


def delete_node(view: ClusterState, name: str, reason: str = "", evict: Collection[str] = (),
                direct: bool = False) -> list[AnyEvent]:
    """Delete a node (or cancel a VM still provisioning): the pods running there end as Failed and
    gang members waiting at Permit there are released, in the same record, before the node goes.
    `evict`: pods of the node a drain evicts first (`PodEvicted`, so their controllers replace them).
    Where the node's group deletes through the cloud (`request_deletion`), this asks it instead, unless
    `direct` (the cloud itself, when the instance is gone)."""
    events: list[AnyEvent] = []
    node = view.nodes.get(name)
    if node is not None and not direct and deletes_through_cloud(view, node.group):
        return request_deletion(view, name, reason, evict)
    if node is not None:
        events += [PodEvicted(pod=key, node=name, reason=reason) for key in node.pods if key in evict]
        events += [PodUnreserved(pod=key, reason="node-deleted")
                   for key, r in view.gang.reservations.items() if r.node == name]
        events += [PodFinished(pod=key, phase=FAILED) for key in node.pods if key not in evict]
    elif name not in view.provisioning_nodes:
        return []
    return [*events, NodeDeleted(name=name, reason=reason)]


DELETE_FAULTS = ("deletion-delay", "deletion-failure")


def deletes_through_cloud(view: ClusterState, group: str) -> bool:
    """Whether deleting a node of `group` is a request the cloud answers later (core/controllers/cloud_ops.py):
    its settings say so, or a deletion fault targets it. Otherwise the node goes at once, as always."""
    if view.cloud_ops.async_deletes(group):
        return True
    return bool(view.faults) and any(f.kind in DELETE_FAULTS and f.target == group for f in view.faults.values())


def request_deletion(view: ClusterState, name: str, reason: str = "", evict: Collection[str] = ()) -> list[AnyEvent]:
    """Ask the cloud to delete the node's instance (cluster-autoscaler's `DeleteNodes`, after the drain): the
    drained pods are evicted now; the node, the pods left on it (DaemonSet pods) and its bill stay until the
    cloud says the instance is gone. Nothing if a deletion of it is under way already."""
    node = view.nodes.get(name)
    if node is None or view.cloud_ops.deletion_pending(name) or _failed_since_taint(view, name):
        return []
    evicted: list[AnyEvent] = [PodEvicted(pod=key, node=name, reason=reason) for key in node.pods if key in evict]
    return [*evicted, NodeDeletionRequested(name=name, reason=reason)]


TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"  # cluster-autoscaler's taint (autoscaler/disruption/scale_down.py)


def _failed_since_taint(view: ClusterState, name: str) -> bool:
    """The cloud failed to delete the node after it was last tainted for deletion: the autoscaler removes
    that taint (autoscaler/disruption/cloud_deletions.py) rather than ask again on the same judgment."""
    failed = view.cloud_ops.failed_deletions.get(name)
    if failed is None:
        return False
    for taint in view.nodes[name].taints:
        if taint.get("key") == TO_BE_DELETED:
            return int(str(taint.get("value") or "0") or 0) <= failed
    return True
