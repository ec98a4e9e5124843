"""Cloud and node lifecycle (and the kubelet's part of a pod's life), as one reactor for now.

The cloud fulfils scale-up requests: it creates the node objects at once (registered, NotReady) and
draws each node's provisioning delay from the group's range with the decision's seeded random
source; the node turns Ready when that time comes. Pods that were given a run time finish after
it. Later issues split this into the cloud, node lifecycle and device drivers.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from ..events import AnyEvent, NodeCreated, NodeReady, PodFinished, ResourceSlicePublished
from ..reactor import Decision, Trigger
from ..scenario_dra import render_slice_templates
from ..state import RUNNING, ClusterState, NodeGroupState

GROUP_LABEL = "dralab.io/node-group"


def node_from_template(group: NodeGroupState, name: str) -> dict[str, Any]:
    """The group's template Node with its name and identity labels filled in."""
    node = copy.deepcopy(group.template)
    meta = node.setdefault("metadata", {})
    meta["name"] = name
    labels = meta.setdefault("labels", {}) or {}
    meta["labels"] = labels
    labels.setdefault("kubernetes.io/hostname", name)
    labels[GROUP_LABEL] = group.name
    return node


def node_name(group: str, index: int) -> str:
    return f"{group}-{index}"


def publish_slices(view: ClusterState, group: str, node: str) -> list[AnyEvent]:
    """The node's device drivers publish its ResourceSlices (for now at the moment it turns Ready;
    separate publishing delays per driver come with the device-driver reactor)."""
    templates = view.node_groups[group].resource_slices if group in view.node_groups else ()
    return [ResourceSlicePublished(manifest=m) for m in render_slice_templates(list(templates), node)]


@dataclass
class Lifecycle:
    name: str = "lifecycle"
    trigger: Trigger = "events"

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        wake: list[int] = []
        for group_name in sorted(view.node_groups):
            group = view.node_groups[group_name]
            for i in range(max(group.outstanding, 0)):
                low, high = group.provision_delay_ms
                ready_at = now + (rng.randint(low, high) if high > low else low)
                name = node_name(group.name, group.created + i)
                events.append(NodeCreated(name=name, group=group.name, node=node_from_template(group, name),
                                          ready_at=ready_at))
                wake.append(ready_at)
        for node in view.nodes.values():
            if not node.ready and node.ready_at >= 0:
                if node.ready_at <= now:
                    events.append(NodeReady(name=node.name))
                    events.extend(publish_slices(view, node.group, node.name))
                else:
                    wake.append(node.ready_at)
        for key in view.pods_by_phase[RUNNING]:
            pod = view.pods[key]
            if pod.run_for_ms >= 0:
                done_at = pod.bound_t + pod.run_for_ms
                if done_at <= now:
                    events.append(PodFinished(pod=key))
                else:
                    wake.append(done_at)
        return Decision(tuple(events), min(wake) if wake else None)
