"""DefaultPreemption bound to the scheduler: a single pod's attempt with nominated pods as upstream counts them,
its nominated node tried first, and preemption as its PostFilter (plugins/default_preemption.py has the
algorithm; this module gives it the scheduler's node search and filter answers).

Why apart from the reactor: the reactor keeps the queue and one hook per point (before the attempt, the
PostFilter, after it); what preemption needs of the search (each node's static answer, the nodes that failed on
DRA only, a search restricted to one node that leaves the rotating start alone) is here.

Only in a release profile: a log without a `kubernetes` entry (the legacy model, benchmarks/digests.json
"scenarios") was made by a scheduler without single-pod preemption, and must replay as it was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ..dra.allocator import Allocator
from ..kube.pdb import disruptions_allowed, selector_matches
from ..log.events import PodNominated
from ..state.cluster import PENDING, RUNNING, ClusterState, PodState
from ..state.termination import terminating
from .cycle import Attempt, Cycle
from .framework import Code, Status
from .placement import depends
from .plugins import default_preemption as dp
from .plugins.dynamic_resources import DRA_FAILURE, PodClaims

if TYPE_CHECKING:
    from .node_search import NodeSearch

PREEMPTION_CAUSE = "preemption"
_NO_POD = 2**31  # above any priority: no running pod


@dataclass
class PodPreemption:
    """The scheduler's DefaultPreemption (one per Scheduler; per-attempt state reset by `before`)."""

    search: NodeSearch
    async_preemption: bool = True  # SchedulerAsyncPreemption (versions.py)
    budgets: Sequence[dp.Budget] = ()  # refreshed per decision from the view (PodDisruptionBudgets)
    _hidden: list[tuple[PodState, str]] = field(default_factory=list)
    _keep_own: bool = False
    _lowest_at: tuple[int, int] = (-1, 0)  # (view offset, lowest running priority)

    def _lowest(self, cycle: Cycle) -> int:
        """The lowest priority of a running pod in the decision's view (cached per view)."""
        view = cycle.view
        if self._lowest_at[0] != view.offset:
            running = view.pods_by_phase[RUNNING]
            self._lowest_at = (view.offset, min((view.pods[k].priority for k in running), default=_NO_POD))
        return self._lowest_at[1]

    def budgets_for(self, view: ClusterState, pdbs: list[dict[str, Any]]) -> None:
        """The decision's PodDisruptionBudgets (view_budgets); none when there are none (budgets can be deleted
        during a run: an earlier decision's must not stay)."""
        self.budgets = view_budgets(view, pdbs) if pdbs else ()

    def before(self, cycle: Cycle, pod: PodState) -> None:
        """Before a single pod's attempt: nominated pods of lower priority (and its own room) out of its way."""
        self._keep_own = False
        self._hidden = cycle.hide_nominated(pod) if cycle.nominated else []

    def after(self, cycle: Cycle, pod: PodState) -> None:
        if self._hidden:
            cycle.show_nominated(self._hidden, pod, self._keep_own)
            self._hidden = []

    def nominated_first(self, cycle: Cycle, pod: PodState, claims: PodClaims, allocator: Allocator | None
                        ) -> tuple[str, dict[str, dict[str, Any]]] | None:
        """evaluateNominatedNode: a pod nominated to a node is tried there first; the node and its allocations
        if it fits."""
        node = cycle.view.gang.nominated.get(pod.key)
        if node is None or node not in cycle.view.nodes:
            return None
        cursor = cycle.cursor[0]
        chosen, _, allocations, _ = self.search.schedule_one(cycle, pod, claims, allocator, restrict=(node,))
        cycle.cursor[0] = cursor
        return (chosen, allocations) if chosen is not None else None

    def post_filter(self, state: Attempt, status: Status) -> Status:
        """DefaultPreemption after DynamicResources' PostFilter: the status to write (cause `preemption` when the
        pod now waits for victims)."""
        if status.code == Code.ERROR:
            return status
        cycle, pod = state.cycle, state.pod
        answers = self.search._static_answers(cycle, pod)
        dra = set(state.dra_nodes)

        def unresolvable(node: str) -> bool:
            return answers.get(node) is not None or node in dra

        def search(c: Cycle, node: str) -> str | None:
            cursor = c.cursor[0]
            chosen, reasons, _, _ = self.search.schedule_one(c, pod, state.claims, state.allocator, restrict=(node,))
            c.cursor[0] = cursor
            return None if chosen is not None else (next(iter(reasons), DRA_FAILURE))

        # no claims, a node whose static filters pass, no filter that reads other pods (PodTopologySpread,
        # InterPodAffinity: placement.py depends): NodeResourcesFit is the only filter left (arithmetic)
        fits = search if state.claims.any or depends(cycle, pod, self.search._anti_memo) else None

        potential = [n for n, a in answers.items() if a is None and n not in dra]
        if potential and dp.eligible(cycle, pod, unresolvable) is None and pod.priority <= self._lowest(cycle):
            # no lower-priority pod anywhere: the dry run's answer on every potential node, without running it
            reasons = Counter({dp.NO_VICTIMS: len(potential)})
            if len(answers) > len(potential):
                reasons[dp.NOT_HELPFUL] = len(answers) - len(potential)
            outcome = dp.Outcome(dp.fit_message(len(answers), reasons))
        else:
            outcome = dp.preempt(cycle, pod, potential, fits, self.budgets, unresolvable, len(answers))
        if outcome.chosen is not None:
            cycle.events.extend(dp.evict(cycle, pod, outcome.chosen, self.async_preemption))
            self._keep_own = True
            return replace(status, cause=PREEMPTION_CAUSE, detail=dp.detail(outcome.chosen), code=Code.UNSCHEDULABLE)
        message = f"{status.message} preemption: {outcome.message}"
        if outcome.waiting:
            self._keep_own = True
            return replace(status, message=message, cause=PREEMPTION_CAUSE,
                           detail=str(dp.nominated_node(cycle, pod)))
        if cycle.view.gang.nominated.get(pod.key) and not outcome.message.startswith("not eligible"):
            cycle.events.append(PodNominated(pod=pod.key))  # no candidate: the nomination is cleared
        return replace(status, message=message)


def view_budgets(view: ClusterState, pdbs: list[dict[str, Any]]) -> list[dp.Budget]:
    """PodDisruptionBudgets with disruptionsAllowed from the view (the disruption controller's arithmetic,
    kube/pdb.py): healthy = running and not being deleted. Preemption reads them, and so does the autoscaler's
    scale-down (autoscaler/disruption/pdb.py)."""
    by_ns: dict[str, list[tuple[dict[str, str], bool]]] = {}
    for key in view.pods_by_phase[RUNNING]:
        p = view.pods[key]
        meta = p.manifest.get("metadata") or {}
        by_ns.setdefault(meta.get("namespace") or "default", []).append(
            (meta.get("labels") or {}, not terminating(p.manifest)))
    for key in view.pods_by_phase[PENDING]:
        meta = view.pods[key].manifest.get("metadata") or {}
        by_ns.setdefault(meta.get("namespace") or "default", []).append((meta.get("labels") or {}, False))
    return [
        dp.Budget(ns, partial(selector_matches, (pdb.get("spec") or {}).get("selector")),
                  # a dump's status as the disruption controller wrote it, else computed now
                  int(status["disruptionsAllowed"]) if "disruptionsAllowed" in (status := pdb.get("status") or {})
                  else disruptions_allowed(pdb, by_ns.get(ns, [])),
                  frozenset(status.get("disruptedPods") or {}))
        for pdb in pdbs if (ns := pdb["metadata"].get("namespace") or "default")]
