"""The autoscaler reactor: cluster-autoscaler's scale-up loop, over its own view of the log.

Like CA's StaticAutoscaler.RunOnce (cluster-autoscaler/core/static_autoscaler.go) it wakes every
scan interval (10 s by default), looks only at pods whose PodScheduled condition says
`Unschedulable` (what the scheduler wrote to the log, nothing else), first counts upcoming nodes
(requested or created but not Ready) as template nodes that will absorb pods, and then simulates
each node group's template node with the scheduler's own filters to pick one scale-up (an
expander chooses between groups; ties go to the seeded random source, as CA falls back to random).

What the simulation knows about devices is the policy (capacity.py): `count` treats them as integer
counts, `dra` runs the scheduler's allocator on the template node's slices and waits for drivers to
publish, `atomic` is `dra` with gangs scaled up whole (a gang's pending members all fit the new nodes
of one group, or none is counted). Backoff, max-node-provision-time and scale-down come next.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..dra.model import Slice
from ..engine.contract import Decision, Trigger
from ..kube.defaults import EXPANDER, MAX_NODE_PROVISION_TIME_MS, MAX_NODE_STARTUP_TIME_MS, SCAN_INTERVAL_MS
from ..kube.provreq import consumed_request
from ..log.events import AnyEvent, ScaleUpRequested, ScaleUpTimedOut
from ..scheduler.dynamic_resources import DraPlugin
from ..scheduler.filters import ShapeMemo
from ..state.cluster import ClusterState, NodeGroupState, NodeState, PodState
from ..state.gangs import Reservation
from .backoff import Timeouts, backed_off
from .capacity import POLICIES, FirstFit, FitMemo, SimNode, Simulation, StaticMemo, devices_unpublished
from .provreq_broker import Broker
from .scale_down import ScaleDown
from .virtual_claims import MATERIALIZE, UNRESOLVED

EXPANDERS = ("least-waste", "most-pods", "price", "priority", "random")


@dataclass(frozen=True)
class Option:
    """One candidate scale-up: a group, how many nodes, which pods they would take."""

    group: NodeGroupState
    count: int
    pods: tuple[str, ...]
    waste: float


def binpack(pods: list[PodState], group: NodeGroupState, limit: int, sim: Simulation,
            gangs: dict[str, list[PodState]] | None = None) -> tuple[int, list[str], float]:
    """First-fit onto new template nodes, at most `limit` of them (CA's binpacking estimator).

    With `gangs` (the atomic policy: gang key -> its pods among `pods`), a gang's pods are placed all
    together or not at all. Returns the node count, the pods placed, and the waste: mean unused fraction
    of each resource the pods ask for, over the new nodes (the least-waste expander's score)."""
    nodes: list[SimNode] = []
    first_fit = FirstFit(sim, nodes)
    placed: list[str] = []
    done: set[str] = set()
    gang_of = {p.key: g for g, members in (gangs or {}).items() for p in members}
    for pod in pods:
        if pod.key in done:
            continue
        gang = gang_of.get(pod.key)
        unit = gangs[gang] if gangs and gang is not None else [pod]
        done.update(p.key for p in unit)
        saved = (([(n, dict(n.used), n.devices_used) for n in nodes], len(nodes), sim.allocated.copy())
                 if gang is not None else None)
        ok = True
        for member in unit:
            spot = first_fit.find(member)
            if spot is None and len(nodes) < limit:
                fresh = sim.template(group, f"template-{group.name}-{len(nodes)}")
                allocations = sim.fits(member, fresh)
                if allocations is not None:
                    nodes.append(fresh)
                    spot = (fresh, allocations)
            if spot is None:
                ok = False
                break
            sim.place(member, spot[0], spot[1])
        if ok:
            placed.extend(p.key for p in unit)
            continue
        if saved is None:
            continue  # a single pod that fits nowhere: nothing was placed
        old, count, allocated = saved  # roll the gang back: no partial scale-up
        for node, used, devices in old:
            node.used, node.devices_used = used, devices
        del nodes[count:]
        sim.allocated = allocated
        first_fit.reset()
    resources = sorted({r for p in pods if p.key in placed for r in p.requests if group.allocatable.get(r)})
    if not nodes or not resources:
        return len(nodes), placed, 1.0
    waste = sum(
        1 - sum(n.used.get(r, 0) for n in nodes) / (group.allocatable[r] * len(nodes)) for r in resources
    ) / len(resources)
    return len(nodes), placed, waste


def node_ready_for(view: ClusterState, policy: str, node: NodeState) -> bool:
    """Whether the policy counts the node as ready (DRA policies wait for its drivers' slices)."""
    return node.ready and (policy == "count" or not devices_unpublished(view, node))


def occupied(nominated: dict[str, Reservation]) -> set[str]:
    return {r.node for r in nominated.values()}


@dataclass
class Autoscaler:
    policy: str = "count"
    scan_interval_ms: int = SCAN_INTERVAL_MS
    max_node_provision_time_ms: int = MAX_NODE_PROVISION_TIME_MS
    max_node_startup_time_ms: int = MAX_NODE_STARTUP_TIME_MS
    expander: str = EXPANDER
    priorities: dict[str, int] = field(default_factory=dict)
    scale_down: dict[str, Any] = field(default_factory=dict)  # ScaleDown's fields (scenario: autoscaler.scaleDown)
    capacity_revoked: bool = False  # revoke bookings whose capacity is gone (provreq_broker.Broker.revoke)
    reserve_bookings: bool = False  # new nodes of an atomic request reserved for its consumers (a taint)
    provisioning_request_claims: str = MATERIALIZE  # or UNRESOLVED: autoscaler#10065 (virtual_claims.py)
    name: str = "autoscaler"
    trigger: Trigger = "interval"

    def __post_init__(self) -> None:
        if self.expander not in EXPANDERS:
            raise ValueError(f"unknown expander {self.expander!r}; expected one of {list(EXPANDERS)}")
        if self.policy not in POLICIES:
            raise ValueError(f"unknown autoscaler policy {self.policy!r}; expected one of {list(POLICIES)}")
        if self.provisioning_request_claims not in (MATERIALIZE, UNRESOLVED):
            raise ValueError(f"unknown provisioningRequestClaims {self.provisioning_request_claims!r}; "
                             f"expected {MATERIALIZE!r} or {UNRESOLVED!r}")
        if self.scan_interval_ms <= 0:
            raise ValueError("scan interval must be positive")
        self._dra = DraPlugin()  # compiled selectors, a cache
        self._templates: dict[tuple[str, str], list[Slice]] = {}  # rendered template slices, a cache
        self._statics: StaticMemo = {}  # static filter answers per pod shape and node, a cache (capacity.py)
        self._fake: dict[str, list[PodState] | str] = {}  # each ProvisioningRequest's pods, a cache
        self._shapes = ShapeMemo()  # static_shape per pod, a cache (filters.py)
        self._fits = FitMemo()  # resource fit on the view's usage across loops, a cache (capacity.py)
        self._timeouts = Timeouts(self.max_node_provision_time_ms, self.max_node_startup_time_ms)
        self._scale_down = ScaleDown(**self.scale_down)

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        wake = now + self.scan_interval_ms
        broker = Broker(view, now, self._fake) if view.provisioning.requests else None
        events: list[AnyEvent] = broker.expire() if broker is not None else []
        ready = partial(node_ready_for, view, self.policy)
        # late nodes given up on: their groups back off (for `count`, only nodes never Ready can be late)
        timed_out = self._timeouts.check(view, now, ready, view.never_ready if self.policy == "count" else None)
        events += timed_out
        given_up = {n for e in timed_out if isinstance(e, ScaleUpTimedOut) for n in e.nodes}
        # groups in backoff, and those that fail in this very decision (the view does not show it yet)
        blocked = {name for name, group in view.node_groups.items() if backed_off(group, now)}
        blocked |= {e.group for e in timed_out if isinstance(e, ScaleUpTimedOut)}
        nominated = {k: r for k, r in view.gang.reservations.items() if r.nominated}

        def snapshot() -> tuple[Simulation, list[SimNode]]:  # for scale-down's drain simulation
            sim = Simulation(view, self.policy, self._dra, self._templates, self._statics,
                             virtual_claims=self.provisioning_request_claims == MATERIALIZE, shapes=self._shapes)
            return sim, self._ready_nodes(view, sim, nominated)

        def scale_down() -> list[AnyEvent]:
            return self._scale_down.decide(view, now, ready, occupied(nominated), snapshot)
        unschedulable = sorted(
            (p for p in view.pending_pods()
             if p.condition is not None and p.condition.reason == "Unschedulable" and p.key not in nominated
             and consumed_request(p.manifest) is None),  # consumers wait for their request's capacity
            key=lambda p: (-p.priority, p.created_offset),
        )
        request = broker.next_request() if broker is not None else None
        # WrapperOrchestrator: loops alternate between ProvisioningRequests and regular pods when both wait
        provreq_mode = request is not None and (not unschedulable or (now // self.scan_interval_ms) % 2 == 1)
        booked = broker.booked() if broker is not None else []
        watch_bookings = self.capacity_revoked and bool(booked)
        if not unschedulable and not provreq_mode and not watch_bookings:
            return Decision(tuple(events + scale_down()), wake)
        sim = Simulation(view, self.policy, self._dra, self._templates, self._statics,
                             virtual_claims=self.provisioning_request_claims == MATERIALIZE, shapes=self._shapes)
        ready_nodes = self._ready_nodes(view, sim, nominated)
        upcoming = self._upcoming(view, sim, given_up, blocked)
        self._fits.sync(view, ready_nodes)
        memo = self._fits
        if broker is not None:
            unplaced = self._absorb(sim, ready_nodes + upcoming, booked, memo)  # bookings: in the snapshot only
            if unplaced and self.capacity_revoked:
                events += broker.revoke(unplaced)
        if not unschedulable and not provreq_mode:
            return Decision(tuple(events + scale_down()), wake)
        if provreq_mode:
            assert broker is not None and request is not None
            handled = broker.handle(request, lambda pods: self._absorb(sim, ready_nodes, pods, memo),
                                    lambda pods: self._atomic_option(view, sim, pods, rng, blocked))
            events.extend(handled.events)
            if handled.scale_up is not None:
                target, nodes = handled.scale_up
                events.append(ScaleUpRequested(group=target, delta=nodes, atomic=True,
                                               booking=request.key if self.reserve_bookings else ""))
            return Decision(tuple(events), wake)
        remaining = self._absorb(sim, upcoming, self._absorb(sim, ready_nodes, unschedulable, memo), memo)
        if not remaining:
            return Decision(tuple(events + scale_down()), wake)
        gangs = self._gangs(view, remaining) if self.policy == "atomic" else None
        options = self._options(view, sim, remaining, blocked, gangs)
        if options:
            best = self._expand(options, rng)
            events.append(ScaleUpRequested(group=best.group.name, delta=best.count, pods=best.pods,
                                           atomic=self.policy == "atomic" and gangs is not None and bool(gangs)))
        return Decision(tuple(events), wake)

    def _atomic_option(self, view: ClusterState, sim: Simulation, pods: list[PodState],
                       rng: random.Random, blocked: set[str]) -> tuple[str, int] | None:
        """One node group that takes all `pods` on new nodes within its room (best-effort-atomic), as the
        expander picks among such groups."""
        options = [o for o in self._options(view, sim, pods, blocked) if len(o.pods) == len(pods)]
        if not options:
            return None
        best = self._expand(options, rng)
        return best.group.name, best.count

    @staticmethod
    def _options(view: ClusterState, sim: Simulation, pods: list[PodState], blocked: set[str],
                 gangs: dict[str, list[PodState]] | None = None) -> list[Option]:
        """Each node group's scale-up for `pods` (binpacked within the group's room), where it helps;
        `blocked` groups (in backoff) are skipped."""
        options = []
        for name in sorted(view.node_groups):
            group = view.node_groups[name]
            room = group.max - group.target_size
            if room <= 0 or name in blocked:
                continue
            count, placed, waste = binpack(pods, group, room, sim, gangs)
            if count:
                options.append(Option(group, count, tuple(placed), waste))
        return options

    @staticmethod
    def _ready_nodes(view: ClusterState, sim: Simulation, nominated: dict[str, Reservation]) -> list[SimNode]:
        """The snapshot's ready nodes, with the pods bound there and those nominated to them (CA
        force-places nominated pods into its snapshot)."""
        if sim.policy == "count":  # sim.ready and sim.existing, inlined: a loop over every node, every loop
            if not nominated:
                return [SimNode(node, node.used, False) for node in view.nodes.values() if node.ready]
            nodes = {name: SimNode(node, node.used, False) for name, node in view.nodes.items() if node.ready}
        else:
            nodes = {name: sim.existing(node, node.used) for name, node in view.nodes.items() if sim.ready(node)}
        for reservation in nominated.values():
            node = nodes.get(reservation.node)
            if node is not None:
                sim.place(view.pods[reservation.pod], node, reservation.allocations)
        return list(nodes.values())

    @staticmethod
    def _upcoming(view: ClusterState, sim: Simulation, given_up: set[str], blocked: set[str]) -> list[SimNode]:
        """Upcoming nodes (not ready yet, or not created yet), each as a template node of its group; not
        those of a group in backoff, nor nodes given up on."""
        upcoming: list[SimNode] = []
        live = set(view.node_groups) - blocked
        plain_ready = sim.policy == "count"
        for node in view.nodes.values():
            if node.ready if plain_ready else sim.ready(node):  # (sim.ready inlined for `count`: most nodes)
                continue
            group = view.node_groups.get(node.group)
            if (node.group in live and group is not None
                    and node.name not in group.timed_out and node.name not in given_up):
                upcoming.append(sim.template(group, f"upcoming-{node.name}"))
        for name in sorted(live):
            group = view.node_groups[name]
            coming = [n for n, vm in view.provisioning_nodes.items()
                      if vm.group == name and n not in group.timed_out and n not in given_up]
            count = len(coming) + group.unserved_nodes()
            upcoming.extend(sim.template(group, f"upcoming-{name}-{i}") for i in range(count))
        return upcoming

    @staticmethod
    def _absorb(sim: Simulation, nodes: list[SimNode], pods: list[PodState],
                memo: FitMemo | None = None) -> list[PodState]:
        """Place each pod on the first node that takes it (FilterOutSchedulable on ready nodes, then the
        upcoming ones); the pods no node takes. `memo`: the autoscaler's, synced to the view."""
        remaining = []
        first_fit = FirstFit(sim, nodes, memo)
        for pod in pods:
            spot = first_fit.find(pod)
            if spot is None:
                remaining.append(pod)
            else:
                sim.place(pod, spot[0], spot[1])
        return remaining

    @staticmethod
    def _gangs(view: ClusterState, pods: list[PodState]) -> dict[str, list[PodState]]:
        out: dict[str, list[PodState]] = {}
        for pod in pods:
            ref = view.gang.refs.get(pod.key)
            if ref is not None and view.gang.min_count(ref) is not None:
                out.setdefault(ref.key, []).append(pod)
        return out

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
