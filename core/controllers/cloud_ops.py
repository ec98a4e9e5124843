"""The cloud's slow or failing deletions, its silent retries of stockouts and its spot preemptions.

Deletions (a group with `deleteDelay`/`deleteFailureRate`, or a `deletion-delay`/`deletion-failure` fault on
it: core/scenario/cloud_ops.py). Upstream, cluster-autoscaler drains a node, then calls the provider's
`NodeGroup.DeleteNodes` (core/scaledown/actuation/delete_in_batch.go, `deleteNodesFromCloudProvider`); the
call waits for the cloud's operation, and the Node object goes once the instance is gone. If the call fails,
`CleanUpAndRecordFailedScaleDownEvent` removes the ToBeDeleted taint and writes a `ScaleDownFailed` event;
the node stays, empty and billed, and may be chosen again once it has been unneeded long enough
(`RegisterFailedScaleDown` records nothing in 1.34-1.37, and `--scale-down-delay-after-failure` is only
armed by an error of the loop's own `StartDeletion`, not by a failure in the deletion's goroutine). Here:
the autoscaler's `NodeDeletionRequested` is answered by the cloud's `NodeDeleting` (the delay drawn, the
outcome decided, with the decision's seeded source), then at `done_at` by `NodeDeleted` (its pods left
ending Failed, as delete_node does) or `NodeDeletionFailed`; the autoscaler's side is
core/autoscaler/disruption/cloud_deletions.py.

Spot preemption (`spot-preemption` fault on a node): the cloud's interruption notice (AWS: 2 minutes, the
EC2 Spot instance interruption notice; GCE: 30 s for preemptible and Spot VMs). The node termination
handler (aws-node-termination-handler; on GCE the kubelet's graceful node shutdown) taints the node so
nothing new lands and deletes its pods gracefully within the notice: each pod ends `min(its grace period,
the notice left)` later; at the deadline the instance stops and the Node goes, any pod left ending Failed.

A retried stockout (`retryStockouts`): `restock_at` says when the group's stock first returns.
"""

from __future__ import annotations

import random
from typing import Any

from ..cluster.cloud_faults import active_faults, is_active
from ..cluster.nodes import delete_node, set_taints
from ..kube.defaults import SPOT_INTERRUPTION_NOTICE_MS
from ..log.events import (
    AnyEvent,
    NodeDeleting,
    NodeDeletionFailed,
    NodeGroupCloudDefined,
    NodePreemptionNotice,
    NodePreemptionScheduled,
    PodTerminating,
)
from ..state.cluster import ClusterState, NodeGroupState
from ..state.termination import grace_ms, terminating

DELETION_FAILED = "cloud: instance deletion failed"
HOUR_MS = 3_600_000
# aws-node-termination-handler's taint for a Spot interruption notice (pkg/node/node.go, SpotInterruptionTaint)
PREEMPTION_TAINT = {"key": "aws-node-termination-handler/spot-itn", "value": "", "effect": "NoSchedule"}


def _draw(delay: tuple[int, int], rng: random.Random) -> int:
    low, high = delay
    return rng.randint(low, high) if high > low else low


def deletion_events(view: ClusterState, now: int, rng: random.Random, wake: list[int]) -> list[AnyEvent]:
    """Answer the deletions asked since the last decision, and complete those due: in node-name order."""
    ops = view.cloud_ops
    events: list[AnyEvent] = []
    for name in sorted(ops.deleting):
        deletion = ops.deleting[name]
        node = view.nodes.get(name)
        vm = view.provisioning_nodes.get(name) if node is None else None  # an unregistered instance
        group = node.group if node is not None else vm.group if vm is not None else None
        if group is None:
            continue  # gone some other way (a preemption)
        done_at, error = deletion.done_at, deletion.error
        if done_at < 0:  # not answered yet: decide now
            settings = ops.groups.get(group)
            faults = active_faults(view, ("deletion-delay", "deletion-failure"), group, now) if view.faults \
                else []
            delay = _draw(settings.delete_delay_ms, rng) if settings is not None else 0
            delay += max((int(f.params.get("delay", 0)) for f in faults if f.kind == "deletion-delay"), default=0)
            fails = any(f.kind == "deletion-failure" for f in faults)
            if settings is not None and settings.delete_failure_rate > 0:
                fails = rng.random() < settings.delete_failure_rate or fails  # drawn whatever the faults say
            done_at, error = now + delay, DELETION_FAILED if fails else ""
            events.append(NodeDeleting(name=name, done_at=done_at, error=error))
        if done_at > now:
            wake.append(done_at)
        elif error:
            events.append(NodeDeletionFailed(name=name, reason=error))
        else:
            events += delete_node(view, name, reason=f"cloud: instance deleted ({deletion.reason})", direct=True)
    return events


