"""The scheduler without its fast paths: upstream's scheduleOne as written, one loop over the profile's
extension points, and schedulePod node by node.

Why: the reactor answers most attempts from caches (the per-shape feasibility cache, the failure memo of
a decision, the static node lists kept across decisions, the DRA failure memo) and from an inlined copy
of the fit check and the score. Each is argued to give exactly the answer of the plain algorithm; this
module is that plain algorithm, so that a property test (tests/test_scheduler_fast_paths.py) can compare
the two decision by decision. It is switched on by `Scheduler.fast_paths = False`, an attribute that is
not part of a run's configuration (no scenario or log can ask for it).

Here a pod goes through the profile's points in upstream's order (`attempt`: PreEnqueue, PreFilter,
then the node search, PostFilter when no node is found, else Reserve, Permit, PreBind and Bind; the
plugins: profile.py); in the search every registered filter (NodeUnschedulable, NodeAffinity,
TaintToleration, NodeResourcesFit, then PodTopologySpread and InterPodAffinity, bound to the attempt at
PreFilter: placement.py) runs on every node visited, from the rotating start, with the
decision's usage; the score is the policy's function; DRA's Filter runs last on the best-scored nodes
(`pick`, without its failure memo).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ..state.cluster import NodeState, PodState
from .config import num_feasible_nodes_to_find as configured_nodes_to_find
from .cycle import Attempt, Cycle
from .filters import num_feasible_nodes_to_find
from .framework import Code, FilterPlugin, Profile, ScorePlugin
from .plugins import scheduling_gates
from .queue import NOT_READY

# a nominated pod's node and allocations if it fits there (preemption.py PodPreemption.nominated_first)
Nominated = Callable[[Cycle, PodState, Any, Any], "tuple[str, dict[str, dict[str, Any]]] | None"]
# a Score plugin's error for the attempt on the node found: (message, dralab cause), or None
ScoreError = Callable[[Attempt, str], "tuple[str, str] | None"]
# a Filter plugin's Error status for the attempt (filter_errors.py), given the filters and the rotating start the
# search began at: (message, dralab cause, detail), or None
FilterError = Callable[[Attempt, "tuple[FilterPlugin, ...]", int], "tuple[str, str, str] | None"]
Pick = Callable[[dict[float, list[str]], Counter[str], list[str]], tuple[str | None, dict[str, dict[str, Any]]]]


def attempt(profile: Profile[Attempt], state: Attempt, pick: Callable[[Attempt], Pick],
            nominated: Nominated | None = None, score_error: ScoreError | None = None,
            filter_error: FilterError | None = None) -> None:
    """One pod through the profile's points (upstream's scheduleOne, its binding cycle at once): a
    rejection at PreEnqueue or PreFilter is written as the pod's condition (SchedulingGated, or
    NotReadyForScheduling), a Wait there writes nothing; no node found: PostFilter's Status; else the
    node is reserved and, unless a Permit plugin says Wait, bound. `pick`: DynamicResources' Filter on
    the best-scored nodes, bound to the attempt. `nominated`: a nominated pod's node tried first
    (evaluateNominatedNode, with DefaultPreemption). `score_error`: a Score plugin's error on the node found
    (kubernetes#139016, reactor.py), written as SchedulerError. `filter_error`: a Filter's Error status on a node
    the search checks (a DRA selector failing at runtime, filter_errors.py): the attempt aborts, SchedulerError."""
    cycle, pod = state.cycle, state.pod
    for enqueue in profile.pre_enqueue:
        status = enqueue(pod)
        if status is not None:
            gate = status.plugin == scheduling_gates.NAME
            cycle.pending(pod, scheduling_gates.SCHEDULING_GATED if gate else NOT_READY, status.message,
                          status.cause, status.detail)
            return
    for pre_filter in profile.pre_filter:
        status = pre_filter(state, pod)
        if status is not None:
            if status.code != Code.WAIT:  # Unschedulable is an attempt (kubernetes#137617's refusal)
                reason = "Unschedulable" if status.code == Code.UNSCHEDULABLE else NOT_READY
                cycle.pending(pod, reason, status.message, status.cause, status.detail)
            return
    for pre_score in profile.pre_score:
        pre_score(state, pod, list(cycle.view.nodes.values()))
    assert state.score is not None, "no PreScore plugin chose the score"
    first = nominated(cycle, pod, state.claims, state.allocator) if nominated is not None else None
    node: str | None
    if first is not None and state.gang is None:
        node, state.allocations = first
    else:
        start = cycle.cursor[0]
        node, state.reasons, state.allocations, state.dra_nodes = schedule_pod(
            cycle, pod, profile.filter, state.score, pick(state))
        failed = filter_error(state, profile.filter, start) if filter_error is not None else None
        if failed is not None:
            cycle.pending(pod, "SchedulerError", failed[0], failed[1], failed[2])
            return
        error = score_error(state, node) if score_error is not None and node is not None else None
        if error is not None:
            cycle.pending(pod, "SchedulerError", error[0], error[1], error[0])
            return
    if node is None:
        for post_filter in profile.post_filter:
            status = post_filter(state, pod, state.reasons)
            cycle.pending(pod, "Unschedulable", status.message, status.cause, status.detail)
        return
    for plugin in profile.reserve:
        plugin.reserve(state, pod, node)
    waits = [s for permit in profile.permit if (s := permit(state, pod, node)) is not None]
    if any(s.code == Code.WAIT for s in waits):
        return  # held at Permit: bound with its group (GangCycle.finish)
    for pre_bind in profile.pre_bind:
        status = pre_bind(state, pod, node)
        if status is not None and status.code == Code.WAIT:
            return  # waiting in PreBind for binding conditions: bound by a later decision (plugins/dra_binding.py)
    for bind in profile.bind:
        bind(state, pod, node)


def schedule_pod(cycle: Cycle, pod: PodState, filters: tuple[FilterPlugin, ...], score: ScorePlugin, pick: Pick
                 ) -> tuple[str | None, Counter[str], dict[str, dict[str, Any]], list[str]]:
    """Scheduler.schedule_one's answer (upstream's schedulePod), computed plainly: the node (or None), the
    reasons counted over the nodes visited, the chosen node's DRA allocations, and the nodes that failed only on DRA."""
    nodes, used = cycle.view.nodes, cycle.used
    names = list(nodes)
    reasons: Counter[str] = Counter()
    want = num_feasible_nodes_to_find(len(names))
    start = cycle.cursor[0] % len(names) if names else 0
    order = names[start:] + names[:start]
    scanned, total = 0, len(order)
    dra_nodes: list[str] = []
    # with a scheduler configuration (scoring.py PodScore): the found nodes ranked at once, as upstream's
    # prioritizeNodes, whatever the plugins say of themselves; when one normalizes over the found set (not
    # `pointwise`), DRA's Filter runs on each node as it is found, else lazily on the best, as the reactor's
    rank: Callable[[list[tuple[str, NodeState, dict[str, int]]]], dict[float, list[str]]] | None = (
        getattr(score, "rank", None))
    setwise = rank is not None and not getattr(score, "pointwise", True)
    percentage = getattr(score, "percentage", None)  # the configuration's percentageOfNodesToScore
    if percentage is not None:
        want = configured_nodes_to_find(percentage, len(names))
    while scanned < total:
        scored: dict[float, list[str]] = {}
        found = 0
        found_nodes: list[tuple[str, NodeState, dict[str, int]]] = []
        allocated: dict[str, dict[str, dict[str, Any]]] = {}
        while scanned < total and found < want:
            name = order[scanned]
            scanned += 1
            node, node_used = nodes[name], used[name]
            status = next((s for f in filters if (s := f(pod, node, node_used)) is not None), None)
            if status is not None:
                reasons[status.message] += 1
                continue
            if rank is not None:
                if setwise:
                    ok, allocated[name] = pick({0.0: [name]}, reasons, dra_nodes)
                    if ok is None:
                        continue
                found_nodes.append((name, node, node_used))
                found += 1
                continue
            scored.setdefault(score(pod, node, node_used), []).append(name)
            found += 1
        cycle.cursor[0] = start + scanned
        if rank is not None and not setwise:
            scored = rank(found_nodes)
        elif rank is not None:
            if not found_nodes:
                continue
            ranked = rank(found_nodes)
            best = ranked[max(ranked)]
            chosen = pick({0.0: best}, reasons, dra_nodes)[0]  # selectHost's draw (claims already filtered)
            return chosen, reasons, allocated[str(chosen)], []
        chosen, allocations = pick(scored, reasons, dra_nodes)
        if chosen is not None:
            return chosen, reasons, allocations, []
    return None, reasons, {}, dra_nodes
