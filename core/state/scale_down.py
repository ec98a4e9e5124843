"""What the log says of cluster-autoscaler's scale-down (release profiles): the reasons it last gave for nodes it
cannot remove, and when it last deleted a node or failed to (the --scale-down-delay-after-delete/-failure clocks:
upstream keeps them in StaticAutoscaler's memory, lastScaleDownDeleteTime and lastScaleDownFailTime; dralab's
reactors decide from the log, so the events of core/log/events_scaledown.py carry them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..log.events_scaledown import NodesUnremovable, ScaleDownReported

REMOVED_MESSAGE = "nodes removed by cluster autoscaler"


@dataclass
class ScaleDownStatus:
    unremovable: dict[str, str] = field(default_factory=dict)  # node -> simulator.UnremovableReason
    last_delete_t: int = -1
    last_failure_t: int = -1
    # for the run summary (core/analysis/scale_down_summary.py): nodes whose deletion started, as "empty" or
    # "drained"; nodes removed, by the same; deletions that failed
    deleting: dict[str, str] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    failed: int = 0


def on_scale_down_reported(state: Any, offset: int, t: int, event: ScaleDownReported) -> None:
    """The clocks: a deletion started (the status ConfigMap's ScaleDownEmpty or ScaleDown: upstream sets
    lastScaleDownDeleteTime when a loop's result is ScaleDownNodeDeleteStarted) or failed (ScaleDownFailed)."""
    status: ScaleDownStatus = state.scale_down
    if event.kind == "ConfigMap" and event.reason in ("ScaleDown", "ScaleDownEmpty"):
        status.last_delete_t = t
        status.deleting[event.node] = "empty" if event.reason == "ScaleDownEmpty" else "drained"
    elif event.kind == "Node" and event.reason == "ScaleDown" and event.message == REMOVED_MESSAGE:
        kind = status.deleting.pop(event.name, "empty")
        status.removed[kind] = status.removed.get(kind, 0) + 1
    elif event.reason == "ScaleDownFailed":
        status.last_failure_t = t
        status.deleting.pop(event.name, None)
        status.failed += 1


def on_nodes_unremovable(state: Any, offset: int, t: int, event: NodesUnremovable) -> None:
    unremovable = state.scale_down.unremovable
    for node, reason in event.nodes:
        if reason:
            unremovable[node] = reason
        else:
            unremovable.pop(node, None)


HANDLERS: dict[type, Any] = {ScaleDownReported: on_scale_down_reported, NodesUnremovable: on_nodes_unremovable}
