"""The default profile: dralab's plugins registered at upstream's extension points, over one pod's
Attempt (cycle.py), for the plain run (plain.py) and, where the point is not a fast path, the reactor.

Why here: the plugin modules (plugins/) hold the plugins' logic and import nothing of the cycle they run
in; the adapters below bind them to a decision (its cycle, its gangs, the reactor's DRA plugin and score)
in the shape of framework.py's Protocols, so that the plain run is one loop over the points. The
reactor's fast path calls DynamicResources' PreFilter and PostFilter from here too, so that each is
written once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from ..state.cluster import NodeState, PodState
from .cycle import Attempt, Cycle, pod_has_claims
from .filters import FILTERS, fit_error, fragmented
from .framework import Code, Profile, ScorePlugin, Status, unresolvable, unschedulable
from .placement import PlacementFilter
from .plugins import dynamic_resources, gang_scheduling
from .plugins.dynamic_resources import DraPlugin
from .plugins.fragmentation import dra_fragmentation
from .plugins.gang_scheduling import GangCycle, Placed
from .plugins.scheduling_gates import gated
from .preemption import PodPreemption

WAITING = Status(Code.WAIT, plugin=dynamic_resources.NAME)  # claims not created yet: nothing written


class DynamicResources:
    """DynamicResources at PreFilter (the pod's claims, and an allocator when one is to be allocated)
    and PostFilter (why no node could take the pod: dralab's diagnosis, not upstream's deallocation)."""

    def __init__(self, dra: DraPlugin) -> None:
        self.dra = dra

    def pre_filter(self, state: Attempt, pod: PodState) -> Status | None:
        cycle = state.cycle
        if pod_has_claims(pod):
            state.claims = self.dra.prefilter(cycle.view, pod, cycle.assumed, cycle.held, state.gang)
        claims = state.claims
        if claims.missing:
            return unresolvable(f"waiting for objects: {claims.missing}", "missing", dynamic_resources.NAME,
                                claims.missing)
        if claims.in_flight is not None:  # kubernetes#137617: Unschedulable, an attempt (plugins/dynamic_resources.py)
            return unschedulable(claims.in_flight, "gang", dynamic_resources.NAME, claims.in_flight)
        if claims.waiting:
            return WAITING  # the claim controller has not created the pod's claims yet, or a waiting gang holds one
        if claims.to_allocate:
            state.allocator = self.dra.allocator(cycle.view, cycle.allocated)
        return None

    def post_filter(self, state: Attempt, pod: PodState, reasons: Counter[str]) -> Status:
        """The FitError, its pending cause refined: the allocator's explanation on the closest node that
        failed DRA only, `fragmentation` when devices (DRA or extended) are split over nodes."""
        view, cycle = state.cycle.view, state.cycle
        status = fit_error(len(view.nodes), reasons)
        cause, detail = status.cause, ""
        if state.dra_nodes and state.allocator is not None:
            cause, detail = self.dra.explain(state.allocator, state.claims, view.nodes[state.dra_nodes[0]])
            if cause == "capacity":
                split = dra_fragmentation(view, self.dra.matcher, cycle.allocated, state.claims.to_allocate,
                                          state.dra_nodes)
                if split is not None:
                    cause, detail = "fragmentation", split
        elif cause == "capacity" and fragmented(view, pod, cycle.used):
            cause = "fragmentation"
        return replace(status, cause=cause, detail=detail)


class GangScheduling:
    """GangScheduling at PreEnqueue (the group must exist with minCount pods), PreFilter (dralab: the
    pod's group, for the points after), Reserve (hold the node) and Permit (wait for the group)."""

    def __init__(self, gangs: GangCycle) -> None:
        self.gangs = gangs

    def pre_enqueue(self, pod: PodState) -> Status | None:
        _, rejection = self.gangs.admit(pod)
        if rejection is None:
            return None
        return unresolvable(rejection.message, rejection.cause, gang_scheduling.NAME, rejection.detail)

    def pre_filter(self, state: Attempt, pod: PodState) -> Status | None:
        state.gang, _ = self.gangs.admit(pod)
        return None

    def reserve(self, state: Attempt, pod: PodState, node: str) -> Status | None:
        if state.gang is not None:
            state.cycle.hold(pod, node, state.allocations, state.gang)
        return None

    def unreserve(self, state: Attempt, pod: PodState, node: str) -> None:
        """Never called within a decision: a group's members are released together at its deadline
        (GangCycle.expire)."""

    def permit(self, state: Attempt, pod: PodState, node: str) -> Status | None:
        if state.gang is None:
            return None
        self.gangs.place(state.gang, Placed(pod, node, state.allocations))
        return Status(Code.WAIT, "waiting for the rest of the gang", "gang", plugin=gang_scheduling.NAME)


class ScorePolicy:
    """PreScore: the scheduler's score policy for this pod (the fragmentation score reads the decision's
    device demand once here)."""

    def __init__(self, scorer: Callable[[Cycle, PodState], ScorePlugin]) -> None:
        self.scorer = scorer

    def __call__(self, state: Attempt, pod: PodState, nodes: list[NodeState]) -> Status | None:
        state.score = self.scorer(state.cycle, pod)
        return None


def default_binder(state: Attempt, pod: PodState, node: str) -> Status | None:
    """Bind (DefaultBinder), with DynamicResources' PreBind in the same record: PodBound, then the
    claims' allocations and reservedFor (Cycle.bind)."""
    state.cycle.bind(pod, node, state.claims, state.allocations)
    return None


class DefaultPreemption:
    """PostFilter: DynamicResources' diagnosis, then DefaultPreemption on it (upstream runs DynamicResources'
    PostFilter before DefaultPreemption's: "first deallocate an idle claim, then evict a pod"); one entry, so the
    status written is the last one's."""

    def __init__(self, claims: DynamicResources, preemption: PodPreemption) -> None:
        self.claims, self.preemption = claims, preemption

    def __call__(self, state: Attempt, pod: PodState, reasons: Counter[str]) -> Status:
        return self.preemption.post_filter(state, self.claims.post_filter(state, pod, reasons))


def default_profile(dra: DraPlugin, gangs: GangCycle, scorer: Callable[[Cycle, PodState], ScorePlugin],
                    preemption: PodPreemption | None = None) -> Profile[Attempt]:
    """The plugins at each point, in upstream's order within it (SchedulingGates before GangScheduling,
    as the reactor tries them); DefaultPreemption in release profiles (`preemption`)."""
    gang, claims = GangScheduling(gangs), DynamicResources(dra)
    post_filter = DefaultPreemption(claims, preemption) if preemption is not None else claims.post_filter
    placement = PlacementFilter()  # PodTopologySpread and InterPodAffinity, after NodeResourcesFit (placement.py)
    return Profile(
        pre_enqueue=(gated, gang.pre_enqueue),
        pre_filter=(gang.pre_filter, claims.pre_filter, placement.pre_filter),
        filter=(*FILTERS, placement),
        post_filter=(post_filter,),
        pre_score=(ScorePolicy(scorer),),
        reserve=(gang,),
        permit=(gang.permit,),
        bind=(default_binder,),
    )