def preemption_drawn(name: str, ready_at: int, settings: NodeGroupCloudDefined,
                     rng: random.Random) -> list[AnyEvent]:
    """A new spot node's preemption: an exponential time of the group's rate after it turns Ready (none for a
    node never Ready), drawn now with the decision's source."""
    if ready_at < 0:
        return []
    notice_at = ready_at + max(1, round(rng.expovariate(settings.preemption_rate / HOUR_MS)))
    return [NodePreemptionScheduled(name=name, notice_at=notice_at,
                                    deadline=notice_at + settings.preemption_notice_ms)]


def _preemptions(view: ClusterState) -> list[tuple[str, int, int]]:
    """(node, notice at, deadline) of every spot preemption: the faults' (a node that did not exist when one
    started is not hit, even if a node of that name comes later), then those drawn by the cloud."""
    out = []
    for fault in view.faults.values():
        node = view.nodes.get(fault.target) if fault.kind == "spot-preemption" else None
        if node is not None and node.created_t <= fault.start_ms:
            notice = int(fault.params.get("notice", SPOT_INTERRUPTION_NOTICE_MS))
            out.append((node.name, fault.start_ms, fault.start_ms + notice))
    out.extend((name, at, deadline) for name, (at, deadline) in view.cloud_ops.scheduled_preemptions.items())
    return out


def preemption_events(view: ClusterState, now: int, wake: list[int]) -> list[AnyEvent]:
    """Spot preemptions due: the notice (taint, graceful pod deletion), then the node's end."""
    ops = view.cloud_ops
    events: list[AnyEvent] = []
    done: set[str] = set()
    for name, start, planned in _preemptions(view):
        node = view.nodes.get(name)
        if node is None or name in done:
            continue
        deadline = ops.preempted.get(name, planned)
        if start > now:
            wake.append(start)
            continue
        done.add(name)
        if now >= deadline:
            events += delete_node(view, node.name, reason="spot preemption", direct=True)
            continue
        wake.append(deadline)
        if node.name in ops.preempted:
            continue
        events.append(NodePreemptionNotice(name=node.name, deadline=deadline, reason="spot interruption notice"))
        events += set_taints(view, node.name, [*node.taints, PREEMPTION_TAINT])
        for key in node.pods:
            pod = view.pods[key]
            if not terminating(pod.manifest):
                events.append(PodTerminating(pod=key, node=node.name, grace_ms=min(grace_ms(pod.manifest),
                                                                                    deadline - now),
                                             reason="spot preemption: node termination handler"))
    return events


def restock_at(view: ClusterState, group: NodeGroupState, now: int, left: Any) -> int:
    """The first time from `now` when the group has stock again and no group-wide stockout is in force (-1:
    never, as far as the scenario says). `left(t)` is the stock left at `t` (cloud.stock_left)."""
    stockouts = [f for f in view.faults.values() if f.kind == "cloud-stockout" and f.target == group.name
                 and "zone" not in f.params]
    times = {now}
    times.update(t for w in group.stock for t in (w.from_ms, w.until_ms) if t > now)
    times.update(f.until_ms for f in stockouts if f.until_ms > now)
    for t in sorted(times):
        if left(t) > 0 and not any(is_active(f, t) for f in stockouts):
            return t
    return -1
