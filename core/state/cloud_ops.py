"""The fold of the cloud's misbehaviour (core/log/events_cloud.py): group settings, deletions under way or
failed, instances not created yet, spot nodes being reclaimed.

Apart from cluster.py (at its size limit): its dispatch table names the handlers below, and
:class:`CloudOps` is one field of the state (`view.cloud_ops`). Entries of nodes that are gone stay (names
are never reused: a group's node ordinal only grows); readers look at `view.nodes` too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..log.events_cloud import (
    InstancePending,
    NodeDeleting,
    NodeDeletionFailed,
    NodeDeletionRequested,
    NodeGroupCloudDefined,
    NodePreemptionNotice,
    NodePreemptionScheduled,
)
from .objects import NodeState


@dataclass
class Deletion:
    """One deletion asked of the cloud: when, and the cloud's answer once it gave one."""

    requested_t: int
    reason: str = ""
    done_at: int = -1  # -1: not answered yet
    error: str = ""


@dataclass
class CloudOps:
    groups: dict[str, NodeGroupCloudDefined] = field(default_factory=dict)  # by group
    deleting: dict[str, Deletion] = field(default_factory=dict)  # deletions under way, by node
    failed_deletions: dict[str, int] = field(default_factory=dict)  # node -> when its last deletion failed
    last_deletion_failure_t: int = -1
    pending_instances: dict[str, int] = field(default_factory=dict)  # node -> until when it is only a target
    preempted: dict[str, int] = field(default_factory=dict)  # node -> the deadline of its preemption notice
    # node -> (notice at, deadline) of a spot preemption drawn when the node was made (preemptionRate)
    scheduled_preemptions: dict[str, tuple[int, int]] = field(default_factory=dict)

    def async_deletes(self, group: str) -> bool:
        """Whether deleting a node of `group` is a request the cloud answers later (its settings say so)."""
        g = self.groups.get(group)
        return g is not None and (g.delete_delay_ms[1] > 0 or g.delete_failure_rate > 0)

    def deletion_pending(self, node: str) -> bool:
        return node in self.deleting


class _Fold(Protocol):
    cloud_ops: CloudOps
    anomalies: list[str]
    nodes: dict[str, NodeState]


def on_group_cloud_defined(state: _Fold, offset: int, t: int, event: NodeGroupCloudDefined) -> None:
    state.cloud_ops.groups[event.group] = event


def on_deletion_requested(state: _Fold, offset: int, t: int, event: NodeDeletionRequested) -> None:
    ops = state.cloud_ops
    if event.name in ops.deleting:
        state.anomalies.append(f"offset {offset}: deletion of {event.name} asked twice")
        return
    ops.deleting[event.name] = Deletion(requested_t=t, reason=event.reason)


def on_node_deleting(state: _Fold, offset: int, t: int, event: NodeDeleting) -> None:
    deletion = state.cloud_ops.deleting.get(event.name)
    if deletion is None:
        state.anomalies.append(f"offset {offset}: the cloud answered a deletion of {event.name} nobody asked")
        return
    deletion.done_at, deletion.error = event.done_at, event.error


def on_deletion_failed(state: _Fold, offset: int, t: int, event: NodeDeletionFailed) -> None:
    ops = state.cloud_ops
    ops.deleting.pop(event.name, None)
    ops.failed_deletions[event.name] = t
    ops.last_deletion_failure_t = t
    node = state.nodes.get(event.name)
    if node is not None:  # its unneeded time starts again: upstream's planner drops a node while its deletion is
        node.busy_t = max(node.busy_t, t)  # under way (planner.go filterOutOngoingDeletions), so `since` resets


def on_instance_pending(state: _Fold, offset: int, t: int, event: InstancePending) -> None:
    state.cloud_ops.pending_instances[event.name] = event.until


def on_preemption_scheduled(state: _Fold, offset: int, t: int, event: NodePreemptionScheduled) -> None:
    state.cloud_ops.scheduled_preemptions[event.name] = (event.notice_at, event.deadline)


def on_preemption_notice(state: _Fold, offset: int, t: int, event: NodePreemptionNotice) -> None:
    state.cloud_ops.preempted[event.name] = event.deadline


# the fold's handlers of these events (cluster.py's dispatch table takes them in)
CLOUD_HANDLERS: dict[type, Callable[[Any, int, int, Any], None]] = {
    NodeGroupCloudDefined: on_group_cloud_defined,
    NodeDeletionRequested: on_deletion_requested,
    NodeDeleting: on_node_deleting,
    NodeDeletionFailed: on_deletion_failed,
    InstancePending: on_instance_pending,
    NodePreemptionNotice: on_preemption_notice,
    NodePreemptionScheduled: on_preemption_scheduled,
}
