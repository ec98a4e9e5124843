"""A node group as the fold sees it: its definition, what was asked of the cloud and what it did.

The counters keep `outstanding` and `target_size` meaningful through every way a node comes or goes
(a scale-up, the cloud's answer, registration, a failure, a deletion), and `unserved` is the queue of
scale-ups the cloud (core/controllers/cloud.py) has not answered in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..log.events import DriverSpec, StockWindow


@dataclass
class NodeGroupState:
    name: str
    min: int
    max: int
    provision_delay_ms: tuple[int, int]
    template: dict[str, Any]
    cost_per_hour: float
    allocatable: dict[str, int]
    resource_slices: tuple[dict[str, Any], ...] = ()  # ResourceSlice templates its nodes' drivers publish
    requested: int = 0  # total nodes ever asked for by scale-ups
    created: int = 0  # nodes of this group ever created (initial ones included)
    initial: int = 0  # nodes of the starting cluster
    # The cloud's settings (NodeGroupDefined) and what it did, for the cloud, lifecycle and drivers reactors.
    zones: tuple[str, ...] = ()
    quota: int = -1
    stock: tuple[StockWindow, ...] = ()
    failure_rate: float = 0.0
    drivers: tuple[DriverSpec, ...] = ()
    not_ready_ms: int = 0
    failed: int = 0  # nodes of scale-ups the cloud refused or could not deliver (ScaleUpFailed)
    cancelled: int = 0  # nodes deleted while still provisioning (never registered)
    deleted: int = 0  # registered nodes deleted
    provisioned: int = 0  # nodes the cloud accepted (NodeProvisioning)
    next_index: int = 0  # ordinal of the group's next node name (<group>-<i>) and zone
    # Scale-ups the cloud has not answered in full, oldest first: [nodes not yet answered, atomic].
    unserved: list[tuple[int, bool, str]] = field(default_factory=list)  # (nodes, atomic, booking)
    delivered_t: list[int] = field(default_factory=list)  # when each NodeProvisioning was decided (stock)
    failures: list[tuple[int, int, str]] = field(default_factory=list)  # (t, delta, reason) of ScaleUpFailed
    timed_out: dict[str, None] = field(default_factory=dict)  # nodes the autoscaler gave up on (ScaleUpTimedOut)

    @property
    def outstanding(self) -> int:
        """Nodes asked for by scale-ups that have not registered yet and are still coming (not failed,
        not cancelled): the cloud's unanswered requests and its VMs still provisioning."""
        return self.requested - self.failed - self.cancelled - (self.created - self.initial)

    @property
    def target_size(self) -> int:
        """What the group runs or has coming: the starting nodes and the scale-ups, less what failed or
        was deleted."""
        return self.initial + self.requested - self.failed - self.cancelled - self.deleted

    def unserved_nodes(self) -> int:
        return sum(n for n, _, _ in self.unserved)

    def _answer(self, nodes: int) -> bool:
        """The cloud answered `nodes` nodes of its oldest requests (FIFO); False if there were fewer."""
        while nodes > 0 and self.unserved:
            left, atomic, booking = self.unserved[0]
            used = min(left, nodes)
            nodes -= used
            if used == left:
                self.unserved.pop(0)
            else:
                self.unserved[0] = (left - used, atomic, booking)
        return nodes == 0
