"""DefaultPreemption (PostFilter): a pod that fits nowhere evicts lower-priority pods from one node, as
kube-scheduler 1.34-1.37 does it for single pods (pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption.go and pkg/scheduler/framework/preemption/preemption.go, executor.go).

1. Eligibility (PodEligibleToPreemptOthers): `preemptionPolicy: Never` never preempts; a pod already nominated
   to a node where a lower-priority pod is terminating by preemption waits for it (unless its nominated node
   now fails with UnschedulableAndUnresolvable) and keeps its nomination.
2. Potential nodes: those whose filter status was not UnschedulableAndUnresolvable (nodesWherePreemptionMightHelp).
   dralab's unresolvable filters are the static ones (not Ready, selector/affinity, taints) and DynamicResources:
   upstream's DRA Filter answers every "cannot allocate" with UnschedulableAndUnresolvable (statusUnschedulable in
   dynamicresources.go, 1.34 through 1.37), so a node that fails on devices only is never a candidate, and in the
   dry run the victims' devices are not freed (the plugin has no PreFilterExtensions): DRA devices are not
   preemptible. Known upstream limitation: kubernetes/enhancements#5690 (KEP-5690 "DRA: preemption", planned
   beta 1.37; its code PR kubernetes/kubernetes#139266 closed unmerged, no gate in the 1.37 table), documented in
   kubernetes/website#54770. A victim's devices are freed once it is gone, for whoever comes next.
3. Sampling (GetOffsetAndNumCandidates): a random offset into the potential nodes (the decision's seeded source)
   and at least max(10% of them, 100) candidates sought, stopping once that many are found with at least one
   that violates no PodDisruptionBudget.
4. SelectVictimsOnNode: remove every lower-priority pod from the node; the pod must then pass every filter there
   (the scheduler's own search restricted to the node, nominated pods of higher or equal priority counted);
   reprieve the victims, PDB-violating ones first, each list most important first (MoreImportantPod: higher
   priority, then the earlier start), putting each back if the pod still fits.
5. pickOneNodeForPreemption: fewest PDB violations, then the lowest highest-priority victim, the smallest sum of
   priorities, the fewest victims, the latest start among the highest-priority victims, then the first.
6. The eviction: victims deleted with their own grace period (`PodTerminating`, DisruptionTarget
   PreemptionByScheduler; one already terminating is left as it is), lower-priority pods nominated to that node
   lose their nomination, the preemptor gets `status.nominatedNodeName` and waits (Unschedulable, cause
   `preemption`). With SchedulerAsyncPreemption (beta, on, 1.33+) the nomination is written before the victims
   are deleted (the deletions run in a goroutine); without it after. The simulator's API calls take no time, so
   only the order of the events in the record differs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...log.events import AnyEvent, PodNominated, PodTerminating
from ...state.cluster import PodState
from ...state.termination import grace_ms, terminating
from ..framework import ExtensionPoint
from .node_resources_fit import failure_message, lacking
from .workload_preemption import _terminating_by_preemption

if TYPE_CHECKING:
    from ..cycle import Cycle

NAME = "DefaultPreemption"
EXTENSION_POINTS = (ExtensionPoint.POST_FILTER,)
MIN_CANDIDATE_NODES_PERCENTAGE = 10  # DefaultPreemptionArgs defaults
MIN_CANDIDATE_NODES_ABSOLUTE = 100
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_INT32_MAX = 2**31 - 1

# (the cycle, the node) -> None if the pod passes every filter there as the cycle stands, else the reason
Fits = Callable[["Cycle", str], "str | None"]


@dataclass
class Candidate:
    node: str
    victims: list[PodState]  # in the order SelectVictimsOnNode chose them
    violations: int  # victims whose eviction violates a PodDisruptionBudget


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it: the pods it covers and how many may still be disrupted."""

    namespace: str
    matches: Callable[[dict[str, str]], bool]  # its selector over a pod's labels
    allowed: int  # status.disruptionsAllowed
    disrupted: frozenset[str] = frozenset()  # status.disruptedPods (pod names)


@dataclass
class Outcome:
    """The PostFilter's answer: `message` to add to the FitError ("preemption: ..."), or the chosen candidate."""

    message: str = ""
    chosen: Candidate | None = None
    waiting: bool = False  # not eligible: already nominated, victims still terminating


def preemption_policy(pod: PodState) -> str:
    return str((pod.manifest.get("spec") or {}).get("preemptionPolicy") or "PreemptLowerPriority")


def nominated_node(cycle: Cycle, pod: PodState) -> str | None:
    """The pod's status.nominatedNodeName: the scheduler's own (PodNominated) or a dump's."""
    node = cycle.view.gang.nominated.get(pod.key)
    return node or (pod.manifest.get("status") or {}).get("nominatedNodeName") or None


# a running pod's start as an orderable key: its binding time, then its place among pods bound at that time (a
# dump's pods are bound in one record, in status.startTime order: core/analysis/dump.py)
Start = Callable[[PodState], tuple[int, int]]


