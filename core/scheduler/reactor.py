"""The scheduler reactor: binds pending pods to Ready nodes, one scheduling cycle per view.

Shaped like kube-scheduler's framework (pkg/scheduler/framework): plugins (plugins/, one module each,
declaring their extension points: framework.py) that answer with a Status or None, registered in a
profile (profile.py); a pure `schedule_one` with fast paths that plain.py, one loop over the profile's
points, checks. Devices come two ways:
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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import Any

from ..dra.allocator import Allocator
from ..dra.features import allocator_features
from ..engine.contract import Decision, Trigger
from ..kube.versions import GATES, merge_gates, profile_from_config
from ..kube.workloads import DEFAULT_GANG_TIMEOUT_MS
from ..state.cluster import ClusterState, NodeState, PodState
from .cycle import Attempt, Cycle, Used
from .feasibility_cache import FeasibilityCache
from .filters import FILTERS as FILTERS
from .filters import STATIC_FILTERS, ShapeMemo, first_failure, num_feasible_nodes_to_find
from .filters import fits_resources as fits_resources
from .filters import fragmented as fragmented
from .filters import node_ready as node_ready
from .filters import pending_cause as pending_cause
from .filters import static_shape as static_shape
from .filters import tolerates as tolerates
from .filters import unschedulable_message as unschedulable_message
from .framework import Status, unresolvable
from .plain import Pick, attempt
from .plugins.composite_pod_group import Tree, invalid, root_of, schedule_composite
from .plugins.dynamic_resources import DRA_FAILURE, DraPlugin, PodClaims
from .plugins.fragmentation import fragmentation_score, pod_demand
from .plugins.gang_scheduling import GangCycle, Placed
from .plugins.node_resources_fit import SCORERS, failure_message, lacking, utilisation
from .plugins.pod_group import DEFAULT_SCHEDULER, Placement, PodGroupCycle, schedule_group
from .plugins.scheduling_gates import SCHEDULING_GATED, gated
from .profile import WAITING, DynamicResources, default_profile
from .queue import NOT_READY, due, group_due

# what a node's static filter answers depend on, its name aside (read as two lists, not a tuple per node:
# lists of the very same objects compare at C speed, by identity)
_MANIFEST = attrgetter("manifest")
_READY = attrgetter("ready")

SCORE_POLICIES = (*SCORERS, "fragmentation")  # plugins/fragmentation.py: needs the decision's device counts


@dataclass
class Scheduler:
    score: str = "most-allocated"
    gang_timeout_ms: int = DEFAULT_GANG_TIMEOUT_MS
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # the run configuration's `kubernetes` entry (core/kube/versions.py profile_config); None: legacy 1.35
    kubernetes: dict[str, Any] | None = None
    name: str = "scheduler"
    trigger: Trigger = "events"
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
        self._dra = DraPlugin(allocator_features(self.profile))
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

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        queue = sorted(view.pending_pods(), key=lambda p: (-p.priority, p.created_offset))
        gangs = GangCycle(view, now, self.gang_timeout_ms, self.profile.enabled("NominatedNodeNameForExpectation"))
        cycle = Cycle(view, rng, gangs.held, view.gang.nominated)
        gangs.expire(cycle)
        busy = gangs.busy  # waiting at Permit, or just released: not in the queue this decision
        wake = gangs.wake_at()
        by_group = self._pod_groups(queue, view)  # 1.36+: the PodGroups' pods, queued as one entry each
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
            self._schedule(cycle, pod, gangs)
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
                schedule_group(cycle, groups, group, members, partial(self._place, cycle))
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
                schedule_composite(cycle, groups, root, leaves, partial(self._place, cycle))
        return later

    def _group_settings(self) -> tuple[str, bool, bool]:
        """The release (condition names, beta checks), whether TopologyAwareWorkloadScheduling is on, and
        whether workload-aware preemption is (1.36: its own gate; 1.37: part of GenericWorkload, KEP-4671's
        gate merge)."""
        version, gates = self.profile.version, self.profile.gates
        preemption = gates.get("WorkloadAwarePreemption", False) if version == "1.36" else version == "1.37"
        return version, bool(gates.get("TopologyAwareWorkloadScheduling", False)), bool(preemption)

    def _static_answers(self, cycle: Cycle, pod: PodState) -> dict[str, str | None]:
        """Each node's static filter answer for the pod (its first failing filter, or None), as a map."""
        shape = self._shapes(pod)
        answers = cycle.static_maps.get(shape)
        if answers is None:
            answers = cycle.static_maps[shape] = dict(self._static_nodes(cycle, pod, shape))
        return answers

    def _place(self, cycle: Cycle, pod: PodState, nodes: tuple[str, ...] | None) -> Placement | Status:
        """One pod of a PodGroup's cycle through PreFilter, Filter and Score (restricted to `nodes` when the
        group has a topology domain), bound in the cycle when it fits; else why not."""
        state = Attempt(cycle, pod)
        status = self._claims.pre_filter(state, pod)  # DynamicResources
        if status is not None:
            if status is WAITING:
                return unresolvable("waiting for the pod's ResourceClaims to be created", "missing",
                                    "DynamicResources")
            return status
        node_name, reasons, allocations, state.dra_nodes = self.schedule_one(
            cycle, pod, state.claims, state.allocator, restrict=nodes)
        if node_name is None:
            return self._claims.post_filter(state, pod, reasons)
        cycle.bind(pod, node_name, state.claims, allocations)
        return Placement(pod, node_name, state.claims, allocations)

    def _schedule(self, cycle: Cycle, pod: PodState, gangs: GangCycle) -> None:
        """One pod's attempt (upstream's scheduleOne): the points of the default profile (profile.py) in
        upstream's order, with the fast paths between them; without fast paths, plain.attempt's loop."""
        if not self.fast_paths:
            attempt(default_profile(self._dra, gangs, self._scorer), Attempt(cycle, pod), self._plain_pick)
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
                cycle.pending(pod, NOT_READY, status.message, status.cause, status.detail)
            return
        claims, allocator = state.claims, state.allocator
        # A pod with no claims, of a shape that already failed in this decision with no binding since:
        # the same failure (schedule_one's answer depends on the shape, the requests and the decision's
        # usage only; its one side effect, the rotating start, is replayed). Most failed attempts.
        again = (self._shapes(pod), tuple(pod.requests.items()), len(cycle.changed)) \
            if not claims.any and self.score != "fragmentation" else None
        failed = cycle.failed.get(again) if again is not None else None
        if failed is not None:
            n, status = failed
            if n:
                cycle.cursor[0] = cycle.cursor[0] % n + n
            cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)
            return
        node_name, reasons, allocations, state.dra_nodes = self.schedule_one(cycle, pod, claims, allocator)
        if node_name is not None:
            if gang is None:
                cycle.bind(pod, node_name, claims, allocations)
            else:  # Reserve, then wait at Permit for the rest of the gang
                cycle.hold(pod, node_name, allocations, gang)
                gangs.place(gang, Placed(pod, node_name, allocations))
            return
        status = self._claims.post_filter(state, pod, reasons)
        if again is not None:
            cycle.failed[again] = (len(cycle.static[again[0]]), status)
        cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)

    def schedule_one(
        self, cycle: Cycle, pod: PodState, claims: PodClaims, allocator: Allocator | None,
        restrict: tuple[str, ...] | None = None,
    ) -> tuple[str | None, Counter[str], dict[str, dict[str, Any]], list[str]]:
        """Filter, score, pick the best node (random among equals), as upstream's schedulePod.

        The DRA filter is the expensive one, and in 1.35 DRA scores nothing but firstAvailable
        ranks, so it runs last and lazily: nodes that pass the cheap filters are visited from the
        best score down, each group of equal scores in a random order (the seeded source), and the
        first node whose claims can be allocated is the choice. That is the node upstream would pick
        (the best score among feasible nodes, uniformly at random among equals) without running
        the allocator on every node. Returns the node (or None), the failure reasons counted over
        nodes (when no node is chosen: a pod that fits somewhere may not count them), the DRA
        allocations for the chosen node, and the nodes that failed only on DRA, the closest first.

        A pod without claims is answered from the per-shape cache (feasibility_cache.py): the same
        nodes scanned, the same best nodes in the same order, so the same choice from the same
        random draws, or the same failures counted; the node-by-node loop below is for the rest.
        `restrict`: only these nodes (a PodGroup's topology domain); the others fail as outside it.
        """
        view, used = cycle.view, cycle.used
        reasons: Counter[str] = Counter()
        shape = self._shapes(pod)
        nodes = self._static_nodes(cycle, pod, shape)
        if restrict is not None:  # a topology domain: its nodes only, with their static answers
            answers = self._static_answers(cycle, pod)
            nodes = [(name, answers[name]) for name in restrict if name in answers]
        score = self._scorer(cycle, pod)
        # Like upstream, stop once enough feasible nodes are found, starting where the last search
        # stopped (a rotating start, carried by the decision's cycle); if none of them can take the
        # pod's claims, look at the rest too.
        want = num_feasible_nodes_to_find(len(nodes))
        start = cycle.cursor[0] % len(nodes) if nodes else 0
        if nodes and not claims.any and self.score != "fragmentation" and restrict is None:
            index = self._feasibility.index((shape, tuple(pod.requests.items())), pod.requests,
                                            self._node_score(pod, score))
            index.sync(view, nodes, cycle, cycle.changed, used.own_map() if isinstance(used, Used) else {})
            if not index.feasible():  # every node looked at, none fits
                cycle.cursor[0] = start + len(nodes)
                return None, index.reasons(), {}, []
            scanned, group = index.scan(start, want)
            cycle.cursor[0] = start + scanned
            if len(group) > 1:
                cycle.rng.shuffle(group)  # selectHost: uniformly at random among the best
            return group[0], reasons, {}, []
        order = nodes[start:] + nodes[:start]
        scanned = 0
        dra_nodes: list[str] = []
        # NodeResourcesFit's check (`lacking`) and the score inlined (the hot loop): for most-/least-
        # allocated with at most two requested resources the same float arithmetic as `utilisation` (one
        # or two additions round the same whatever sum() does).
        requests = sorted(pod.requests.items())
        inline = self.score != "fragmentation" and len(pod.requests) <= 2
        least = self.score == "least-allocated"
        in_order = list(pod.requests.items())
        nodes_of = view.nodes
        own = used.own_map() if isinstance(used, Used) else None
        total = len(order)
        while scanned < total:
            scored: dict[float, list[str]] = {}
            found = 0
            failed: dict[str, int] = {}
            while scanned < total and found < want:
                name, failure = order[scanned]
                scanned += 1
                if failure is None:
                    node = nodes_of[name]
                    if own is None:
                        node_used = used[name]
                    else:
                        mine = own.get(name)
                        node_used = node.used if mine is None else mine
                    alloc = node.allocatable
                    missing = lacking(requests, node_used, alloc)
                    if missing:
                        failure = failure_message(missing[0])
                    else:
                        if inline:
                            value, k = 0.0, 0
                            for resource, amount in in_order:
                                cap = alloc.get(resource)
                                if cap:
                                    value += (node_used.get(resource, 0) + amount) / cap
                                    k += 1
                            value = value / k if k else 0.0
                            if least:
                                value = 1.0 - value
                        else:
                            value = score(pod, node, node_used)
                        bucket = scored.get(value)
                        if bucket is None:
                            scored[value] = [name]
                        else:
                            bucket.append(name)
                        found += 1
                        continue
                failed[failure] = failed.get(failure, 0) + 1
            reasons.update(failed)
            cycle.cursor[0] = start + scanned
            chosen, allocations = self._pick(cycle, scored, reasons, dra_nodes, claims=claims, allocator=allocator)
            if chosen is not None:
                return chosen, reasons, allocations, []
        return None, reasons, {}, dra_nodes

    def _plain_pick(self, state: Attempt) -> Pick:
        """DynamicResources' Filter on the best-scored nodes for the plain run: `_pick` without its memo."""
        return partial(self._pick, state.cycle, claims=state.claims, allocator=state.allocator, memo=False)

    def _node_score(self, pod: PodState, score: Callable[[PodState, NodeState, dict[str, int]], float]
                    ) -> Callable[[NodeState, dict[str, int]], float]:
        """The score of one node for the pod (most-/least-allocated), as the loop below computes it: its
        inlined arithmetic for at most two requested resources, else the scorer."""
        if len(pod.requests) > 2:
            return partial(score, pod)
        in_order = list(pod.requests.items())
        least = self.score == "least-allocated"

        def value(node: NodeState, node_used: dict[str, int]) -> float:
            total, k = 0.0, 0
            alloc = node.allocatable
            for resource, amount in in_order:
                cap = alloc.get(resource)
                if cap:
                    total += (node_used.get(resource, 0) + amount) / cap
                    k += 1
            total = total / k if k else 0.0
            return 1.0 - total if least else total
        return value

    def _scorer(self, cycle: Cycle, pod: PodState) -> Callable[[PodState, NodeState, dict[str, int]], float]:
        """The score function for this pod (called per node: the plain function where there is one)."""
        if self.score != "fragmentation":
            return SCORERS[self.score]
        demand = pod_demand(cycle.view, pod)
        histogram = cycle.histogram(self._demand)
        free = cycle.free_devices
        return lambda p, node, used: fragmentation_score(
            demand, free.free(node, used), histogram, utilisation(p, node, used))

    def _pick(
        self,
        cycle: Cycle,
        scored: dict[float, list[str]],
        reasons: Counter[str],
        dra_nodes: list[str],
        *,
        claims: PodClaims,
        allocator: Allocator | None,
        memo: bool = True,
    ) -> tuple[str | None, dict[str, dict[str, Any]]]:
        """The best-scored node among `scored` whose claims can be allocated (random among equals);
        the nodes where DRA failed are appended to `dra_nodes`. `memo`: answer from, and add to, the
        decision's DRA failures (cycle.dra_failed)."""
        for score in sorted(scored, reverse=True):
            group = scored[score]
            if len(group) > 1:
                group = list(group)
                cycle.rng.shuffle(group)
            if not claims.any:
                return group[0], {}
            shape = claims.shape()
            for name in group:
                if memo and (name, shape) in cycle.dra_failed:
                    reasons[DRA_FAILURE] += 1  # same claims failed on this unchanged node earlier in the cycle
                    dra_nodes.append(name)
                    continue
                allocations, failure = self._dra.filter(allocator, claims, cycle.view.nodes[name])
                if allocations is not None:
                    return name, allocations
                if failure == DRA_FAILURE:
                    cycle.dra_failed.add((name, shape))
                reasons[failure or DRA_FAILURE] += 1
                dra_nodes.append(name)
        return None, {}

    def _static_nodes(self, cycle: Cycle, pod: PodState, shape: str) -> list[tuple[str, str | None]]:
        """`_static`'s list for the pod's static shape, and the very same list again in later decisions
        while no node was added or removed, turned Ready or not, or got another manifest: one look at
        the nodes per decision rather than one per shape, and a list the feasibility cache knows."""
        nodes = cycle.static.get(shape)
        if nodes is not None:
            return nodes
        if cycle.generation < 0:
            current = cycle.view.nodes
            sig = (list(current), list(map(_MANIFEST, current.values())), list(map(_READY, current.values())))
            if sig != self._node_sig:
                self._node_sig = sig
                self._generation += 1
            cycle.generation = self._generation
        kept = self._static_lists.get(shape)
        if kept is not None and kept[0] == cycle.generation:
            nodes = cycle.static[shape] = kept[1]
            return nodes
        nodes = self._static(cycle.view, pod, cycle.static, self._static_memo)
        if len(self._static_lists) > 1024:
            self._static_lists.clear()
        self._static_lists[shape] = (cycle.generation, nodes)
        return nodes

    @staticmethod
    def _static(
        view: ClusterState, pod: PodState, cache: dict[str, list[tuple[str, str | None]]] | None,
        memo: dict[str, dict[str, tuple[dict[str, Any], bool, str | None]]] | None = None,
    ) -> list[tuple[str, str | None]]:
        """(node, first failing static filter or None) for every node, memoised per decision, and per
        node across decisions in `memo` (the reactor's): a node's answer depends only on its name, its
        manifest (replaced, never changed in place, by the fold) and whether it is Ready."""
        key = static_shape(pod) if cache is not None else ""
        if cache is not None and key in cache:
            return cache[key]
        empty: dict[str, int] = {}
        if memo is None or cache is None:
            out = [
                (name, first_failure(STATIC_FILTERS, pod, node, empty))
                for name, node in view.nodes.items()
            ]
        else:
            if len(memo) > 1024:
                memo.clear()
            known = memo.setdefault(key, {})
            out = []
            for name, node in view.nodes.items():
                hit = known.get(name)
                if hit is None or hit[0] is not node.manifest or hit[1] is not node.ready:
                    failure = first_failure(STATIC_FILTERS, pod, node, empty)
                    known[name] = hit = (node.manifest, node.ready, failure)
                out.append((name, hit[2]))
        if cache is not None:
            cache[key] = out
        return out
