"""Failed scale-ups and node-group backoff, as cluster-autoscaler's clusterstate registry keeps them
(cluster-autoscaler/clusterstate, utils/backoff/exponential_backoff.go).

A scale-up fails when the cloud says so (`ScaleUpFailed`: out of stock, quota, an instance that failed),
or when its nodes do not come in time: a VM that has not registered `max-node-provision-time` after the
cloud accepted it is given up on and deleted (removeOldUnregisteredNodes), and a node that registered but
is not ready `max-node-startup-time` later (not Ready, or, for the DRA-aware policies, its drivers have
not published) is given up on too (`ScaleUpTimedOut`) but left alone: it may still turn Ready, late,
paid for and maybe idle.

Each failure backs its group off: 5 min after the first, doubling if the previous backoff had already
ended, at most 30 min, back to 5 min after 3 h without failure (the flags' defaults: core/kube/defaults.py);
failures during an active backoff do not extend it. A group in backoff is skipped by scale-up (the
expander picks another group: the "fall back to another GPU type or zone" behaviour) and its upcoming
nodes are not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...kube.defaults import (
    INITIAL_NODE_GROUP_BACKOFF_MS,
    MAX_NODE_GROUP_BACKOFF_MS,
    MAX_NODE_PROVISION_TIME_MS,
    MAX_NODE_STARTUP_TIME_MS,
    NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS,
)
from ...log.events import AnyEvent, NodeDeleted, ScaleUpTimedOut
from ...state.cluster import ClusterState, NodeState
from ...state.groups import NodeGroupState


def backoff_until(group: NodeGroupState, initial_ms: int = INITIAL_NODE_GROUP_BACKOFF_MS,
                  max_ms: int = MAX_NODE_GROUP_BACKOFF_MS, reset_ms: int = NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS) -> int:
    """The end of the group's current (or last) backoff, from its failures; -1 if it never failed. The durations
    are the flags --initial-node-group-backoff-duration, --max-node-group-backoff-duration and
    --node-group-backoff-reset-timeout (spec.autoscaler fields of the same names)."""
    until, duration, last = -1, 0, None
    for t, _, _ in sorted(group.failures):
        if t < until:
            continue  # a failure during an active backoff does not compound
        compound = last is not None and t - last < reset_ms and duration
        duration = min(duration * 2, max_ms) if compound else initial_ms
        until, last = t + duration, t
    return until


def backed_off(group: NodeGroupState, now: int, initial_ms: int = INITIAL_NODE_GROUP_BACKOFF_MS,
               max_ms: int = MAX_NODE_GROUP_BACKOFF_MS, reset_ms: int = NODE_GROUP_BACKOFF_RESET_TIMEOUT_MS) -> bool:
    return now < backoff_until(group, initial_ms, max_ms, reset_ms)


@dataclass(frozen=True)
class Timeouts:
    max_node_provision_time_ms: int = MAX_NODE_PROVISION_TIME_MS
    max_node_startup_time_ms: int = MAX_NODE_STARTUP_TIME_MS

    def check(self, view: ClusterState, now: int, ready: Callable[[NodeState], bool],
              candidates: Iterable[str] | None = None) -> list[AnyEvent]:
        """The events that give up on late nodes: per group, one `ScaleUpTimedOut` naming them, and a
        `NodeDeleted` for each VM that never registered. `ready(node)` is the policy's readiness.
        `candidates`: names of the only nodes that can be late, in `view.nodes` order (the caller knows,
        e.g. `view.never_ready` when readiness is just Ready: a node Ready once and NotReady now is
        broken, not late); None: every node."""
        late: dict[str, list[str]] = {}
        deleted: list[AnyEvent] = []
        for name, vm in view.provisioning_nodes.items():
            group = view.node_groups.get(vm.group)
            started = view.provisioning_t.get(name, now)
            if group is not None and name not in group.timed_out and now >= started + self.max_node_provision_time_ms:
                late.setdefault(vm.group, []).append(name)
                deleted.append(NodeDeleted(name=name, reason="unregistered for max-node-provision-time"))
        nodes = view.nodes.values() if candidates is None else [view.nodes[name] for name in candidates]
        for node in nodes:
            group = view.node_groups.get(node.group)
            if group is None or node.name in group.timed_out or ready(node):
                continue
            broken = node.ready_t >= 0 and not node.ready  # Ready once, NotReady now: failed, not late
            if now >= node.created_t + self.max_node_startup_time_ms and not broken:
                late.setdefault(node.group, []).append(node.name)
        events: list[AnyEvent] = [ScaleUpTimedOut(group=g, nodes=tuple(names)) for g, names in sorted(late.items())]
        return events + deleted

