"""The GangScheduling plugin of the scheduler reactor (kube-scheduler 1.35 alpha, KEP-4671;
pkg/scheduler/framework/plugins/gangscheduling).

Upstream, in three places:
- PreEnqueue: a pod of a gang stays out of the queue until its Workload exists and at least `minCount`
  pods of its group exist ("waiting for minCount pods from a gang to appear in scheduling queue"). With
  KEP-5501 that rejection shows as PodScheduled=False, reason `NotReadyForScheduling`, which the
  cluster-autoscaler does not treat as unschedulable.
- Reserve/Permit: each member is scheduled on its own; after Reserve it waits at Permit, holding its
  node's resources and its devices in the scheduler's cache, until assumed + assigned members reach
  `minCount`; then all waiting members are allowed and bind.
- Timeout: the group has one deadline (`PodGroupState.SchedulingTimeout`, five minutes, set when the
  first member starts waiting); when it passes, every waiting member is rejected ("rejected due to
  timeout after waiting 5m0s at plugin GangScheduling"), Unreserve frees what it held, and the pods go
  back to the queue as Unschedulable. A member is never bound alone.

With KEP-5278 (NominatedNodeNameForExpectation, beta and on by default in 1.35) the scheduler sets
status.nominatedNodeName on a pod entering a binding cycle that waits at Permit, so the autoscaler
counts it as placed on that node. With the gate off (`featureGates` in the scenario), the waiting pod is
invisible outside the scheduler: the autoscaler sees a node with room and provisions nothing for the
members that did not fit, and the group times out (autoscaler#8795 describes the same blind spot).

dralab's scheduler decides a whole queue per view, so "waiting" members of one decision and of earlier
ones are told apart: members placed in this decision are bound with the waiting ones if the quorum is
met, or written as `PodReserved` (with the group's deadline) otherwise. `PodReserved` is how a waiting
pod survives from one decision to the next, in the log rather than in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...kube.durations import format_duration
from ...kube.workloads import group_policy, min_count
from ...log.events import AnyEvent, ClaimAllocated, ClaimReserved, PodBound, PodReserved, PodUnreserved
from ...state.cluster import PENDING, RUNNING, ClusterState, PodState
from ...state.gangs import Reservation
from ..framework import ExtensionPoint

if TYPE_CHECKING:
    from ..cycle import Cycle
    from .dynamic_resources import DraPlugin

NAME = PLUGIN = "GangScheduling"
# PreEnqueue: GangCycle.admit; Reserve: the placed member's hold (Cycle.hold); Permit: GangCycle.finish
# (bind the groups at quorum, else wait) and GangCycle.expire (reject at the deadline).
EXTENSION_POINTS = (ExtensionPoint.PRE_ENQUEUE, ExtensionPoint.RESERVE, ExtensionPoint.PERMIT)


@dataclass(frozen=True)
class Rejection:
    """Why PreEnqueue keeps a pod out of the queue: the condition message, dralab's cause, evidence."""

    message: str
    cause: str
    detail: str


@dataclass
class Placed:
    """A member placed in this decision, waiting for the rest of its group."""

    pod: PodState
    node: str
    allocations: dict[str, dict[str, Any]]


def live_members(view: ClusterState, gang: str) -> int:
    """Members the scheduler knows (upstream's PodGroupInfo.AllPods: pending or running, not terminated)."""
    pending, running = view.pods_by_phase[PENDING], view.pods_by_phase[RUNNING]
    return sum(1 for key in view.gang.members.get(gang, ()) if key in pending or key in running)


