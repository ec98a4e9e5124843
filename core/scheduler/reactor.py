"""The scheduler reactor: binds pending pods to Ready nodes, one scheduling cycle per view.

Shaped like kube-scheduler's framework (pkg/scheduler/framework): plugins (plugins/, one module each,
declaring their extension points: framework.py) that answer with a Status or None, registered in a
profile (profile.py); a pure `schedule_one` (node_search.py, the node search and its caches) with fast
paths that plain.py, one loop over the profile's points, checks. Devices come two ways:
as extended resources (`nvidia.com/gpu`, counted) and through DRA claims, allocated with the
structured allocator (plugins/dynamic_resources.py) after the other filters pass, all of a pod's claims together.

Requeueing (a simple form of upstream's queueing hints): a pod already marked unschedulable is tried
again only when something that can make room happened after its condition was written
(`ClusterState.room_offset`: a node turned Ready, a pod finished, a claim was released, slices or
classes appeared).

Queue order is upstream's PrioritySort: higher `spec.priority` first, then earlier arrival. Ties
between equally scored nodes are broken at random, as upstream's selectHost does, with the
decision's seeded random source.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ..dra.features import allocator_features
from ..engine.contract import Decision, Trigger
from ..kube.versions import GATES, merge_gates, profile_from_config
from ..kube.workloads import DEFAULT_GANG_TIMEOUT_MS
from ..state.cluster import ClusterState, PodState
from ..state.object_changes import current_pdbs
from .cycle import Attempt, Cycle
from .feasibility_cache import FeasibilityCache
from .filter_errors import CAUSE as FILTER_ERROR_CAUSE
from .filters import FILTERS as FILTERS
from .filters import ShapeMemo
from .filters import fits_resources as fits_resources
from .filters import fragmented as fragmented
from .filters import node_ready as node_ready
from .filters import pending_cause as pending_cause
from .filters import static_shape as static_shape
from .filters import tolerates as tolerates
from .filters import unschedulable_message as unschedulable_message
from .framework import Code, Status, unresolvable, unschedulable
from .node_search import NodeSearch
from .placement import AntiIndex, cycle_pods, depends
from .plain import attempt
from .plugins.composite_pod_group import Tree, invalid, root_of, schedule_composite
from .plugins.dra_binding import CAUSE as BINDING_CAUSE
from .plugins.dra_binding import (
    DEFAULT_BINDING_TIMEOUT_MS,
    UNAVAILABLE,
    PreBind,
    PreBindWaits,
    blocked,
    needs_wait,
    prebind,
    waits_enabled,
)
from .plugins.dra_binding import check_args as check_dra_args
from .plugins.dra_extended import Path, created, schedule_extended, search
from .plugins.dra_extended import plan as extended_plan
from .plugins.dynamic_resources import DraPlugin
from .plugins.gang_scheduling import GangCycle, Placed
from .plugins.node_resources_fit import SCORERS
from .plugins.pod_group import DEFAULT_SCHEDULER, Placement, PodGroupCycle, schedule_group
from .plugins.scheduling_gates import SCHEDULING_GATED, gated
from .preemption import PodPreemption
from .profile import WAITING, DynamicResources, default_profile
from .queue import NOT_READY, due, group_due
from .scoring import Scoring

DRA_SCORE_CAUSE = "dra-score-error"  # kubernetes#139016's Score error (Scheduler._dra_score_error)
SCORE_POLICIES = (*SCORERS, "fragmentation")  # plugins/fragmentation.py: needs the decision's device counts


@dataclass
class Scheduler(NodeSearch):
    score: str = "most-allocated"
    gang_timeout_ms: int = DEFAULT_GANG_TIMEOUT_MS
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # the run configuration's `kubernetes` entry (core/kube/versions.py profile_config); None: legacy 1.35
    kubernetes: dict[str, Any] | None = None
    # the effective scheduler configuration (config.py; run configuration `scheduler.config`); None: `score` alone
    config: dict[str, Any] | None = None
    name: str = "scheduler"
    pdbs: list[dict[str, Any]] = field(default_factory=list)  # PodDisruptionBudgets (kube/pdb.py), for preemption
    trigger: Trigger = "events"
    binding_timeout_ms: int = DEFAULT_BINDING_TIMEOUT_MS  # DynamicResourcesArgs.bindingTimeout (dra_binding.py)
    # False: no feasibility cache, failure memos, kept node lists or inlined loop (plain.py), for the
    # property test that checks them; not a constructor argument, so no run's configuration can set it.
    fast_paths: bool = field(default=True, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.score not in SCORE_POLICIES:
            raise ValueError(f"unknown score policy {self.score!r}; expected one of {list(SCORE_POLICIES)}")
        if self.gang_timeout_ms <= 0:
            raise ValueError("the gang timeout must be positive")
        unknown = sorted(set(self.feature_gates) - set(GATES))
        if unknown:
            raise ValueError(f"unknown scheduler feature gates {unknown}; expected some of {sorted(GATES)}")
        # the release emulated, with the scheduler's own gates on top (FieldError if they do not fit it)
        self.profile = merge_gates(profile_from_config(self.kubernetes), self.feature_gates, path="scheduler")
        self._dra = DraPlugin(allocator_features(self.profile), status_claims=self.kubernetes is not None,
                              gang_claims_blocked=self.profile.bug("kubernetes#137617"),
                              filter_errors=self.kubernetes is not None)
        if self.config is not None and self.score == "fragmentation":
            raise ValueError("the fragmentation score is dralab's own: not with a scheduler configuration")
        self._scoring = Scoring(self.config) if self.config is not None else None  # scoring.py
        dra_args = ((self.config or {}).get("args") or {}).get("DynamicResources")
        if dra_args is not None:  # pluginConfig's DynamicResourcesArgs (plugins/dra_binding.py)
            self.binding_timeout_ms = check_dra_args(dra_args, "config.args.DynamicResources")["bindingTimeout"]
        self._claims = DynamicResources(self._dra)  # its PreFilter and PostFilter (profile.py)
        self._demand: dict[str, int] = {}  # pod key -> devices it asks for (a cache; see plugins/fragmentation.py)
        # static shape -> node -> (manifest, ready, static filter answer): a cache (see _static)
        self._static_memo: dict[str, dict[str, tuple[dict[str, Any], bool, str | None]]] = {}
        self._shapes = ShapeMemo()  # static_shape per pod, a cache (filters.py)
        self._feasibility = FeasibilityCache()  # per pod shape: each node's fit and score (feasibility_cache.py)
        # The static lists kept across decisions (see _static_nodes): each shape's list with the node
        # generation it was made in; the nodes as last seen, and their generation.
        self._static_lists: dict[str, tuple[int, list[tuple[str, str | None]]]] = {}
        self._node_sig: tuple[list[str], list[dict[str, Any]], list[bool]] = ([], [], [])
        self._generation = 0
        # DefaultPreemption for single pods, in release profiles only (legacy logs replay without it)
        self._preemption = PodPreemption(self, self.profile.enabled("SchedulerAsyncPreemption")) \
            if self.kubernetes is not None else None
        self._anti_memo = AntiIndex()  # the pods with required pod anti-affinity (placement.py)

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        queue = sorted(view.pending_pods(), key=lambda p: (-p.priority, p.created_offset))
        gangs = GangCycle(view, now, self.gang_timeout_ms, self.profile.enabled("NominatedNodeNameForExpectation"))
        cycle = Cycle(view, rng, gangs.held, view.gang.nominated)
        if self.kubernetes is not None:  # release profiles: upstream's domains and nominated rule (placement.py)
            cycle_pods(cycle, self._anti_memo, upstream=True)
        if self._preemption is not None:
            self._preemption.budgets_for(view, current_pdbs(self.pdbs, view.pdbs))  # budgets changed mid-run too
        gangs.expire(cycle)
        busy = gangs.busy  # waiting at Permit, or just released: not in the queue this decision
        wake = gangs.wake_at()
        if view.dra.binding:  # pods waiting in PreBind for binding conditions (plugins/dra_binding.py)
            waits = PreBindWaits(self.binding_timeout_ms)
            waits.run(cycle, now)
            busy = busy | waits.busy
            wake = waits.wake if wake is None or (waits.wake is not None and waits.wake < wake) else wake
        # 1.36+: the PodGroups' pods, queued as one entry each (not those waiting in PreBind or at Permit)
        by_group = self._pod_groups([p for p in queue if p.key not in busy] if busy else queue, view)
        group_of = view.gang.group_of if by_group else None
        groups: PodGroupCycle | None = None  # this decision's PodGroup cycles (and their caches), once needed
        for pod in queue:
            if pod.key in busy:
                continue
            group = group_of.get(pod.key) if group_of is not None else None
            if group is not None:
                if groups is None:
                    groups = PodGroupCycle(view, *self._group_settings(), statics=partial(self._static_answers, cycle))
                later = self._schedule_unit(cycle, groups, group, by_group, now)
                if later is not None and later >= 0:
                    wake = later if wake is None or later < wake else wake
                continue
            if pod.manifest["spec"].get("schedulerName", DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
                continue  # another scheduler's pod (spec.schedulerName): not this profile's, left as it is
            ready, later = due(view, pod, now)  # the unschedulable pool and backoff (queue.py)
            if not ready:
                wake = later if wake is None or (later is not None and later < wake) else wake
                continue
            if self._preemption is not None:  # nominated pods as a single pod's filters count them (preemption.py)
                self._preemption.before(cycle, pod)
            self._schedule(cycle, pod, gangs, now)
            if self._preemption is not None:
                self._preemption.after(cycle, pod)
        gangs.finish(cycle, self._dra)
        finished = gangs.wake_at()
        if finished is not None and (wake is None or finished < wake):
            wake = finished
        return Decision(tuple(cycle.events), wake)

    @staticmethod
    def _pod_groups(queue: list[PodState], view: ClusterState) -> dict[str, list[PodState]]:
        """The pending pods of each PodGroup, in queue order (empty when no pod names a PodGroup)."""
        group_of = view.gang.group_of
        if not group_of:
            return {}
        out: dict[str, list[PodState]] = {}
        for pod in queue:
            group = group_of.get(pod.key)
            if group is not None:
                out.setdefault(group, []).append(pod)
        return out

    def _schedule_unit(self, cycle: Cycle, groups: PodGroupCycle, group: str, by_group: dict[str, list[PodState]],
                       now: int) -> int | None:
        """The PodGroup's cycle (or its CompositePodGroup tree's, KEP-6012) at its first pod's place in the
        queue; the pods of a unit already tried are skipped. None when tried; else when it may be (-1: on an
        event)."""
        view = cycle.view
        members = by_group.get(group)
        if members is None:
            return None  # tried at its first pod's place in the queue
        root, why = root_of(groups, group)
        if root is None:
            del by_group[group]
            later = group_due(view, members, now)
            if later is None:
                schedule_group(cycle, groups, group, members, partial(self._place, cycle, now=now))
            return later
        leaves = {group: members} if why is not None else {
            leaf: by_group[leaf] for leaf in Tree.of(groups, root).leaves() if leaf in by_group}
        for leaf in leaves:
            del by_group[leaf]
        pods = [p for ms in leaves.values() for p in ms]
        later = group_due(view, pods, now)
        if later is None:
            if why is not None:
                invalid(cycle, groups, root, pods, why)
            else:
                schedule_composite(cycle, groups, root, leaves, partial(self._place, cycle, now=now))
        return later

    def _group_settings(self) -> tuple[str, bool, bool]:
        """The release (condition names, beta checks), whether TopologyAwareWorkloadScheduling is on, and
        whether workload-aware preemption is (1.36: its own gate; 1.37: part of GenericWorkload, KEP-4671's
        gate merge)."""
        version, gates = self.profile.version, self.profile.gates
        preemption = gates.get("WorkloadAwarePreemption", False) if version == "1.36" else version == "1.37"
        return version, bool(gates.get("TopologyAwareWorkloadScheduling", False)), bool(preemption)

    def _place(self, cycle: Cycle, pod: PodState, nodes: tuple[str, ...] | None, now: int = 0) -> Placement | Status:
        """One pod of a PodGroup's cycle through PreFilter, Filter and Score (restricted to `nodes` when the
        group has a topology domain), bound in the cycle when it fits; else why not. DynamicResources as for any
        pod: the special claim of DRA-served extended resources (KEP-5004) and the PreBind wait for binding
        conditions (KEP-5007), since upstream runs each placed member's own binding cycle (PreBind, Bind) once the
        group is feasible (schedule_one_podgroup.go: runBindingCycle per pod)."""
        state = Attempt(cycle, pod)
        status = self._claims.pre_filter(state, pod)  # DynamicResources
        if status is not None:
            if status is WAITING:
                return unresolvable("waiting for the pod's ResourceClaims to be created", "missing",
                                    "DynamicResources")
            return status
        ext = extended_plan(cycle.view, self.profile, pod)
        path: Path | None = None
        if ext is None:
            node_name, reasons, allocations, state.dra_nodes = self.schedule_one(
                cycle, pod, state.claims, state.allocator, restrict=nodes)
        else:
            path, node_name, allocations, reasons = search(self, cycle, pod, state, ext, nodes)
        if node_name is None:
            return self._claims.post_filter(state, pod, reasons)
        why = blocked(cycle.view, pod, state.claims) if waits_enabled(self.profile) else None
        if why is not None:
            return unschedulable(UNAVAILABLE, BINDING_CAUSE, "DynamicResources", why)
        commit = partial(self._commit, cycle, pod, path, node_name, state.claims, allocations, now)
        commit()
        return Placement(pod, node_name, state.claims, allocations, commit)

    def _commit(self, cycle: Cycle, pod: PodState, path: Path | None, node: str, claims: Any,
                allocations: dict[str, dict[str, Any]], now: int) -> None:
        """A PodGroup member's binding in the cycle: its special claim created, then PreBind's wait or the binding."""
        fit_pod = pod if path is None else path.fit_pod
        if path is not None and path.manifest is not None:
            cycle.events.append(created(pod, path.manifest))
        if not self._prebind(cycle, fit_pod, node, claims, allocations, now=now):
            cycle.bind(fit_pod, node, claims, allocations)

    def _prebind(self, cycle: Cycle, pod: PodState, node: str, claims: Any, allocations: dict[str, dict[str, Any]],
                 *, now: int) -> bool:
        """DynamicResources' PreBind wait (plugins/dra_binding.py) when a device has binding conditions."""
        if not (waits_enabled(self.profile) and needs_wait(allocations, claims.allocated)):
            return False
        prebind(cycle, pod, node, claims, allocations, now, self.binding_timeout_ms,
                self.profile.enabled("NominatedNodeNameForExpectation"))
        return True

    def _dra_score_error(self, cycle: Cycle, pod: PodState, claims: Any, allocator: Any, chosen: str) -> str | None:
        """kubernetes#139016 (1.35 and 1.36 before their patch releases; fixed in 1.37.0 by #139017): DynamicResources'
        Score (computeScore) indexed the allocations Filter made, one per unallocated claim, by the claim's place
        among all the pod's claims, so a pod with an allocated claim and an unallocated one fails Score with an
        error. Score runs only when more than one node is feasible (schedulePod returns the only one unscored), so
        the error needs another node that takes the pod: a multi-node (shared) claim. The error is a scheduling
        error (condition SchedulerError), which cluster-autoscaler does not act on; the pod stays pending."""
        if not (claims.allocated and claims.to_allocate):
            return None
        others = tuple(name for name in cycle.view.nodes if name != chosen)
        rng, cursor = cycle.rng.getstate(), cycle.cursor[0]  # the look is not an attempt: no draw, no rotation
        other = self.schedule_one(cycle, pod, claims, allocator, restrict=others)[0] if others else None
        cycle.rng.setstate(rng)
        cycle.cursor[0] = cursor
        if other is None:
            return None
        return (f'running Score plugins: plugin "DynamicResources" failed with: number of allocations '
                f'{len(claims.to_allocate)} is smaller than number of claims')

    def _plain_score_error(self, state: Attempt, node: str) -> tuple[str, str] | None:
        """The plain run's kubernetes#139016 check (plain.attempt's `score_error`), as the fast path's."""
        error = self._dra_score_error(state.cycle, state.pod, state.claims, state.allocator, node)
        return None if error is None else (error, DRA_SCORE_CAUSE)

    def _schedule(self, cycle: Cycle, pod: PodState, gangs: GangCycle, now: int = 0) -> None:
        """One pod's attempt (upstream's scheduleOne): the points of the default profile (profile.py) in
        upstream's order, with the fast paths between them; without fast paths, plain.attempt's loop."""
        ext = extended_plan(cycle.view, self.profile, pod) if pod.key not in cycle.view.gang.refs else None  # KEP-5004
        if not self.fast_paths and ext is None:
            pre_bind = PreBind(now, self.binding_timeout_ms, self.profile.enabled("NominatedNodeNameForExpectation"),
                               waits_enabled(self.profile))
            nominated = self._preemption.nominated_first if self._preemption else None
            attempt(replace(default_profile(self._dra, gangs, self._scorer, self._preemption), pre_bind=(pre_bind,)),
                    Attempt(cycle, pod), self._plain_pick, nominated,
                    self._plain_score_error if self.profile.bug("kubernetes#139016") else None,
                    self._plain_filter_error if self._dra.filter_errors else None)
            return
        gate = gated(pod)  # PreEnqueue: SchedulingGates, then GangScheduling
        if gate is not None:
            cycle.pending(pod, SCHEDULING_GATED, gate.message, gate.cause, gate.detail)
            return
        gang, rejection = gangs.admit(pod)
        if rejection is not None:
            # Upstream's PreEnqueue keeps such a pod out of the queue; with KEP-5501 the rejection is
            # written as reason NotReadyForScheduling, which the autoscaler does not act on.
            cycle.pending(pod, NOT_READY, rejection.message, rejection.cause, rejection.detail)
            return
        state = Attempt(cycle, pod, gang)
        status = self._claims.pre_filter(state, pod)  # DynamicResources
        if status is not None:
            if status is not WAITING:
                # Unschedulable (kubernetes#137617's refusal) is an attempt; UnschedulableAndUnresolvable is not
                reason = "Unschedulable" if status.code is Code.UNSCHEDULABLE else NOT_READY
                cycle.pending(pod, reason, status.message, status.cause, status.detail)
            return
        if ext is not None:  # DRA extended resources (plugins/dra_extended.py)
            schedule_extended(self, cycle, pod, state, ext, now, partial(self._prebind, now=now))
            return
        claims, allocator = state.claims, state.allocator
        first = self._preemption.nominated_first(cycle, pod, claims, allocator) if self._preemption else None
        if first is not None and gang is None:  # its nominated node first (evaluateNominatedNode)
            if not self._prebind(cycle, pod, first[0], claims, first[1], now=now):
                cycle.bind(pod, first[0], claims, first[1])
            return
        # A pod with no claims, of a shape that already failed in this decision with no binding since:
        # the same failure (schedule_one's answer depends on the shape, the requests and the decision's
        # usage only; its one side effect, the rotating start, is replayed). Most failed attempts.
        again = (self._shapes(pod), tuple(pod.requests.items()), len(cycle.changed)) \
            if not claims.any and self.score != "fragmentation" and not depends(cycle, pod, self._anti_memo) else None
        failed = cycle.failed.get(again) if again is not None else None
        if failed is not None:
            n, status = failed
            if n:
                cycle.cursor[0] = cycle.cursor[0] % n + n
            if self._preemption is not None:
                status = self._preemption.post_filter(state, status)
            cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)
            return
        start = cycle.cursor[0]
        node_name, reasons, allocations, state.dra_nodes = self.schedule_one(cycle, pod, claims, allocator)
        failed_filter = self._filter_error(cycle, pod, claims, allocator, start) if self._dra.filter_errors else None
        if failed_filter is not None:  # DynamicResources' Filter Error on a node: the attempt aborts (filter_errors.py)
            cycle.pending(pod, "SchedulerError", failed_filter[0], FILTER_ERROR_CAUSE, failed_filter[1])
            return
        if node_name is not None and self.profile.bug("kubernetes#139016"):
            error = self._dra_score_error(cycle, pod, claims, allocator, node_name)
            if error is not None:
                cycle.pending(pod, "SchedulerError", error, DRA_SCORE_CAUSE, error)
                return
        if node_name is not None:
            if gang is None and self._prebind(cycle, pod, node_name, claims, allocations, now=now):
                pass  # waiting in PreBind for binding conditions (KEP-5007)
            elif gang is None:
                cycle.bind(pod, node_name, claims, allocations)
            else:  # Reserve, then wait at Permit for the rest of the gang
                cycle.hold(pod, node_name, allocations, gang)
                gangs.place(gang, Placed(pod, node_name, allocations))
            return
        status = self._claims.post_filter(state, pod, reasons)
        if again is not None:
            cycle.failed[again] = (len(cycle.static[again[0]]), status)
        if self._preemption is not None:  # DefaultPreemption (plugins/default_preemption.py)
            status = self._preemption.post_filter(state, status)
        cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)
