"""Which nodes this loop's scale-down marks for deletion, in release profiles: cluster-autoscaler's planner
(core/scaledown/planner: eligibility, unneeded nodes, removal simulation) with the reason it gives every node it
cannot remove (report.py), the flags of scale_down_flags.py and what the loop's one snapshot holds.

As the legacy loop (scale_down.py) it marks an unneeded node by tainting it ToBeDeletedByClusterAutoscaler, the
same checks in upstream's order so that the reason is upstream's: a node being deleted, not autoscaled, annotated
scale-down-disabled, unready with --scale-down-unready-enabled=false, at its group's min size, needed in this loop
(pods nominated or in flight there, or placed there by this loop's FilterOutSchedulable: static_autoscaler.go
RunOnce gives scale-down the snapshot FilterOutSchedulable added them to), at or above its utilization threshold,
unneeded (or unready) for less than --scale-down-unneeded-time (--scale-down-unready-time), a pod that blocks its
drain, no place to move its pods. What differs from the legacy loop: nodes unready after they were Ready are
candidates (upstream scales them down after --scale-down-unready-time), the scale-down-disabled annotation is
honoured, and the placed pods count.

The unneeded clock is dralab's `busy_t` (the last time a pod was bound to the node, left it or was reserved there),
as in the legacy loop: a reactor decides from the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ...cluster.nodes import set_taints
from ...kube.defaults import SCALE_DOWN_DISABLED_ANNOTATION
from ...log.events import AnyEvent
from ...state.cluster import ClusterState, NodeState
from ..simulation.capacity import SimNode, Simulation
from . import report
from .drain import DrainRules, RemovalSimulator, pods_to_move
from .pdb import NOT_ENOUGH_PDB, RemainingPdbs

Snapshot = Callable[[], tuple[Simulation, list[SimNode]]]
TAINT_KEY = "ToBeDeletedByClusterAutoscaler"


class ScaleDown(Protocol):
    """What the planner reads of scale_down.ScaleDown (its settings, thresholds and blocker cache)."""

    @property
    def strict_threshold(self) -> bool: ...

    @property
    def unneeded_time_ms(self) -> int: ...

    @property
    def unready_time_ms(self) -> int: ...

    @property
    def unready_enabled(self) -> bool: ...

    @property
    def max_scale_down_parallelism(self) -> int: ...

    @property
    def max_drain_parallelism(self) -> int: ...

    @property
    def non_empty_candidates_count(self) -> int: ...

    @property
    def _blocker(self) -> dict[str, str]: ...

    @property
    def rules(self) -> DrainRules: ...

    def threshold(self, node: NodeState) -> float: ...

    def _utilization(self, view: ClusterState, node: NodeState, release: bool) -> float: ...

    def for_groups(self) -> Mapping[str, ScaleDown]: ...


def mark(sd: ScaleDown, view: ClusterState, now: int, ready: Callable[[NodeState], bool], needed: set[str],
         leaving: set[str], draining: int, snapshot: Snapshot | None,
         tracker: Callable[[], RemainingPdbs | None], removal_sim: Callable[[], RemovalSimulator]) -> list[AnyEvent]:
    """The taints of this loop and their events, then the changed unremovable reasons. `needed`: nodes with pods
    nominated, in flight or placed there by this loop; `leaving`: nodes tainted for deletion (added to);
    `draining`: drains under way."""
    events: list[AnyEvent] = []
    reasons: dict[str, str] = {}  # the reason of every node that has one
    sizes = {g: sum(1 for n in members if n in view.nodes and n not in leaving)
             for g, members in view.nodes_by_group.items()}
    tainted = simulated = 0
    views = sd.for_groups()  # spec.nodeGroups[].autoscalingOptions

    def of(node: NodeState) -> ScaleDown:
        return views.get(node.group, sd)

    def waited(node: NodeState) -> bool:
        """Unneeded (unready) for long enough, as far as the clock goes (the node's group's times)."""
        own = of(node)
        if not node.ready:
            return node.busy_t <= now - own.unready_time_ms
        since = now - own.unneeded_time_ms
        return node.busy_t <= since and node.ready_t <= since
    for node in view.nodes.values():
        name = node.name
        reason, moving = _unremovable(of(node), view, node, ready, needed, leaving, sizes)
        if reason is not None:
            reasons[name] = reason
            continue
        unready = not node.ready
        if not waited(node):
            reasons[name] = report.NOT_UNREADY_LONG_ENOUGH if unready else report.NOT_UNNEEDED_LONG_ENOUGH
            continue
        reasons[name] = ""
        if tainted >= sd.max_scale_down_parallelism:
            continue
        if node.pods:
            if snapshot is None or draining >= sd.max_drain_parallelism or \
                    0 < sd.non_empty_candidates_count <= simulated:
                continue
            if sd._blocker.get(name) in node.pods:
                reasons[name] = report.BLOCKED_BY_POD
                continue
            blocked = pods_to_move(view, node, tracker(), True, sd.rules)
            if isinstance(blocked, tuple):
                if blocked[0] != NOT_ENOUGH_PDB:  # a budget may allow it later: not cached
                    sd._blocker[name] = blocked[1]
                reasons[name] = report.BLOCKED_BY_POD
                continue
            moving = blocked
            if moving:  # else only DaemonSet and mirror pods: empty, as upstream counts it
                simulated += 1
                if not removal_sim().try_remove(node, moving):
                    reasons[name] = report.NO_PLACE_TO_MOVE_PODS
                    continue
                draining += 1
                if (pdbs_left := tracker()) is not None:
                    pdbs_left.remove(moving)  # the planner's RemovePods
        taints: list[dict[str, Any]] = [*node.taints, {"key": TAINT_KEY, "value": str(now), "effect": "NoSchedule"}]
        events += report.marked(name, moving, of(node)._utilization(view, node, True))
        events += set_taints(view, name, taints)
        leaving.add(name)
        sizes[node.group] -= 1
        tainted += 1
        reasons[name] = report.BEING_DELETED
    return events + report.reasons_changed(view, report.blocking(of, view, reasons, waited))


def _unremovable(sd: ScaleDown, view: ClusterState, node: NodeState, ready: Callable[[NodeState], bool],
                 needed: set[str], leaving: set[str], sizes: dict[str, int]) -> tuple[str | None, list[Any]]:
    """The reason a node is not a candidate whatever the time ("" : not one, and none to give), or None."""
    name = node.name
    if name in leaving:
        return report.BEING_DELETED, []
    group = view.node_groups.get(node.group)
    if group is None:
        return report.NOT_AUTOSCALED, []
    annotations = (node.manifest.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(SCALE_DOWN_DISABLED_ANNOTATION, "")).lower() == "true":
        return report.DISABLED_ANNOTATION, []
    if not node.ready:
        if node.ready_t < 0:
            return "", []  # not started yet: an upcoming node, not a candidate (static_autoscaler.go)
        if not sd.unready_enabled:
            return report.UNREADY_DISABLED, []
    elif not ready(node):
        return "", []  # Ready but its devices unpublished: rewritten NotReady, not started (customresources)
    if sizes.get(node.group, 0) <= group.min:
        return report.MIN_SIZE, []
    if name in needed:
        return report.NOT_UNNEEDED_LONG_ENOUGH, []
    util, threshold = sd._utilization(view, node, True), sd.threshold(node)
    if util > threshold if sd.strict_threshold else util >= threshold:  # autoscaler#8707: `>` since its fix
        return report.NOT_UNDERUTILIZED, []
    return None, []