def default_start(pod: PodState) -> tuple[int, int]:
    return pod.bound_t, pod.created_offset


def start_order(pods: Iterable[str]) -> Start:
    """Start keys with the pods' order in the fold (`ClusterState.pods`) as the tie-break."""
    order = {key: i for i, key in enumerate(pods)}
    return lambda pod: (pod.bound_t, order.get(pod.key, 0))


def more_important_key(pod: PodState, start: Start = default_start) -> tuple[int, int, int]:
    """MoreImportantPod (pkg/scheduler/util/utils.go) as a sort key: higher priority, then the earlier start."""
    return (-pod.priority, *start(pod))


def eligible(cycle: Cycle, pod: PodState, unresolvable: Callable[[str], bool]) -> str | None:
    """None if the pod may preempt, else upstream's reason (PodEligibleToPreemptOthers)."""
    if preemption_policy(pod) == "Never":
        return "not eligible due to preemptionPolicy=Never."
    node = nominated_node(cycle, pod)
    if node is None or unresolvable(node) or node not in cycle.view.nodes:
        return None
    view = cycle.view
    for key in view.nodes[node].pods:
        other = view.pods[key]
        if other.priority < pod.priority and _terminating_by_preemption(other.manifest):
            return "not eligible due to a terminating pod on the nominated node."
    return None


def offset_and_count(cycle: Cycle, n: int) -> tuple[int, int]:
    """GetOffsetAndNumCandidates: a random start among the potential nodes, and how many candidates to seek."""
    count = max(n * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE)
    return cycle.rng.randrange(n), min(count, n)


def _violating(victims: list[PodState], budgets: Sequence[Budget]) -> tuple[list[PodState], list[PodState]]:
    """filterPodsWithPDBViolation: the pods whose eviction would take a budget below zero (counting the earlier
    pods of the list against it), and the others; both keep the list's order."""
    allowed = [b.allowed for b in budgets]
    violating: list[PodState] = []
    others: list[PodState] = []
    for pod in victims:
        meta = pod.manifest.get("metadata") or {}
        namespace, labels = meta.get("namespace") or "default", meta.get("labels") or {}
        hit = False
        for i, budget in enumerate(budgets):
            if budget.namespace != namespace or not budget.matches(labels) or meta.get("name") in budget.disrupted:
                continue
            allowed[i] -= 1
            hit = hit or allowed[i] < 0
        (violating if hit else others).append(pod)
    return violating, others


def select_victims(cycle: Cycle, pod: PodState, node: str, fits: Fits | None, budgets: Sequence[Budget],
                   start: Start = default_start) -> Candidate | str:
    """SelectVictimsOnNode: the victims on `node`, or why the node cannot help. Rolled back: only the answer kept.
    Victims' claims stay allocated in the dry run (DRA devices are not preemptible, see the module's text).
    `fits` None: NodeResourcesFit is the only filter left to pass (a claim-free pod on a node whose static filters
    pass), done as arithmetic on a copy of the node's usage instead of in the cycle."""
    view = cycle.view
    potential = [view.pods[k] for k in view.nodes[node].pods if view.pods[k].priority < pod.priority]
    if not potential:
        return NO_VICTIMS
    if fits is None:
        used = dict(cycle.used[node])
        allocatable, requests = view.nodes[node].allocatable, sorted(pod.requests.items())
        # _reprieve's first answer (every potential victim off, the pod must fit) on the resources the fit
        # reads only: most nodes of a preemption that cannot help end here (Unschedulable: 5,000 a preemptor)
        off = {resource: used.get(resource, 0) - sum(v.requests.get(resource, 0) for v in potential)
               for resource, _ in requests}
        off["pods"] = used.get("pods", 0) - len(potential)
        missing = lacking(requests, off, allocatable)
        if missing:
            return failure_message(missing[0])

        def move(victim: PodState, sign: int) -> None:
            for resource, amount in victim.requests.items():
                used[resource] = used.get(resource, 0) + sign * amount
            used["pods"] = used.get("pods", 0) + sign

        def fit_now() -> str | None:
            missing = lacking(requests, used, allocatable)
            return failure_message(missing[0]) if missing else None
        return _reprieve(node, potential, budgets, lambda v: move(v, -1), lambda v: move(v, 1), fit_now, start)
    sp = cycle.savepoint()
    try:
        return _reprieve(node, potential, budgets, lambda v: cycle.remove(v, []), lambda v: cycle.restore(v, []),
                         lambda: fits(cycle, node), start)
    finally:
        cycle.rollback(sp)


