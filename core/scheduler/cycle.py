"""A scheduling cycle's state (kube-scheduler's CycleState and assume cache), apart from the scheduler
reactor (reactor.py) so that its plugins (plugins/gang_scheduling.py, plugins/dynamic_resources.py) can
take it without importing the reactor: what one decision has taken so far, on which nodes, and the
events it will append."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..dra.allocated import AllocatedState
from ..dra.allocator import Allocator
from ..log.events import AnyEvent, ClaimAllocated, ClaimReserved, PodBound, PodUnschedulable
from ..state.cluster import ClusterState, PodState
from ..state.gangs import Reservation
from .framework import ScorePlugin, Status
from .plugins.dynamic_resources import Held, PodClaims
from .plugins.fragmentation import FreeDevices, workload_histogram


def pod_has_claims(pod: PodState) -> bool:
    return bool(pod.manifest.get("spec", {}).get("resourceClaims"))


class Used:
    """Each node's usage in a decision: the view's, copied on the first write (the assume cache)."""

    __slots__ = ("_nodes", "_own")

    def __init__(self, view: ClusterState) -> None:
        self._nodes = view.nodes
        self._own: dict[str, dict[str, int]] = {}

    def __getitem__(self, name: str) -> dict[str, int]:
        """Read only: the view's own dict when the decision has not changed the node."""
        own = self._own.get(name)
        return own if own is not None else self._nodes[name].used

    def own_map(self) -> dict[str, dict[str, int]]:
        """The nodes the decision has changed (read only; others: the node's own `used`)."""
        return self._own

    def own(self, name: str) -> dict[str, int]:
        """The decision's copy, to change."""
        own = self._own.get(name)
        if own is None:
            own = self._own[name] = dict(self._nodes[name].used)
        return own


@dataclass
class Savepoint:
    """A point of a decision to roll back to (Cycle.savepoint)."""

    events: int
    changed: int
    own: dict[str, dict[str, int] | None]  # node -> its decision usage before the first change since (None: none)
    assumed: dict[str, dict[str, Any]]
    held: Held
    dra_failed: set[tuple[str, str]]
    failed: dict[tuple[str, tuple[tuple[str, int], ...], int], tuple[int, Status]]
    reserved: set[tuple[str, str]]
    moves: int = 0  # len(Cycle.moves) then
    # (added, allocation): added to or removed from `allocated` since, in order
    allocations: list[tuple[bool, dict[str, Any]]] = field(default_factory=list)


