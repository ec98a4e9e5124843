"""The scheduler's node search (upstream's schedulePod: findNodesThatFitPod, prioritizeNodes, selectHost), apart
from the reactor's queue and unit handling (reactor.py): the static filters memoised per shape and node
generation, the feasibility cache's fast path for claim-free pods, the node-by-node loop with
NodeResourcesFit and the score inlined, and DynamicResources' Filter run lazily on the best-scored nodes.

Why a mixin: the search keeps caches across decisions (the scheduler's), so it lives on the Scheduler; it sits
in its own module so that the reactor stays a reader's size and the filter/score work and the queue/unit
work can change apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from operator import attrgetter
from typing import Any

from ..dra.allocator import Allocator
from ..state.cluster import ClusterState, NodeState, PodState
from .config import num_feasible_nodes_to_find as configured_nodes_to_find
from .cycle import Attempt, Cycle, Used
from .feasibility_cache import FeasibilityCache
from .filter_errors import CAUSE as FILTER_ERROR_CAUSE
from .filter_errors import first_error
from .filters import STATIC_FILTERS, ShapeMemo, first_failure, num_feasible_nodes_to_find, static_shape
from .framework import FilterPlugin
from .placement import AntiIndex, attempt_filter, cycle_pods
from .plain import Pick
from .plugins.dynamic_resources import DRA_FAILURE, DraPlugin, PodClaims
from .plugins.fragmentation import fragmentation_score, pod_demand
from .plugins.node_resources_fit import SCORERS, failure_message, lacking, utilisation
from .scoring import PodScore, Scoring

# what a node's static filter answer depends on, its name aside (read as two lists, not a tuple per node:
# lists of the very same objects compare at C speed, by identity)
_MANIFEST = attrgetter("manifest")
_READY = attrgetter("ready")


class NodeSearch:
    """The Scheduler's node search and the caches it keeps across decisions (set up by Scheduler)."""

    score: str
    _dra: DraPlugin
    _scoring: Scoring | None  # the scheduler configuration's Score plugins (scoring.py); None: the `score` policy
    _demand: dict[str, int]
    _static_memo: dict[str, dict[str, tuple[dict[str, Any], bool, str | None]]]
    _shapes: ShapeMemo
    _feasibility: FeasibilityCache
    _static_lists: dict[str, tuple[int, list[tuple[str, str | None]]]]
    _node_sig: tuple[list[str], list[dict[str, Any]], list[bool]]
    _generation: int
    _anti_memo: AntiIndex  # the pods with required pod anti-affinity (placement.py), across decisions

    def _static_answers(self, cycle: Cycle, pod: PodState) -> dict[str, str | None]:
        """Each node's static filter answer for the pod (its first failing filter, or None), as a map."""
        shape = self._shapes(pod)
        answers = cycle.static_maps.get(shape)
        if answers is None:
            answers = cycle.static_maps[shape] = dict(self._static_nodes(cycle, pod, shape))
        return answers

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
        nodes = every = self._static_nodes(cycle, pod, shape)
        if restrict is not None:  # a topology domain: its nodes only, with their static answers
            answers = self._static_answers(cycle, pod)
            nodes = [(name, answers[name]) for name in restrict if name in answers]
        score = self._scorer(cycle, pod)
        # With a scheduler configuration: the plugins' PreScore for this pod (scoring.py); `setwise` when a
        # plugin in play normalizes over the found nodes (or reads them all): then the found set is scored
        # as upstream, DynamicResources' Filter run on each node as it is found, not lazily afterwards.
        framework = score if isinstance(score, PodScore) else None
        setwise = framework is not None and not framework.pointwise
        # PodTopologySpread and InterPodAffinity (placement.py): a pod whose nodes depend on other pods' places
        # has its own node filter for this attempt, and takes none of the per-shape caches below
        extra = attempt_filter(cycle, pod, self._anti_memo)
        # Like upstream, stop once enough feasible nodes are found, starting where the last search
        # stopped (a rotating start, carried by the decision's cycle); if none of them can take the
        # pod's claims, look at the rest too.
        want = (num_feasible_nodes_to_find(len(nodes)) if self._scoring is None
                else configured_nodes_to_find(self._scoring.percentage, len(nodes)))
        start = cycle.cursor[0] % len(nodes) if nodes else 0
        key = (shape, tuple(pod.requests.items()), *(() if framework is None else (framework.key,)))
        if nodes and not claims.any and self.score != "fragmentation" and restrict is None and not setwise \
                and extra is None:
            index = self._feasibility.index(key, pod.requests,
                                            framework.node if framework is not None else self._node_score(pod, score))
            index.sync(view, nodes, cycle, cycle.changed, used.own_map() if isinstance(used, Used) else {})
            if not index.feasible():  # every node looked at, none fits
                cycle.cursor[0] = start + len(nodes)
                return None, index.reasons(), {}, []
            if self._scoring is not None:  # selectHost: the first of NodeSearch._draw's draws
                scanned, chosen = index.scan_draw(start, want, cycle.rng.randrange)
                cycle.cursor[0] = start + scanned
                return chosen, reasons, {}, []
            scanned, group = index.scan(start, want)
            cycle.cursor[0] = start + scanned
            return next(self._draw(cycle, group)), reasons, {}, []  # selectHost: at random among the best
        order = nodes[start:] + nodes[:start]
        scanned = 0
        dra_nodes: list[str] = []
        # NodeResourcesFit's check (`lacking`) and the score inlined (the hot loop): for most-/least-
        # allocated with at most two requested resources the same float arithmetic as `utilisation` (one
        # or two additions round the same whatever sum() does).
        requests = sorted(pod.requests.items())
        inline = framework is None and self.score != "fragmentation" and len(pod.requests) <= 2
        least = self.score == "least-allocated"
        in_order = list(pod.requests.items())
        nodes_of = view.nodes
        own = used.own_map() if isinstance(used, Used) else None
        # A pod with claims scored by pointwise plugins: each node's fit and score from the per-shape cache
        # (the same answers the loop computes, recomputed only where usage changed), DRA still lazy below.
        cached = None
        # synced over every node, read for those scanned
        if framework is not None and not setwise and every:  # `extra`: applied after the cached fit, as below
            cached = self._feasibility.index(key, pod.requests, framework.node)
            cached.sync(view, every, cycle, cycle.changed, own or {})
        part: dict[str, float] | None = None  # setwise: the found nodes' pointwise sums (PodScore.part), cached
        if setwise and every:
            assert framework is not None
            cached = self._feasibility.index((shape, tuple(pod.requests.items()), framework.part_key),
                                             pod.requests, framework.part)
            cached.sync(view, every, cycle, cycle.changed, own or {})
            part = {}
        total = len(order)
        has_claims = claims.any
        while scanned < total:
            scored: dict[float, list[str]] = {}
            found = 0
            failed: dict[str, int] = {}
            found_nodes: list[tuple[str, NodeState, dict[str, int]]] = []  # setwise: scored once all are found
            found_allocations: dict[str, dict[str, dict[str, Any]]] = {}
            while scanned < total and found < want:
                name, failure = order[scanned]
                scanned += 1
                if failure is None and cached is not None:
                    value, failure = cached.answer(name)  # fit and score as below, kept per shape
                    if part is None and failure is None and extra is not None \
                            and (status := extra(nodes_of[name])) is not None:
                        failure = status.message
                    elif part is not None and failure is None:  # setwise: the loop's filters after the fit
                        node = nodes_of[name]
                        if extra is not None and (status := extra(node)) is not None:
                            failure = status.message
                        else:
                            allocations = (self._dra_filter(cycle, claims, allocator, name, reasons, dra_nodes)
                                           if has_claims else {})  # _dra_filter's answer without claims
                            if allocations is None:
                                continue
                            mine = None if own is None else own.get(name)
                            found_nodes.append((name, node, used[name] if own is None else
                                                node.used if mine is None else mine))
                            found_allocations[name] = allocations
                            part[name] = value
                            found += 1
                            continue
                elif failure is None:
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
                    elif extra is not None and (status := extra(node)) is not None:
                        failure = status.message
                    # ---- end of the filters; the score (setwise: DRA's Filter first, then kept to rank)
                    elif setwise:
                        allocations = self._dra_filter(cycle, claims, allocator, name, reasons, dra_nodes)
                        if allocations is None:
                            continue
                        found_nodes.append((name, node, node_used))
                        found_allocations[name] = allocations
                        found += 1
                        continue
                    elif inline:
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
                if failure is None:
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
            if setwise:
                if not found_nodes:
                    continue
                assert framework is not None
                ranked = framework.rank(found_nodes, part)
                best = next(self._draw(cycle, ranked[max(ranked)]))  # selectHost
                return best, reasons, found_allocations[best], []
            chosen, allocations = self._pick(cycle, scored, reasons, dra_nodes, claims=claims, allocator=allocator)
            if chosen is not None:
                return chosen, reasons, allocations, []
        return None, reasons, {}, dra_nodes

    def _filter_error(self, cycle: Cycle, pod: PodState, claims: PodClaims, allocator: Allocator | None,
                      start: int) -> tuple[str, str] | None:
        """DynamicResources' Filter Error status upstream's search would have met in this attempt (a selector
        failing at runtime, filter_errors.py), checked on the nodes it would have run Filter on, from `start`
        (the rotating start before the search): (message, detail), or None. Release profiles only."""
        if allocator is None or not claims.to_allocate or not self._dra.may_fail(cycle.view, claims):
            return None
        nodes = self._static_nodes(cycle, pod, self._shapes(pod))
        if not nodes:
            return None
        first = start % len(nodes)
        want = (num_feasible_nodes_to_find(len(nodes)) if self._scoring is None
                else configured_nodes_to_find(self._scoring.percentage, len(nodes)))
        static = dict(nodes)
        extra = attempt_filter(cycle, pod, self._anti_memo)
        requests = sorted(pod.requests.items())
        view, used = cycle.view, cycle.used

        def passes(name: str) -> bool:  # the filters before DynamicResources, as schedule_one runs them
            node = view.nodes[name]
            return static[name] is None and not lacking(requests, used[name], node.allocatable) and (
                extra is None or extra(node) is None)
        order = [name for name, _ in nodes[first:] + nodes[:first]]
        return first_error(self._dra, allocator, claims, view.nodes, order, want, passes)

    def _plain_filter_error(self, state: Attempt, filters: tuple[FilterPlugin, ...], start: int
                            ) -> tuple[str, str, str] | None:
        """The plain run's `_filter_error` (plain.attempt's `filter_error`): the profile's filters on every node."""
        cycle, pod, claims, allocator = state.cycle, state.pod, state.claims, state.allocator
        if allocator is None or not claims.to_allocate or not self._dra.may_fail(cycle.view, claims):
            return None
        names = list(cycle.view.nodes)
        if not names:
            return None
        percentage = getattr(state.score, "percentage", None)
        want = (num_feasible_nodes_to_find(len(names)) if percentage is None
                else configured_nodes_to_find(percentage, len(names)))
        first = start % len(names)
        view, used = cycle.view, cycle.used

        def passes(name: str) -> bool:
            node = view.nodes[name]
            return all(f(pod, node, used[name]) is None for f in filters)
        error = first_error(self._dra, allocator, claims, view.nodes, names[first:] + names[:first], want, passes)
        return None if error is None else (error[0], FILTER_ERROR_CAUSE, error[1])

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
        """The score function for this pod (called per node: the plain function where there is one); with a
        scheduler configuration, the pod's PodScore after PreScore."""
        if self._scoring is not None:
            cycle_pods(cycle, self._anti_memo)  # the decision's pod view on the indexes kept across decisions
            return self._scoring.prepare(cycle, pod)
        if self.score != "fragmentation":
            return SCORERS[self.score]
        demand = pod_demand(cycle.view, pod)
        histogram = cycle.histogram(self._demand)
        free = cycle.free_devices
        return lambda p, node, used: fragmentation_score(
            demand, free.free(node, used), histogram, utilisation(p, node, used))

    def _draw(self, cycle: Cycle, group: list[str]) -> Iterator[str]:
        """The nodes of `group` in a uniformly random order (selectHost's choice, then the next ones for
        DynamicResources' lazy Filter), drawn from the decision's random source. Without a scheduler
        configuration: one shuffle of the whole group, as always (legacy logs depend on those draws); with
        one: drawn one at a time (a partial Fisher-Yates shuffle), as many draws as nodes looked at, since
        LeastAllocated leaves hundreds of empty nodes tied where most-allocated had one or two."""
        if self._scoring is None:
            if len(group) > 1:
                group = list(group)
                cycle.rng.shuffle(group)
            yield from group
            return
        group = list(group)
        n = len(group)
        for i in range(n):
            if i < n - 1:
                j = i + cycle.rng.randrange(n - i)
                group[i], group[j] = group[j], group[i]
            yield group[i]

    def _dra_filter(self, cycle: Cycle, claims: PodClaims, allocator: Allocator | None, name: str,
                    reasons: Counter[str], dra_nodes: list[str]) -> dict[str, dict[str, Any]] | None:
        """DynamicResources' Filter on one node, as `_pick` runs it (its failure memo, reasons and closest
        nodes): the allocations, or None when the pod's claims cannot be allocated there."""
        if not claims.any:
            return {}
        shape = claims.shape()
        if (name, shape) in cycle.dra_failed:
            reasons[DRA_FAILURE] += 1
            dra_nodes.append(name)
            return None
        allocations, failure = self._dra.filter(allocator, claims, cycle.view.nodes[name])
        if allocations is not None:
            return allocations
        if failure == DRA_FAILURE:
            cycle.dra_failed.add((name, shape))
        reasons[failure or DRA_FAILURE] += 1
        dra_nodes.append(name)
        return None

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
            group = self._draw(cycle, scored[score])
            if not claims.any:
                return next(group), {}
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
