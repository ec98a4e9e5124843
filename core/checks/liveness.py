"""Liveness: a pending pod for which room exists is scheduled within a bound.

The definition (docs/invariants.md#liveness): the log is sampled at records at least `bound / 4` of
cluster time apart (and once more at its end), and on cluster time between records: before a record
that comes more than `bound / 4` after the previous one, the state that held through that gap (the
previous record's) is sampled too, since no record inside the gap can be. At each sample, the pending
pods that the scheduler would try (not gated, not gang members: see below) are run, in the scheduler's queue order
(priority, then arrival), through the scheduler's own pure scheduling cycle (`Scheduler._schedule`:
the same filters, the same DRA allocator, the resources held by gang members waiting at Permit
counted) on the state at that record, without its queue and backoff state. A pod that would bind
there "fits". A pod that fits at every sample from the first one at which it fits, over more than
`bound` of cluster time, and is still pending, is reported once, with the offset at which it first fit.
A pod that fits in the state of a gap and has fit since `t` is pending and fitting throughout the gap
(the state changes only at records), so it is overdue when the gap ends more than `bound` after `t`:
reported at the gap's first record, at cluster time `t + bound`, whether or not the record that ends the
gap binds it (a scheduler stopped for longer than the bound, then restarted, used to pass unseen).

Why this bound: kube-scheduler retries an unschedulable pod at the latest after
podMaxInUnschedulablePodsDuration (5 min, flushUnschedulablePodsLeftover) plus its backoff (at most
10 s), and on every event that can make room before that (queueing hints); the default 10 min leaves
room for a retry after a flush and a busy scheduler. A pod that fits for longer was forgotten.

Skipped: pods with scheduling gates (nobody may schedule them), pods for another scheduler
(spec.schedulerName), gang members (a gang is placed all
together at Permit: fitting one member says nothing), pods of 1.36+ PodGroups (a group is placed in one
cycle, all or nothing, and in one topology domain: fitting one pod says nothing either) and pods waiting at
Permit.

Cost: one scheduling pass per sample, bounded by pending pods x nodes (the scheduler's own caches make
it cheaper), and at most `2 * duration / (bound / 4) + 1` samples: linear in the log's length for a
bounded cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.contract import decision_rng
from ..log.events import PodBound
from ..scheduler.cycle import Cycle
from ..scheduler.placement import cycle_pods
from ..scheduler.plugins.gang_scheduling import GangCycle
from ..scheduler.reactor import Scheduler
from ..state.cluster import ClusterState

DEFAULT_BOUND_MS = 600_000


@dataclass
class Liveness:
    bound_ms: int = DEFAULT_BOUND_MS
    scheduler: Scheduler = field(default_factory=Scheduler)
    fits_since: dict[str, tuple[int, int]] = field(default_factory=dict)  # pod -> (first offset, t) it fit
    reported: set[str] = field(default_factory=set)
    last_sample_t: int | None = None
    last_sample_offset: int = 0
    samples: int = 0

    @property
    def step_ms(self) -> int:
        return max(self.bound_ms // 4, 1)

    def observe(self, state: ClusterState, *, final: bool = False) -> list[tuple[str, int, int]]:
        """Sample if due (or at the end); (pod, first offset it fit, its time) of pods now overdue."""
        if not final and self.last_sample_t is not None and state.t < self.last_sample_t + self.step_ms:
            return []
        self._sample(state)
        return self._overdue(state.t)

    def observe_gap(self, state: ClusterState, next_t: int) -> list[tuple[str, int, int]]:
        """Before the record at cluster time `next_t` is applied to `state`: if it comes more than a
        sampling step after `state`'s record, sample the state that held through the gap; (pod, first
        offset it fit, its time) of the pods overdue before `next_t`."""
        if not state.offset or next_t - state.t <= self.step_ms:
            return []
        if self.last_sample_offset != state.offset:
            self._sample(state)
        return self._overdue(next_t)

    def _sample(self, state: ClusterState) -> None:
        self.last_sample_t = state.t
        self.last_sample_offset = state.offset
        self.samples += 1
        fitting = self.fitting(state)
        self.fits_since = {key: self.fits_since.get(key, (state.offset, state.t)) for key in fitting}

    def _overdue(self, now: int) -> list[tuple[str, int, int]]:
        """Pods fitting (and pending) since more than the bound before `now`, each reported once."""
        out = []
        for key, (offset, t) in self.fits_since.items():
            if now - t > self.bound_ms and key not in self.reported:
                self.reported.add(key)
                out.append((key, offset, t))
        return out

    def fitting(self, state: ClusterState) -> list[str]:
        """The pending pods a scheduling pass on `state` would bind, ignoring queue and backoff."""
        pending = [p for p in state.pending_pods()
                   if p.key not in state.gang.refs and p.key not in state.gang.reservations
                   and p.key not in state.gang.group_of  # a PodGroup's pods are placed together, or not at all
                   and not p.manifest.get("spec", {}).get("schedulingGates")
                   and p.manifest.get("spec", {}).get("schedulerName", "default-scheduler") == "default-scheduler"]
        if not pending or not state.nodes:
            return []
        pending.sort(key=lambda p: (-p.priority, p.created_offset))
        gangs = GangCycle(state, state.t, self.scheduler.gang_timeout_ms)
        rng = decision_rng(0, "liveness", state.offset, state.t)  # ties only: which node, not whether
        cycle = Cycle(state, rng, list(state.gang.reservations.values()))
        if self.scheduler.kubernetes is not None:  # as the scheduler's own cycles (reactor.py react)
            cycle_pods(cycle, upstream=True)
        for pod in pending:
            self.scheduler._schedule(cycle, pod, gangs)
        return [e.pod for e in cycle.events if isinstance(e, PodBound)]