class Cycle:
    """One decision's scratch state: the assume cache (resources and devices taken by the bindings
    made earlier in this decision) and the events so far."""

    def __init__(self, view: ClusterState, rng: random.Random, held: list[Reservation] | None = None,
                 nominated: dict[str, str] | None = None) -> None:
        self.view = view
        self.rng = rng
        self.used = Used(view)
        self._allocated: AllocatedState | None = None
        self.assumed: dict[str, dict[str, Any]] = {}  # claim key -> allocation made in this decision
        self.held: Held = {}  # claim key -> (gang, allocation) of gang members waiting at Permit
        # (node, claims shape) pairs that failed DRA in this decision; devices only get scarcer within
        # a decision (bindings take, nothing frees), so a failure stays a failure until the cycle ends.
        self.dra_failed: set[tuple[str, str]] = set()
        self.static: dict[str, list[tuple[str, str | None]]] = {}  # static_shape -> per-node static filter
        self.static_maps: dict[str, dict[str, str | None]] = {}  # the same as maps (topology domains' lookups)
        self.generation = -1  # the scheduler's node generation (Scheduler._static_nodes), once looked at
        self.cursor = [view.offset]  # where the next node search starts (upstream: nextStartNodeIndex)
        self._free: FreeDevices | None = None
        self._histogram: dict[int, float] | None = None
        self.events: list[AnyEvent] = []
        self.changed: list[str] = []  # nodes whose usage the decision changed, in order (feasibility_cache.py)
        # (static shape, requests, len(changed)) -> (static list's length, the pod's Status) of a claim-free
        # pod that failed: the answer for its likes until the next binding (Scheduler._schedule)
        self.failed: dict[tuple[str, tuple[tuple[str, int], ...], int], tuple[int, Status]] = {}
        self._journal: list[Savepoint] = []  # open savepoints, newest last
        self.reserved: set[tuple[str, str]] = set()  # (claim, PodGroup consumer) reserved in this decision
        # every pod put on (1) or taken off (-1) a node in the decision, in order, and how many rollbacks cut
        # it: the pods-per-node overlay of PodTopologySpread and InterPodAffinity (placement.py)
        self.moves: list[tuple[PodState, str, int]] = []
        self.moves_epoch = 0
        self.pod_view: object | None = None  # placement.py's CyclePods over `moves`, once needed
        for reservation in held or ():
            self._take(view.pods[reservation.pod], reservation.node, reservation.allocations)
            self.held.update((k, (reservation.gang, a)) for k, a in reservation.allocations.items())
        # pending pods' nominatedNodeName (a PodGroup or a pod that preempted): the room is kept for them
        # until their own cycle; a single pod's attempt sees only those of its priority or higher
        # (hide_nominated, upstream's Filter with nominated pods)
        self.nominated: dict[str, str] = {}
        self.cleared: set[str] = set()  # pods whose nomination this decision cleared (DefaultPreemption)
        for key, node in (nominated or {}).items():
            pod = view.pods.get(key)
            if pod is not None and pod.node is None and node in view.nodes:
                self._take(pod, node, {})
                self.nominated[key] = node

    @property
    def allocated(self) -> AllocatedState:
        if self._allocated is None:
            self._allocated = self.view.dra.allocated.copy()
        return self._allocated

    @property
    def free_devices(self) -> FreeDevices:
        if self._free is None:
            self._free = FreeDevices(self.view, self.allocated)
        return self._free

    def histogram(self, demand: dict[str, int]) -> dict[int, float]:
        """The workload's device demand, once per decision (fragmentation score)."""
        if self._histogram is None:
            self._histogram = workload_histogram(self.view, demand)
        return self._histogram

    def savepoint(self) -> Savepoint:
        """What `rollback` needs to undo the bindings made after this point (a PodGroup's trial placement:
        plugins/pod_group.py). Usage is journalled, not copied: rolling back writes the old usage and
        appends the nodes to `changed` again, so the feasibility cache, which reads `changed` as a growing
        journal, re-evaluates them."""
        sp = Savepoint(len(self.events), len(self.changed), {},
                       dict(self.assumed), dict(self.held), set(self.dra_failed), dict(self.failed),
                       set(self.reserved), moves=len(self.moves))
        self._journal.append(sp)
        return sp

    def rollback(self, sp: Savepoint) -> None:
        """Undo everything since `sp` (which must be the newest savepoint)."""
        assert self._journal and self._journal[-1] is sp, "rollback of a savepoint that is not the newest"
        self._journal.pop()
        del self.events[sp.events:]
        own = self.used.own_map()
        for node, before in sp.own.items():
            if before is None:
                own.pop(node, None)
            else:
                own[node] = before
        self.changed.extend(sp.own)
        for added, allocation in reversed(sp.allocations):
            if added:
                self.allocated.remove_allocation(allocation)
            else:
                self.allocated.add_allocation(allocation)
        self.assumed, self.held, self.dra_failed, self.failed = sp.assumed, sp.held, sp.dra_failed, sp.failed
        self.reserved = sp.reserved
        self._free = None
        if len(self.moves) > sp.moves:
            del self.moves[sp.moves:]
            self.moves_epoch += 1

    def release(self, sp: Savepoint) -> None:
        """Keep what was done since `sp` (which must be the newest savepoint)."""
        assert self._journal and self._journal[-1] is sp, "release of a savepoint that is not the newest"
        self._journal.pop()
        if self._journal:
            outer = self._journal[-1]
            outer.allocations.extend(sp.allocations)
            for node, before in sp.own.items():
                outer.own.setdefault(node, before)

    def bind(self, pod: PodState, node: str, claims: PodClaims, allocations: dict[str, dict[str, Any]]) -> None:
        self.events.append(PodBound(pod=pod.key, node=node))
        consumers = claims.consumers
        for key, allocation in allocations.items():
            consumer = consumers.get(key, pod.key)  # a PodGroup's claim is reserved for the group (KEP-5729)
            self.events.append(ClaimAllocated(claim=key, allocation=allocation, pod=consumer))
            self.assumed[key] = allocation
            if consumer != pod.key:
                self.reserved.add((key, consumer))
        for key, _ in claims.allocated:
            state = self.view.dra.claims[key]
            consumer = consumers.get(key, pod.key)
            if consumer not in state.reserved_for and (key, consumer) not in self.reserved:
                self.events.append(ClaimReserved(claim=key, pod=consumer))
                if consumer != pod.key:
                    self.reserved.add((key, consumer))
        self._take(pod, node, allocations)

    def hold(self, pod: PodState, node: str, allocations: dict[str, dict[str, Any]], gang: str) -> None:
        """Reserve without binding: a gang member waiting at Permit (see plugins/gang_scheduling.py)."""
        self._take(pod, node, allocations)
        self.held.update((k, (gang, a)) for k, a in allocations.items())

    def _take(self, pod: PodState, node: str, allocations: dict[str, dict[str, Any]]) -> None:
        for allocation in allocations.values():
            self.allocated.add_allocation(allocation)
            if self._journal:
                self._journal[-1].allocations.append((True, allocation))
        if allocations and self._free is not None:
            self._free.forget(node)
        self._count(pod, node, 1)

    def _count(self, pod: PodState, node: str, sign: int) -> None:
        """Add (1) or take away (-1) the pod's requests and pod slot on the node, in the decision's usage."""
        node_used = self._writable(node)
        self.changed.append(node)
        self.moves.append((pod, node, sign))
        for resource, amount in pod.requests.items():
            node_used[resource] = node_used.get(resource, 0) + sign * amount
        node_used["pods"] = node_used.get("pods", 0) + sign

    def _writable(self, node: str) -> dict[str, int]:
        """The decision's usage of `node`, to change; inside a savepoint, what it was is journalled first."""
        if self._journal:
            sp = self._journal[-1]
            if node not in sp.own:
                current = self.used.own_map().get(node)
                sp.own[node] = dict(current) if current is not None else None
        return self.used.own(node)

    def release_nomination(self, pod: PodState) -> None:
        """The pod's own cycle: the room kept for its nomination is its to take again (not anyone else's)."""
        node = self.nominated.pop(pod.key, None)
        if node is not None:
            self._count(pod, node, -1)

    def nominate(self, pod: PodState, node: str) -> None:
        """Keep room on `node` for a pod nominated there in this decision (DefaultPreemption's preemptor)."""
        self.release_nomination(pod)
        self._count(pod, node, 1)
        self.nominated[pod.key] = node

    def hide_nominated(self, pod: PodState) -> list[tuple[PodState, str]]:
        """Upstream's rule for a single pod's filters (RunFilterPluginsWithNominatedPods, addGENominatedPods): the
        pods nominated to a node count there only if their priority is at least the pod's, and the pod itself
        never does. Take away the others' room for this attempt; `show_nominated` puts it back."""
        hidden: list[tuple[PodState, str]] = []
        for key, node in list(self.nominated.items()):
            other = self.view.pods[key]
            if key == pod.key or other.priority < pod.priority:
                self.release_nomination(other)
                hidden.append((other, node))
        return hidden

    def show_nominated(self, hidden: list[tuple[PodState, str]], pod: PodState, keep_own: bool) -> None:
        """The room `hide_nominated` took away, back (the pod's own only if it is still nominated there and not
        bound: `keep_own`), unless the attempt nominated the pod elsewhere or cleared another's nomination."""
        for other, node in hidden:
            if other.key == pod.key and (not keep_own or other.key in self.nominated):
                continue
            if other.key != pod.key and other.key in self.cleared:
                continue
            self._count(other, node, 1)
            self.nominated[other.key] = node

    def remove(self, pod: PodState, allocations: list[dict[str, Any]]) -> None:
        """Take a running pod off its node in this decision (a preemption victim, while preemption weighs
        it; always inside a savepoint), and free `allocations` (the claims only it uses)."""
        assert self._journal, "a pod is removed only inside a savepoint"
        for allocation in allocations:
            self.allocated.remove_allocation(allocation)
            self._journal[-1].allocations.append((False, allocation))
        self._free = None
        self._count(pod, str(pod.node), -1)

    def restore(self, pod: PodState, allocations: list[dict[str, Any]]) -> None:
        """Put back a pod `remove` took off (a victim preemption reprieves)."""
        self._take(pod, str(pod.node), {str(i): a for i, a in enumerate(allocations)})

    def pending(self, pod: PodState, reason: str, message: str, cause: str, detail: str) -> None:
        """Write the PodScheduled condition: always after a failed attempt (`Unschedulable`, which counts
        attempts and times the backoff), only when it changed for a PreEnqueue rejection."""
        cond = pod.condition
        if cond is None or reason == "Unschedulable" or (
                cond.reason, cond.message, cond.cause, cond.detail) != (reason, message, cause, detail):
            self.events.append(PodUnschedulable(pod=pod.key, reason=reason, message=message, cause=cause,
                                                detail=detail))


@dataclass
class Attempt:
    """One pod's scheduling attempt within a decision (upstream's CycleState): what each extension point
    hands to those after it (profile.py, plain.py)."""

    cycle: Cycle
    pod: PodState
    gang: str | None = None  # the pod's gang (GangScheduling), when its policy has a minCount
    claims: PodClaims = field(default_factory=PodClaims)  # DynamicResources' PreFilter
    allocator: Allocator | None = None  # built at PreFilter when a claim is to be allocated
    score: ScorePlugin | None = None  # the policy's scorer for this pod (PreScore)
    dra_nodes: list[str] = field(default_factory=list)  # nodes that failed DynamicResources' Filter only
    reasons: Counter[str] = field(default_factory=Counter)  # the filters' reasons, counted over nodes
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)  # the chosen node's, by claim