class GangCycle:
    """One decision's gang bookkeeping: groups waiting from earlier decisions, groups whose deadline has
    passed, members placed now."""

    def __init__(self, view: ClusterState, now: int, timeout_ms: int, nominate: bool = True) -> None:
        self.view = view
        self.now = now
        self.timeout_ms = timeout_ms
        self.nominate = nominate
        self.waiting: dict[str, list[Reservation]] = {}
        self.expired: dict[str, list[Reservation]] = {}
        for gang, reservations in view.gang.by_gang().items():
            expired = min(r.deadline for r in reservations) <= now
            (self.expired if expired else self.waiting)[gang] = reservations
        self.placed: dict[str, list[Placed]] = {}

    @property
    def held(self) -> list[Reservation]:
        """Reservations that still hold resources in this decision (not expired)."""
        return [r for group in self.waiting.values() for r in group]

    @property
    def busy(self) -> set[str]:
        """Pods not in this decision's queue: waiting at Permit, or released by this decision."""
        return {r.pod for group in (self.waiting, self.expired) for rs in group.values() for r in rs}

    def admit(self, pod: PodState) -> tuple[str | None, Rejection | None]:
        """PreEnqueue: (the pod's gang key if it is a gang member, or None; a rejection, or None)."""
        gang = self.view.gang
        ref = gang.refs.get(pod.key)
        if ref is None:
            return None, None
        workload = gang.workloads.get(ref.workload_key)
        if workload is None:
            return None, Rejection(f'waiting for pods\'s workload "{ref.workload}" to appear in scheduling queue',
                                   "missing", f"Workload {ref.workload_key} does not exist")
        policy = group_policy(workload, ref.pod_group)
        if policy is None:
            return None, Rejection(
                f'pod group "{ref.pod_group}" doesn\'t exist for a workload "{ref.workload}"', "missing",
                f"pod group {ref.pod_group} of Workload {ref.workload_key} does not exist")
        needed = min_count(policy)
        if needed is None:
            return None, None  # basic policy: scheduled like any pod
        members = live_members(self.view, ref.key)
        if members < needed:
            return None, Rejection("waiting for minCount pods from a gang to appear in scheduling queue", "gang",
                                   f"{members} of minCount {needed} pods of gang {ref.key} exist")
        return ref.key, None

    def place(self, gang: str, placed: Placed) -> None:
        self.placed.setdefault(gang, []).append(placed)

    def expire(self, cycle: Cycle) -> None:
        """Reject every member of the groups whose deadline passed (Permit timeout), all together."""
        message = f"rejected due to timeout after waiting {format_duration(self.timeout_ms)} at plugin {PLUGIN}"
        for gang in sorted(self.expired):
            reservations = self.expired[gang]
            needed = self._min_count(gang)
            detail = (f"{len(reservations)} waiting + {self.view.gang_running(gang)} running of minCount {needed} "
                      f"pods of gang {gang} when its deadline passed; all waiting members released")
            for r in reservations:
                cycle.pending(self.view.pods[r.pod], "Unschedulable", message, "gang", detail)
                cycle.events.append(PodUnreserved(pod=r.pod, reason=message))

    def finish(self, cycle: Cycle, dra: DraPlugin) -> None:
        """Permit: bind every group that reached its quorum (waiting + placed + running >= minCount);
        write the rest of the placed members as reservations with their group's deadline."""
        binds: list[tuple[PodState, str, dict[str, dict[str, Any]], str]] = []
        for gang in sorted(self.placed):
            placed, waiting = self.placed[gang], self.waiting.get(gang, [])
            if len(placed) + len(waiting) + self.view.gang_running(gang) >= self._min_count(gang):
                binds.extend((self.view.pods[r.pod], r.node, r.allocations, gang) for r in waiting)
                binds.extend((p.pod, p.node, p.allocations, gang) for p in placed)
                continue
            deadline = min((r.deadline for r in waiting), default=self.now + self.timeout_ms)
            for p in placed:
                cycle.events.append(PodReserved(pod=p.pod.key, node=p.node, allocations=p.allocations,
                                                deadline=deadline, nominated=self.nominate))
        if not binds:
            return
        # Every allocation first, then the other consumers of shared claims: a member may use a claim
        # that another member of its gang allocates in this record.
        reserved: list[AnyEvent] = []
        for pod, node, allocations, gang in binds:
            cycle.events.append(PodBound(pod=pod.key, node=node))
            cycle.events.extend(ClaimAllocated(claim=k, allocation=a, pod=pod.key) for k, a in allocations.items())
            claims = dra.prefilter(self.view, pod, cycle.assumed, cycle.held, gang)
            for key, _ in claims.allocated:
                state = self.view.dra.claims.get(key)
                if key not in allocations and state is not None and pod.key not in state.reserved_for:
                    reserved.append(ClaimReserved(claim=key, pod=pod.key))
        cycle.events.extend(reserved)

    def wake_at(self) -> int | None:
        """The earliest deadline of a group still waiting after this decision."""
        deadlines = [r.deadline for rs in self.waiting.values() for r in rs]
        if any(gang not in self.waiting for gang in self.placed):
            deadlines.append(self.now + self.timeout_ms)
        return min(deadlines, default=None)

    def _min_count(self, gang: str) -> int:
        members = self.view.gang.members.get(gang, {})
        ref = self.view.gang.refs.get(next(iter(members), ""))
        needed = self.view.gang.min_count(ref) if ref is not None else None
        return needed if needed is not None else 1
