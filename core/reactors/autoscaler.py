"""The autoscaler reactor: cluster-autoscaler's scale-up loop, over its own view of the log.

Like CA's StaticAutoscaler.RunOnce (cluster-autoscaler/core/static_autoscaler.go) it wakes every
scan interval (10 s by default), looks only at pods whose PodScheduled condition says
`Unschedulable` (what the scheduler wrote to the log, nothing else), first counts upcoming nodes
(requested or created but not Ready) as template nodes that will absorb pods, and then simulates
each node group's template node with the scheduler's own filters to pick one scale-up (an
expander chooses between groups; ties go to the seeded random source, as CA falls back to random).

Policy `count` treats devices as integer counts (extended resources); the DRA-aware and atomic
policies, backoff, max-node-provision-time and scale-down come with the provisioning issue.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..events import ScaleUpRequested
from ..reactor import Decision, Trigger
from ..state import ClusterState, NodeGroupState, NodeState, PodState
from .scheduler import FILTERS, node_ready

TEMPLATE_FILTERS = tuple(f for f in FILTERS if f is not node_ready)
EXPANDERS = ("least-waste", "most-pods", "price", "priority", "random")


@dataclass(frozen=True)
class Option:
    """One candidate scale-up: a group, how many nodes, which pods they would take."""

    group: NodeGroupState
    count: int
    pods: tuple[str, ...]
    waste: float


def template_node(group: NodeGroupState) -> NodeState:
    """What a new node of the group will look like (CA's TemplateNodeInfo)."""
    return NodeState(
        name=f"template-{group.name}",
        group=group.name,
        manifest=group.template,
        allocatable=group.allocatable,
        created_t=0,
        ready_at=0,
        ready=True,
    )


def _fits(pod: PodState, node: NodeState, used: dict[str, int]) -> bool:
    return all(f(pod, node, used) is None for f in TEMPLATE_FILTERS)


def _place(pod: PodState, node: NodeState, used: dict[str, int]) -> None:
    for resource, amount in pod.requests.items():
        used[resource] = used.get(resource, 0) + amount
    used["pods"] = used.get("pods", 0) + 1


def binpack(pods: list[PodState], group: NodeGroupState, limit: int) -> tuple[int, list[str], float]:
    """First-fit onto new template nodes, at most `limit` of them (CA's binpacking estimator).

    Returns the node count, the pods placed, and the waste: mean unused fraction of each resource
    the pods ask for, over the new nodes (the least-waste expander's score)."""
    node = template_node(group)
    nodes: list[dict[str, int]] = []
    placed: list[str] = []
    for pod in pods:
        target = next((used for used in nodes if _fits(pod, node, used)), None)
        if target is None:
            if len(nodes) >= limit or not _fits(pod, node, {}):
                continue
            target = {}
            nodes.append(target)
        _place(pod, node, target)
        placed.append(pod.key)
    resources = sorted({r for p in pods if p.key in placed for r in p.requests if group.allocatable.get(r)})
    if not nodes or not resources:
        return len(nodes), placed, 1.0
    waste = sum(
        1 - sum(used.get(r, 0) for used in nodes) / (group.allocatable[r] * len(nodes)) for r in resources
    ) / len(resources)
    return len(nodes), placed, waste


@dataclass
class Autoscaler:
    policy: str = "count"
    scan_interval_ms: int = 10_000
    max_node_provision_time_ms: int = 900_000
    expander: str = "least-waste"
    priorities: dict[str, int] = field(default_factory=dict)
    name: str = "autoscaler"
    trigger: Trigger = "interval"

    def __post_init__(self) -> None:
        if self.expander not in EXPANDERS:
            raise ValueError(f"unknown expander {self.expander!r}; expected one of {list(EXPANDERS)}")
        if self.scan_interval_ms <= 0:
            raise ValueError("scan interval must be positive")

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        wake = now + self.scan_interval_ms
        nominated = {k: r for k, r in view.gang.reservations.items() if r.nominated}
        unschedulable = sorted(
            (p for p in view.pending_pods()
             if p.condition is not None and p.condition.reason == "Unschedulable" and p.key not in nominated),
            key=lambda p: (-p.priority, p.created_offset),
        )
        remaining = self._not_helped_by_upcoming(view, self._filter_out_schedulable(view, unschedulable))
        if not remaining:
            return Decision((), wake)
        options = []
        for name in sorted(view.node_groups):
            group = view.node_groups[name]
            room = group.max - group.target_size
            if room <= 0:
                continue
            count, pods, waste = binpack(remaining, group, room)
            if count:
                options.append(Option(group, count, tuple(pods), waste))
        if not options:
            return Decision((), wake)
        best = self._expand(options, rng)
        return Decision((ScaleUpRequested(group=best.group.name, delta=best.count, pods=best.pods),), wake)

    def _filter_out_schedulable(self, view: ClusterState, pods: list[PodState]) -> list[PodState]:
        """CA's FilterOutSchedulable: pods that fit a Ready node as it is now (the scheduler has not
        caught up yet) need no new node; they are placed in a scratch copy of the nodes' usage. Pods
        with a nominated node count as placed there (CA force-places them into its snapshot)."""
        used = {name: dict(node.used) for name, node in view.nodes.items()}
        for reservation in view.gang.reservations.values():
            if reservation.nominated and reservation.node in used:
                _place(view.pods[reservation.pod], view.nodes[reservation.node], used[reservation.node])
        remaining = []
        for pod in pods:
            fit = next((n for n in view.nodes.values() if all(f(pod, n, used[n.name]) is None for f in FILTERS)), None)
            if fit is None:
                remaining.append(pod)
            else:
                _place(pod, fit, used[fit.name])
        return remaining

    def _not_helped_by_upcoming(self, view: ClusterState, pods: list[PodState]) -> list[PodState]:
        """Pods that upcoming nodes (not yet Ready, or not yet created) will not absorb."""
        upcoming: list[tuple[NodeState, dict[str, int]]] = []
        for node in view.nodes.values():
            if not node.ready and node.group in view.node_groups:
                upcoming.append((template_node(view.node_groups[node.group]), {}))
        for name in sorted(view.node_groups):
            group = view.node_groups[name]
            upcoming.extend((template_node(group), {}) for _ in range(max(group.outstanding, 0)))
        remaining = []
        for pod in pods:
            slot = next(((n, used) for n, used in upcoming if _fits(pod, n, used)), None)
            if slot is None:
                remaining.append(pod)
            else:
                _place(pod, slot[0], slot[1])
        return remaining

    def _expand(self, options: list[Option], rng: random.Random) -> Option:
        """The expander's choice; among equally good options, random (CA's fallback)."""
        scores: dict[str, float]
        if self.expander == "least-waste":
            scores = {o.group.name: -o.waste for o in options}
        elif self.expander == "most-pods":
            scores = {o.group.name: float(len(o.pods)) for o in options}
        elif self.expander == "price":
            scores = {o.group.name: -o.group.cost_per_hour * o.count / max(len(o.pods), 1) for o in options}
        elif self.expander == "priority":
            scores = {o.group.name: float(self.priorities.get(o.group.name, 0)) for o in options}
        else:
            scores = {o.group.name: 0.0 for o in options}
        top = max(scores.values())
        best = [o for o in options if scores[o.group.name] == top]
        return best[0] if len(best) == 1 else rng.choice(best)