def _reprieve(node: str, potential: list[PodState], budgets: Sequence[Budget], take: Callable[[PodState], None],
              put_back: Callable[[PodState], None], fit: Callable[[], str | None], start: Start
              ) -> Candidate | str:
    """The steps of SelectVictimsOnNode over `take`/`put_back` (a victim off or back on the node) and `fit` (the
    pod's filters on the node now): all off; the pod must fit; back, violating first, most important first."""
    for victim in potential:
        take(victim)
    failure = fit()
    if failure is not None:
        return failure
    potential.sort(key=lambda p: more_important_key(p, start))
    violating, others = _violating(potential, budgets)
    victims: list[PodState] = []
    violations = 0
    for group, counts in ((violating, True), (others, False)):
        for victim in group:
            put_back(victim)
            if fit() is not None:
                take(victim)
                victims.append(victim)
                violations += counts
    victims.sort(key=lambda p: more_important_key(p, start))  # upstream sorts again: victims[0] most important
    return Candidate(node, victims, violations)


def dry_run(cycle: Cycle, pod: PodState, potential: list[str], fits: Fits | None, budgets: Sequence[Budget],
            start: Start = default_start) -> tuple[list[Candidate], Counter[str]]:
    """DryRunPreemption from the random offset: the candidates found, and each failing node's reason counted."""
    offset, count = offset_and_count(cycle, len(potential))
    violating: list[Candidate] = []
    clean: list[Candidate] = []
    reasons: Counter[str] = Counter()
    for i in range(len(potential)):
        node = potential[(offset + i) % len(potential)]
        found = select_victims(cycle, pod, node, fits, budgets, start)
        if isinstance(found, str):
            reasons[found] += 1
            continue
        (violating if found.violations else clean).append(found)
        if clean and len(clean) + len(violating) >= count:
            break
    return clean + violating, reasons


def pick_one(candidates: list[Candidate], start: Start = default_start) -> Candidate:
    """pickOneNodeForPreemption: the criteria in upstream's order, each keeping the best candidates so far."""
    def earliest_of_highest(c: Candidate) -> tuple[int, int]:
        top = max(v.priority for v in c.victims)
        return min(start(v) for v in c.victims if v.priority == top)

    scores: tuple[Callable[[Candidate], int | tuple[int, int]], ...] = (
        lambda c: -c.violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + _INT32_MAX + 1 for v in c.victims),
        lambda c: -len(c.victims),
        earliest_of_highest,  # the latest start wins
    )
    left = candidates
    for score in scores:
        if len(left) == 1:
            break
        best = max(score(c) for c in left)
        left = [c for c in left if score(c) == best]
    return left[0]


def preempt(cycle: Cycle, pod: PodState, potential: list[str], fits: Fits | None, budgets: Sequence[Budget],
            unresolvable: Callable[[str], bool], total: int) -> Outcome:
    """PostFilter: the candidate chosen, or the message for the FitError (without its "preemption: " prefix)."""
    why = eligible(cycle, pod, unresolvable)
    if why is not None:
        return Outcome(why, waiting=why.startswith("not eligible due to a terminating"))
    if not potential:
        return Outcome(fit_message(total, Counter({NOT_HELPFUL: total})))
    start = start_order(cycle.view.pods)
    candidates, reasons = dry_run(cycle, pod, potential, fits, budgets, start)
    if not candidates:
        if total > len(potential):
            reasons[NOT_HELPFUL] += total - len(potential)
        return Outcome(fit_message(total, reasons))
    return Outcome(chosen=pick_one(candidates, start))


def fit_message(total: int, reasons: Counter[str]) -> str:
    parts = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
    return f"0/{total} nodes are available: {parts}."


def evict(cycle: Cycle, pod: PodState, chosen: Candidate, async_preemption: bool) -> list[AnyEvent]:
    """prepareCandidate: the victims deleted gracefully, lower-priority nominations to the node cleared, and the
    preemptor nominated (its room kept in the cycle); the events, in the order the release writes them."""
    view = cycle.view
    scheduler = (pod.manifest.get("spec") or {}).get("schedulerName") or "default-scheduler"
    deletions: list[AnyEvent] = [
        PodTerminating(pod=v.key, node=chosen.node, grace_ms=grace_ms(v.manifest),
                       reason=f"{scheduler}: preempting to accommodate a higher priority pod")
        for v in chosen.victims if not terminating(v.manifest)]
    cleared: list[AnyEvent] = []
    for key, node in sorted(view.gang.nominated.items()):
        other = view.pods.get(key)
        if node == chosen.node and key != pod.key and other is not None and other.priority < pod.priority:
            cleared.append(PodNominated(pod=key))
            cycle.release_nomination(other)
            cycle.cleared.add(key)
    nominate: list[AnyEvent] = []
    if view.gang.nominated.get(pod.key) != chosen.node:
        nominate.append(PodNominated(pod=pod.key, node=chosen.node))
    cycle.nominate(pod, chosen.node)
    return nominate + deletions + cleared if async_preemption else deletions + cleared + nominate


def detail(chosen: Candidate) -> str:
    return f"{chosen.node}: " + ", ".join(v.key for v in chosen.victims)
