"""The cloud: fulfils the autoscaler's scale-up requests, or refuses them, as a cloud provider does.

A `ScaleUpRequested` is a resize of the group's instance group (a MIG, an ASG). The cloud answers every
node of it in one decision, so that a request is never half-answered in the log:

- `quota`: the group may run at most this many nodes at once (registered or still provisioning); the
  nodes beyond it fail with reason `quota`;
- `stock`: within a window, at most `available` nodes of the group are delivered (counted from the
  `NodeProvisioning` events decided in the window); the rest fail with `out-of-stock`;
- `failureRate`: each node still accepted fails to come up with that probability (`instance-failed`),
  drawn with the decision's seeded source;
- an `atomic` request (a gang's all-or-nothing scale-up) is checked as a whole: if the quota, the stock
  or one of its instances would fail, the whole request fails with that reason, and nothing is made.

The cloud faults of `spec.faults` in force when a request is answered change those settings for the
answer (core/cluster/cloud_faults.py): `cloud-stockout` is a stock of 0, `quota-cut` lowers the quota,
`partial-fulfilment` delivers floor(nodes * fraction) of each request and fails the rest `out-of-stock`
(checked after the stock, before the instance failures).

A node accepted is a `NodeProvisioning`: its name, the Node manifest it will register with (a zone
label, round-robin over the group's zones), and its timing drawn now (when it registers, when it turns
Ready, when each device driver publishes after Ready), so the lifecycle and drivers reactors only
replay what the cloud decided. A node slower than the autoscaler's max-node-provision-time still comes:
the cloud does not know about that timeout.

A group's misbehaviour settings (`NodeGroupCloudDefined`, core/scenario/cloud_ops.py) change this: out-of-stock
nodes kept in the target and retried in silence (`retryStockouts`, or autoscaler#3490: `InstancePending`,
registering when stock returns), nodes that never turn Ready (`neverReadyRate`: `ready_at` -1), zones
stocked out or at their quota (cloud_zones.py), spot preemptions drawn per node (`preemptionRate`). The
cloud also answers deletions and reclaims spot nodes (cloud_ops.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cluster.cloud_faults import cloud_faults
from ..cluster.nodes import copier, node_from_template, node_name
from ..engine.contract import Decision, Trigger
from ..kube.provreq import BOOKING_TAINT
from ..kube.versions import profile_from_config
from ..log.events import AnyEvent, InstancePending, NodeProvisioning, ScaleUpFailed
from ..state.cluster import ClusterState, NodeGroupState
from .cloud_ops import deletion_events, preemption_drawn, preemption_events, restock_at
from .cloud_zones import ZonePicker

UNLIMITED = 2**62


def draw(delay: tuple[int, int], rng: random.Random) -> int:
    """A delay in [low, high]; the random source is only used for a real range (a fixed delay draws
    nothing, so adding a fixed-delay driver does not move every other draw)."""
    low, high = delay
    return rng.randint(low, high) if high > low else low


def stock_left(group: NodeGroupState, now: int) -> int:
    """How many more nodes the cloud can deliver at `now`: the tightest window covering `now`."""
    left = UNLIMITED
    for window in group.stock:
        until = UNLIMITED if window.until_ms < 0 else window.until_ms
        if window.from_ms <= now < until:
            used = sum(1 for t in group.delivered_t if window.from_ms <= t < until)
            left = min(left, max(window.available - used, 0))
    return left


def running(view: ClusterState, group: NodeGroupState) -> int:
    """Nodes the cloud runs for the group: registered ones and VMs still provisioning (for the quota)."""
    coming = sum(1 for vm in view.provisioning_nodes.values() if vm.group == group.name)
    return len(view.nodes_by_group.get(group.name, {})) + coming


@dataclass
class Cloud:
    name: str = "cloud"
    trigger: Trigger = "events"
    # the release emulated (core/kube/versions.py profile_config; None: legacy): autoscaler#3490 decides whether
    # the autoscaler's cloud provider sees a stockout at once (core/kube/bugs.py)
    kubernetes: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # autoscaler#3490: before cluster-autoscaler 1.24 the AWS provider did not read an Auto Scaling group's
        # failed scaling activities, so a stockout is a silent retry (as `retryStockouts`) to the autoscaler
        self._silent_stockouts = profile_from_config(self.kubernetes).bug("autoscaler#3490")

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        events: list[AnyEvent] = []
        for group_name in sorted(view.node_groups):
            group = view.node_groups[group_name]
            if group.unserved:
                events.extend(_Serve(view, group, now, rng, self._silent_stockouts).run())
        wake: list[int] = []
        if view.cloud_ops.deleting:  # deletions asked of the cloud (cloud_ops.py)
            events.extend(deletion_events(view, now, rng, wake))
        if view.faults or view.cloud_ops.scheduled_preemptions:  # spot preemptions (cloud_ops.py)
            events.extend(preemption_events(view, now, wake))
        return Decision(tuple(events), min(wake) if wake else None)


class _Serve:
    """One group's unanswered requests, oldest first, answered in full in one decision."""

    def __init__(self, view: ClusterState, group: NodeGroupState, now: int, rng: random.Random,
                 silent_stockouts: bool = False) -> None:
        self.view, self.group, self.now, self.rng = view, group, now, rng
        self.running = running(view, group)
        self.faults = cloud_faults(view, group.name, now)
        self.quota = self.faults.quota_of(group.quota)
        self.stock = 0 if self.faults.stockout else stock_left(group, now)
        self.index = group.next_index
        self.booking = ""  # the request being answered reserves its nodes for this ProvisioningRequest
        self.copy_template: Callable[[], dict[str, Any]] | None = None  # made for the first node delivered
        self.events: list[AnyEvent] = []
        self.settings = view.cloud_ops.groups.get(group.name)  # a misbehaving cloud (None: as always)
        self.zones = ZonePicker(view, group, self.faults, self.settings)
        self.retry = silent_stockouts or (self.settings is not None and self.settings.retry_stockouts)

    def run(self) -> list[AnyEvent]:
        for nodes, atomic, booking in self.group.unserved:
            self.booking = booking
            if atomic:
                self._atomic(nodes)
            else:
                self._partial(nodes)
        return self.events

    def _quota_room(self) -> int:
        return UNLIMITED if self.quota < 0 else max(self.quota - self.running, 0)

    def _fail(self, nodes: int, reason: str) -> None:
        if nodes > 0:
            self.events.append(ScaleUpFailed(group=self.group.name, delta=nodes, reason=reason))

    def _instance_fails(self) -> bool:
        return self.group.failure_rate > 0 and self.rng.random() < self.group.failure_rate

    def _atomic(self, nodes: int) -> None:
        if nodes > self._quota_room():
            self._fail(nodes, "quota")
        elif nodes > self.stock or self.faults.deliverable(nodes) < nodes:  # a partial-fulfilment: not all
            self._fail(nodes, "out-of-stock")
        elif any([self._instance_fails() for _ in range(nodes)]):  # every draw made: a fixed number of them
            self._fail(nodes, "instance-failed")
        elif (why := self.zones.short(self.index, nodes)):  # the zones cannot take them all (cloud_zones.py)
            self._fail(nodes, why)
        else:
            for _ in range(nodes):
                self._deliver()

    def _partial(self, nodes: int) -> None:
        allowed = min(nodes, self._quota_room())
        self._fail(nodes - allowed, "quota")
        in_stock = min(allowed, self.stock, self.faults.deliverable(nodes))
        retried = 0
        if self.retry:  # kept in the target, retried in silence (retryStockouts, or autoscaler#3490)
            retried = min(allowed, self.faults.deliverable(nodes)) - in_stock
        self._fail(allowed - in_stock - retried, "out-of-stock")
        failed = 0
        no_zone: dict[str, int] = {}
        for i in range(in_stock + retried):
            if i < in_stock and self._instance_fails():
                failed += 1
            elif (reason := self._deliver(retry=i >= in_stock)):
                no_zone[reason] = no_zone.get(reason, 0) + 1
        self._fail(failed, "instance-failed")
        for reason, count in sorted(no_zone.items()):
            self._fail(count, reason)

    def _deliver(self, retry: bool = False) -> str:
        """Make one node; `retry`: one the cloud has no stock for and retries until stock returns. Returns
        "" when made, else why not (no zone could take it: cloud_zones.py)."""
        group = self.group
        while node_name(group.name, self.index) in self.view.nodes or \
                node_name(group.name, self.index) in self.view.provisioning_nodes:
            self.index += 1  # a name taken by a node made outside the cloud
        zone, why = self.zones.pick(self.index)
        if zone is None:
            return why
        name = node_name(group.name, self.index)
        start = self.now
        if retry:
            start = restock_at(self.view, group, self.now,
                               lambda t: max(self.stock, 0) if t == self.now else stock_left(group, t))
            self.events.append(InstancePending(name=name, until=start))
        ready_at = start + draw(group.provision_delay_ms, self.rng) if start >= 0 else -1
        register_at = max(start, ready_at - group.not_ready_ms) if start >= 0 else -1
        if self.settings is not None and self.settings.never_ready_rate > 0 and \
                self.rng.random() < self.settings.never_ready_rate:
            ready_at = -1  # it registers and never turns Ready (register_at as drawn)
        if self.settings is not None and self.settings.preemption_rate > 0:  # a spot group (cloud_ops.py)
            self.events.extend(preemption_drawn(name, ready_at, self.settings, self.rng))
        publish = {d.name: draw(d.publish_delay_ms, self.rng) for d in group.drivers}
        if self.copy_template is None:
            self.copy_template = copier(group.template)
        node = node_from_template(group, name, zone, self.copy_template)
        if self.booking:  # a capacity reservation: only the request's consumer pods may land here
            spec = node.setdefault("spec", {})
            spec["taints"] = [*(spec.get("taints") or []),
                              {"key": BOOKING_TAINT, "value": self.booking.replace("/", "."), "effect": "NoSchedule"}]
        self.events.append(NodeProvisioning(
            name=name, group=group.name, node=node,
            register_at=register_at, ready_at=ready_at, publish_delay_ms=publish))
        self.index += 1
        self.running += 1
        self.stock -= 1
        self.zones.take(zone)
        return ""
