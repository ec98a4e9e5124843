"""Node lifecycle (the kubelet's part of a node's and a pod's life), as a reactor, and node operations.

The cloud (cloud.py) decides when a VM it accepted registers and turns Ready; this reactor replays it:
at `register_at` the Node object appears (`NodeCreated`, NotReady), at `ready_at` it turns Ready
(`NodeReady`). Its device drivers publish after that (drivers.py). Pods that were given a run time
finish after it (`PodFinished`).

The other changes of a node are functions that return the events, for whoever decides them (the
autoscaler's scale-down, fault injection): `node_not_ready`, `set_taints` and `delete_node`, which
fails the pods still on the node before it goes, as the pod garbage collector does for the pods of a
deleted node (their claims are then released by the resourceclaim controller).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from ..events import (
    AnyEvent,
    NodeCreated,
    NodeDeleted,
    NodeNotReady,
    NodeReady,
    NodeTaintsChanged,
    PodEvicted,
    PodFinished,
    PodUnreserved,
    ResourceSlicePublished,
)
from ..reactor import Decision, Trigger
from ..scenario_dra import render_slice_templates
from ..state import FAILED, ClusterState
from .cloud import GROUP_LABEL, ZONE_LABEL, node_from_template, node_name

__all__ = ["GROUP_LABEL", "ZONE_LABEL", "Lifecycle", "delete_node", "node_from_template", "node_name",
           "node_not_ready", "publish_slices", "set_taints"]


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


def delete_node(view: ClusterState, name: str, reason: str = "", evict: Collection[str] = ()) -> list[AnyEvent]:
    """Delete a node (or cancel a VM still provisioning): the pods running there end as Failed and
    gang members waiting at Permit there are released, in the same record, before the node goes.
    `evict`: pods of the node a drain evicts first (`PodEvicted`, so their controllers replace them)."""
    events: list[AnyEvent] = []
    node = view.nodes.get(name)
    if node is not None:
        events += [PodEvicted(pod=key, node=name, reason=reason) for key in node.pods if key in evict]
        events += [PodUnreserved(pod=key, reason="node-deleted")
                   for key, r in view.gang.reservations.items() if r.node == name]
        events += [PodFinished(pod=key, phase=FAILED) for key in node.pods if key not in evict]
    elif name not in view.provisioning_nodes:
        return []
    return [*events, NodeDeleted(name=name, reason=reason)]


@dataclass
class Lifecycle:
    name: str = "lifecycle"
    trigger: Trigger = "events"

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        wake: list[int] = []
        for vm in view.provisioning_nodes.values():
            if vm.register_at > now:
                wake.append(vm.register_at)
                continue
            events.append(NodeCreated(name=vm.name, group=vm.group, node=vm.node, ready_at=vm.ready_at))
            if vm.ready_at <= now:
                events.append(NodeReady(name=vm.name))
            else:
                wake.append(vm.ready_at)
        for name in view.never_ready:  # the nodes never Ready yet, in the order of view.nodes
            node = view.nodes[name]
            if node.ready_t < 0 and not node.ready and node.ready_at >= 0:
                if node.ready_at <= now:
                    events.append(NodeReady(name=node.name))
                else:
                    wake.append(node.ready_at)
        done, later = view.finishing(now)  # running pods with a run time, in running order
        events.extend(PodFinished(pod=key) for key in done)
        if later is not None:
            wake.append(later)
        return Decision(tuple(events), min(wake) if wake else None)
