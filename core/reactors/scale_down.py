"""Scale-down, as cluster-autoscaler does it (core/scaledown: planner, unneeded nodes, actuation).

A node is a candidate when its group is above its min size, it is ready, and its utilization is below
the threshold (0.5): for a node with GPUs, GPU utilization only (extended resources, or for DRA the
share of the node's devices allocated); else max(cpu, memory) requested over allocatable. It must stay
a candidate for `unneededTime` (10 min), and no scale-up may have happened in the last `delayAfterAdd`
(10 min). Actuation taints it `ToBeDeletedByClusterAutoscaler:NoSchedule` (the value is the time, as
upstream writes it), then `deleteDelayAfterTaint` (5 s) later deletes it.

dralab has no controllers that would re-create a drained pod, so only empty nodes (no running pod, no
pod nominated to it) are scaled down; draining nodes with pods is not modelled yet.

Before deleting, cluster-autoscaler looks at the node again; with `recheckBeforeDelete: false` dralab
deletes on the judgment it made when tainting, which is the race of autoscaler#3886: a pod bound in
between (one the scheduler had already reserved the node for, invisible without a nominated node name)
is killed with the node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..events import AnyEvent
from ..state import ClusterState, NodeState
from .lifecycle import delete_node, set_taints

TAINT_KEY = "ToBeDeletedByClusterAutoscaler"
MAX_PARALLELISM = 10  # --max-scale-down-parallelism (empty nodes deleted per loop)


@dataclass(frozen=True)
class ScaleDown:
    enabled: bool = True
    utilization_threshold: float = 0.5
    unneeded_time_ms: int = 600_000
    delay_after_add_ms: int = 600_000
    delete_delay_after_taint_ms: int = 5_000
    recheck_before_delete: bool = True

    def decide(self, view: ClusterState, now: int, ready: Callable[[NodeState], bool],
               occupied: set[str]) -> list[AnyEvent]:
        """This loop's scale-down events. `occupied`: nodes with pods nominated to them."""
        if not self.enabled:
            return []
        events: list[AnyEvent] = []
        for node in list(view.nodes.values()):
            taint = next((t for t in node.taints if t.get("key") == TAINT_KEY), None)
            if taint is None:
                continue
            tainted_at = int(str(taint.get("value") or "0") or 0)
            if now < tainted_at + self.delete_delay_after_taint_ms:
                continue
            if self.recheck_before_delete and (node.pods or node.name in occupied):
                events += set_taints(view, node.name, [t for t in node.taints if t.get("key") != TAINT_KEY])
                continue
            events += delete_node(view, node.name, reason="scale-down: unneeded")
        last_add = max((t for t, _, _ in view.scale_ups), default=None)
        if last_add is not None and now < last_add + self.delay_after_add_ms:
            return events
        deleting = {n.name for n in view.nodes.values() if any(t.get("key") == TAINT_KEY for t in n.taints)}
        sizes = {g: sum(1 for n in members if n in view.nodes and n not in deleting)
                 for g, members in view.nodes_by_group.items()}
        tainted = 0
        for node in view.nodes.values():
            group = view.node_groups.get(node.group)
            if group is None or sizes.get(node.group, 0) <= group.min or tainted >= MAX_PARALLELISM:
                continue
            if any(t.get("key") == TAINT_KEY for t in node.taints) or not ready(node):
                continue
            if node.pods or node.name in occupied or utilization(view, node) >= self.utilization_threshold:
                continue
            since = max(node.ready_t, node.busy_t)
            if now < since + self.unneeded_time_ms:
                continue
            taints: list[dict[str, Any]] = [*node.taints,
                                            {"key": TAINT_KEY, "value": str(now), "effect": "NoSchedule"}]
            events += set_taints(view, node.name, taints)
            sizes[node.group] -= 1
            tainted += 1
        return events


def utilization(view: ClusterState, node: NodeState) -> float:
    """GPU utilization for a node with GPUs (extended `*/gpu` or DRA devices of its own slices), else
    max(cpu, memory)."""
    gpus = {r: a for r, a in node.allocatable.items() if r.endswith("/gpu") and a}
    if gpus:
        return max(node.used.get(r, 0) / a for r, a in gpus.items())
    devices = [d.id for _, slc in view.dra.slice_index().by_node.get(node.name, ()) for d in slc.devices]
    if devices:
        return sum(1 for d in devices if d in view.dra.allocated.devices) / len(devices)
    return max((node.used.get(r, 0) / node.allocatable[r] for r in ("cpu", "memory") if node.allocatable.get(r)),
               default=0.0)
