"""Events of a cloud that does not simply obey (the tagged union and the codec are in :mod:`.events`).

Why events of their own: the node events (events_nodes.py) are encoded with every field, so a new field there
would change the bytes of every log ever written. These are only written where a scenario asks for the
behaviour (a node group's cloud settings, a fault of the new kinds), so older logs read as they were.

- `NodeGroupCloudDefined`: a group's settings for deletions, retried stockouts, nodes never Ready, zone
  quotas (core/scenario/cloud_ops.py), written after its `NodeGroupDefined` when any is set;
- `NodeDeletionRequested` (the autoscaler's `NodeGroup.DeleteNodes` call, after its drain), `NodeDeleting`
  (the cloud's answer, drawn: when the instance is gone, or the error it will report) and
  `NodeDeletionFailed` (the cloud reported the error: the node stays); a deletion that succeeds ends with
  the usual `NodeDeleted`;
- `InstancePending`: a node the cloud accepted into the group's target size but cannot create before
  `until` (a stockout it retries in silence): no instance exists meanwhile;
- `NodePreemptionScheduled`: a spot node's preemption, drawn when it was made (a group's `preemptionRate`);
- `NodePreemptionNotice`: the cloud reclaims a spot node at `deadline` (its interruption notice).
"""

from __future__ import annotations

from ..kube.defaults import SPOT_INTERRUPTION_NOTICE_MS
from .event_base import Event, group_key, node_key


class NodeGroupCloudDefined(Event, tag="NodeGroupCloudDefined", frozen=True):
    """How the cloud deletes, retries and registers a group's nodes (only when a scenario sets it)."""

    group: str
    delete_delay_ms: tuple[int, int] = (0, 0)  # a deletion completes this long after it is asked (drawn)
    delete_failure_rate: float = 0.0  # probability that a deletion fails (the node stays)
    retry_stockouts: bool = False  # out-of-stock nodes are retried in silence, not reported failed
    never_ready_rate: float = 0.0  # probability that a new node registers and never turns Ready
    zone_quota: dict[str, int] = {}  # zone -> most nodes of the group the cloud runs there
    preemption_rate: float = 0.0  # spot: mean preemptions per node-hour (each node's time drawn when it is made)
    preemption_notice_ms: int = SPOT_INTERRUPTION_NOTICE_MS  # spot: the interruption notice

    def touched(self) -> tuple[str, ...]:
        return (group_key(self.group),)


class NodeDeletionRequested(Event, tag="NodeDeletionRequested", frozen=True):
    """The autoscaler asked the cloud to delete the node's instance (after draining it)."""

    name: str
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeDeleting(Event, tag="NodeDeleting", frozen=True):
    """The cloud's answer to a deletion request, decided when it saw it: at `done_at` the instance is gone
    (`NodeDeleted`), or, when `error` is set, the call fails with it then (`NodeDeletionFailed`)."""

    name: str
    done_at: int
    error: str = ""

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeDeletionFailed(Event, tag="NodeDeletionFailed", frozen=True):
    """The cloud's deletion of the node failed: the node and its instance stay (billed)."""

    name: str
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class InstancePending(Event, tag="InstancePending", frozen=True):
    """A node accepted into the target size whose instance the cloud cannot create before `until` (-1:
    never): it keeps retrying and says nothing. Written with the node's `NodeProvisioning`."""

    name: str
    until: int

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodePreemptionScheduled(Event, tag="NodePreemptionScheduled", frozen=True):
    """A spot node's preemption drawn when the cloud made it (`preemptionRate`): notice at `notice_at`, the
    instance stops at `deadline`. Written with the node's `NodeProvisioning`."""

    name: str
    notice_at: int
    deadline: int

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodePreemptionNotice(Event, tag="NodePreemptionNotice", frozen=True):
    """The cloud reclaims the (spot) node: its instance stops at `deadline`."""

    name: str
    deadline: int
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


CLOUD_EVENTS = (NodeGroupCloudDefined, NodeDeletionRequested, NodeDeleting, NodeDeletionFailed, InstancePending,
                NodePreemptionScheduled, NodePreemptionNotice)
