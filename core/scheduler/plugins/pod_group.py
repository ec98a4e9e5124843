"""The PodGroup scheduling cycle of kube-scheduler 1.36 and 1.37 (KEP-4671 "Workload Scheduling Cycle", with
KEP-5832's standalone PodGroup and KEP-5732's topology-aware workload scheduling).

From 1.36 a pod joins a group through `spec.schedulingGroup.podGroupName`, and the PodGroup object carries the
policy (`basic`, or `gang` with `minCount`). The queue holds the group as one entry (QueuedPodGroupInfo) and the
scheduler places it in one cycle, on one snapshot:

- PreEnqueue (aggregated for the group): the PodGroup must exist and at least `minCount` of its pods must
  exist (pending or running); until then the pods are not tried (written as NotReadyForScheduling, KEP-5501,
  which the cluster-autoscaler does not act on).
- The pods are taken one at a time, highest priority then earliest first, through the normal Filter and Score;
  a pod that fits is assumed on its node, one that does not is marked unschedulable (no per-pod PostFilter in
  the group cycle). After each pod the feasibility check (1.37: the PlacementFeasible extension point; 1.36:
  Permit) stops the cycle early once `minCount` can no longer be reached.
- Outcome: when at least `minCount` pods (counting the group's pods already running) fit, the placed ones bind
  at once; the rest go back to the queue with their own failure. Otherwise nothing binds, the assumptions are
  rolled back, and every pod of the group is unschedulable with the group's reason (then backoff and retry, as
  any pod). A `basic` group binds whatever fits (binding takes precedence, minCount is not checked).
- The PodGroup's status: 1.37 writes `PodGroupInitiallyScheduled` (True, reason `Scheduled`, terminal: it never
  goes back to False; False with `Unschedulable` or `SchedulerError` before that); 1.36 wrote
  `PodGroupScheduled`, which a later failure sets False again.
- Mismatch (1.37 beta, KEP-5710): every pod of a group with a `priority` must have that priority; otherwise the
  whole group is rejected with `SchedulerError`.
- Topology (KEP-5732, gate TopologyAwareWorkloadScheduling): with `schedulingConstraints.topology[0].key`, each
  value of that node label is a placement (a domain); the group algorithm runs in each (only the domain of the
  pods already running, if any), and the feasible placement with the best score wins: more pods placed
  (PodGroupPodsCount), then the tightest fit (NodeResourcesFit: least of the requested resources left free in
  the domain), then the seeded random source among equals.

A group that does not fit may preempt lower-priority pods and groups (workload-aware preemption, KEP-5710:
plugins/workload_preemption.py) before it is rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from ...log.events import PodGroupConditionSet, PodNominated
from ...state.cluster import RUNNING, ClusterState, PodState
from ...state.gangs import PodGroupState
from ..framework import ExtensionPoint, Status, unresolvable, unschedulable
from ..queue import NOT_READY
from .scheduling_gates import SCHEDULING_GATED, gated
from .workload_preemption import devices, preempt, preempts

if TYPE_CHECKING:
    from ..cycle import Cycle
    from .dynamic_resources import PodClaims

NAME = "GangScheduling"
# PreEnqueue: PodGroupCycle.admit; the group cycle itself (1.37's PlacementGenerate / PlacementFeasible /
# PlacementScore points, 1.36's Permit) in PodGroupCycle.schedule.
EXTENSION_POINTS = (ExtensionPoint.PRE_ENQUEUE, ExtensionPoint.PERMIT)

SCHEDULED_136 = "PodGroupScheduled"  # 1.36 (v1alpha2)
SCHEDULED_137 = "PodGroupInitiallyScheduled"  # 1.37 (v1alpha3, v1beta1): terminal once True
OUTSIDE_DOMAIN = "node(s) outside the pod group's topology domain"
NO_DOMAIN = "node(s) didn't have the pod group's topology label"


@dataclass(frozen=True)
class Placement:
    pod: PodState
    node: str
    claims: PodClaims
    allocations: dict[str, dict[str, Any]]
    # binds it in the cycle again (the chosen placement replayed): the special claim and PreBind wait too (reactor)
    rebind: Callable[[], None] | None = field(default=None, compare=False)


# One pod's attempt restricted to some nodes (in the view's order; None: all): its placement (already bound in
# the cycle) or why not.
Place = Callable[[PodState, "tuple[str, ...] | None"], "Placement | Status"]


@dataclass
class Trial:
    """The group algorithm run in one placement (a topology domain, or the whole cluster)."""

    domain: str | None
    placed: list[Placement] = field(default_factory=list)
    failures: dict[str, Status] = field(default_factory=dict)  # pod key -> why it did not fit
    aborted: bool = False  # the feasibility check gave up: minCount out of reach
    leftover: float = 0.0  # requested resources left free in the domain after placing (tightest fit: least)
    alike: list[str] = field(default_factory=list)  # the domains with this trial's signature (its own first)


def condition_type(version: str) -> str:
    return SCHEDULED_136 if version == "1.36" else SCHEDULED_137


def running_members(view: ClusterState, group: str) -> int:
    running = view.pods_by_phase[RUNNING]
    return sum(1 for key in view.gang.group_members.get(group, ()) if key in running)


def live_members(view: ClusterState, group: str) -> int:
    """Pods of the group that exist and are not terminated (pending or running)."""
    pending, running = view.pods_by_phase["Pending"], view.pods_by_phase[RUNNING]
    return sum(1 for key in view.gang.group_members.get(group, ()) if key in pending or key in running)


class PodGroupCycle:
    """One decision's PodGroup cycles (the scheduler reactor calls `admit`, then `schedule`, per group)."""

    def __init__(self, view: ClusterState, version: str, topology: bool, preemption: bool = True, *,
                 statics: Callable[[PodState], dict[str, str | None]] | None = None) -> None:
        self.statics = statics  # a pod's static filter answers per node (the scheduler's, for signatures)
        self._signatures: dict[tuple[Any, ...], dict[str, tuple[Any, ...]]] = {}  # (key, ...) -> domain -> sig
        self._changed_seen: dict[tuple[Any, ...], int] = {}  # how much of cycle.changed each memo has seen
        self._inverse: dict[str, dict[str, str]] = {}
        self._ready_values: dict[str, frozenset[str]] = {}
        self._domain_index: dict[str, dict[str, tuple[str, ...]]] = {}  # label key -> value -> nodes
        self.view = view
        self.version = version
        self.topology = topology  # TopologyAwareWorkloadScheduling on
        self.preemption = preemption  # workload-aware preemption (1.36: its gate; 1.37: GenericWorkload)

    def admit(self, key: str) -> tuple[PodGroupState | None, Status | None]:
        """PreEnqueue for the group: (the PodGroup, None) when it may be tried, else a rejection."""
        group = self.view.gang.podgroups.get(key)
        name = key.split("/", 1)[1]
        if group is None:
            # upstream's PreEnqueue message, verbatim ("pods's" included): gangscheduling.go, 1.37
            return None, unresolvable(f'waiting for pods\'s pod group "{name}" to appear in scheduling queue',
                                      "missing", NAME,
                                      f"PodGroup {key} does not exist")
        needed = group.min_count
        if needed is not None:
            members = live_members(self.view, key)
            if members < needed:
                return group, unresolvable("waiting for minCount pods from a gang to appear in scheduling queue",
                                           "gang", NAME, f"{members} of minCount {needed} pods of PodGroup {key} exist")
        return group, None

    def mismatch(self, group: PodGroupState, pods: list[PodState]) -> str | None:
        """validatePodGroup (schedule_one_podgroup.go; TestValidatePodGroup): the group's pods, the ones to
        schedule and the ones already running, must name one scheduler, and (1.37 beta, KEP-5710) all have the
        PodGroup's priority when it has one (every TestValidatePodGroup entry on priorities sets one)."""
        members = [*pods, *self.running_pods(group.key)]
        names = {scheduler_name(p) for p in members}
        if len(names) > 1:  # upstream's message, verbatim
            return "all pods in a single pod group should have the same .spec.schedulerName set"
        priority = group.priority
        if self.version != "1.37" or priority is None:
            return None
        odd = [p.key for p in members if p.priority != priority]
        if odd:
            return (f"pods of pod group {group.key} must have its priority {priority}; "
                    f"{len(odd)} do not (e.g. {odd[0]})")
        return None

    def running_pods(self, key: str) -> list[PodState]:
        running = self.view.pods_by_phase[RUNNING]
        return [self.view.pods[k] for k in self.view.gang.group_members.get(key, ()) if k in running]

    def _index(self, key: str) -> dict[str, tuple[str, ...]]:
        """Label value -> the nodes carrying it (in the view's order), for `key`, once per decision."""
        index = self._domain_index.get(key)
        if index is None:
            lists: dict[str, list[str]] = {}
            for name, node in self.view.nodes.items():
                value = (node.manifest.get("metadata", {}).get("labels") or {}).get(key)
                if value is not None:
                    lists.setdefault(str(value), []).append(name)
            index = self._domain_index[key] = {v: tuple(names) for v, names in lists.items()}
        return index

    def domains(self, group: PodGroupState) -> list[str | None] | str:
        """The placements to try: [None] (the whole cluster) without a topology constraint, else the values of
        its label key (only the one of the group's running pods, if any); a string says why there is none."""
        key = group.topology_key if self.topology else None
        if key is None:
            return [None]
        view = self.view
        ready = self._ready_values.get(key)
        if ready is None:  # the domains with a Ready node, once per decision (readiness is the view's)
            ready = self._ready_values[key] = frozenset(
                v for v, names in self._index(key).items() if any(view.nodes[n].ready for n in names))
        values = set(ready)
        running = view.pods_by_phase[RUNNING]
        held = {str((view.nodes[view.pods[k].node or ""].manifest.get("metadata", {}).get("labels") or {}).get(key))
                for k in view.gang.group_members.get(group.key, ()) if k in running and view.pods[k].node in view.nodes}
        if held:
            if len(held) > 1:
                return f"the pod group's running pods span {len(held)} values of {key}"
            values &= held
        if not values:
            return f"no Ready node has the label {key}"
        out: list[str | None] = [*sorted(values)]
        return out

    def domain_nodes(self, key: str, value: str) -> tuple[str, ...]:
        """The nodes of one domain, in the view's order."""
        return self._index(key).get(value, ())

    def signatures(self, cycle: Cycle, key: str, domains: list[str], pods: list[PodState]
                   ) -> dict[str, tuple[Any, ...]]:
        """What the group algorithm's answer in each domain depends on, names aside: each node's static
        filter answers for the group's pods, its allocatable and its usage in the decision of what they
        request. Domains with one signature give the same trial (up to the random tie-breaks among equal
        nodes), so dralab runs one per signature (upstream evaluates every placement, or a share of them in its
        beta). Kept across the decision's groups and recomputed only for domains whose nodes changed."""
        resources = tuple(sorted({r for p in pods for r in p.requests} | {"pods"}))
        shapes = _distinct_shapes(pods)
        answers = [self.statics(p) for p in shapes.values()] if self.statics is not None else []
        context = (key, resources, tuple(shapes))
        memo = self._signatures.setdefault(context, {})
        index = self._index(key)
        changed = cycle.changed
        seen = self._changed_seen.get(context, 0)
        if seen < len(changed):
            domain_of = self._node_domain(key)
            for name in changed[seen:]:
                memo.pop(domain_of.get(name, ""), None)
            self._changed_seen[context] = len(changed)
        view = cycle.view
        out: dict[str, tuple[Any, ...]] = {}
        for value in domains:
            sig = memo.get(value)
            if sig is None:
                rows = []
                for name in index.get(value, ()):
                    alloc, used = view.nodes[name].allocatable, cycle.used[name]
                    rows.append((tuple(a.get(name) for a in answers), tuple(alloc.get(r, 0) for r in resources),
                                 tuple(used.get(r, 0) for r in resources)))
                sig = memo[value] = tuple(rows)
            out[value] = sig
        return out

    def _node_domain(self, key: str) -> dict[str, str]:
        """Node -> its value of `key` (the inverse of `_index`)."""
        inverse = self._inverse.get(key)
        if inverse is None:
            inverse = self._inverse[key] = {n: v for v, names in self._index(key).items() for n in names}
        return inverse

    def trial(self, cycle: Cycle, group: PodGroupState, pods: list[PodState], place: Place,
              domain: str | None, need: int) -> Trial:
        """The group algorithm in one placement: bind as it goes (the caller keeps or rolls back)."""
        out = Trial(domain)
        nodes = self.domain_nodes(group.topology_key or "", domain) if domain is not None else None
        failed_shapes: dict[tuple[Any, ...], Status] = {}
        for i, pod in enumerate(pods):
            shape = _signature(pod)
            known = failed_shapes.get(shape) if shape is not None else None
            result = known if known is not None else place(pod, nodes)
            if isinstance(result, Placement):
                out.placed.append(result)
            else:
                out.failures[pod.key] = result
                if shape is not None:
                    failed_shapes[shape] = result  # the rest of a homogeneous sub-group fails alike
            remaining = len(pods) - i - 1
            if need > 0 and len(out.placed) + remaining < need:
                out.aborted = True  # PlacementFeasible: UnschedulableAndUnresolvable, stop early
                for rest in pods[i + 1:]:
                    out.failures.setdefault(rest.key, unschedulable(
                        "the pod group's minCount cannot be reached in this placement", "gang", NAME))
                break
        if nodes is not None:
            out.leftover = _leftover(cycle, nodes, pods)
        return out

    def condition(self, cycle: Cycle, group: PodGroupState, status: str, reason: str, message: str) -> None:
        """Write the group's scheduled condition when it changes (1.37: never away from True)."""
        kind = condition_type(self.version)
        old = group.condition(kind)
        if old is not None and old.status == "True" and kind == SCHEDULED_137:
            return
        if old is not None and (old.status, old.reason, old.message) == (status, reason, message):
            return
        cycle.events.append(PodGroupConditionSet(group=group.key, condition=kind, status=status, reason=reason,
                                                 message=message))


DEFAULT_SCHEDULER = "default-scheduler"  # dralab's one scheduler profile


def scheduler_name(pod: PodState) -> str:
    return str((pod.manifest.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER)


def terminating(pod: PodState) -> bool:
    """The pod is being deleted (`metadata.deletionTimestamp`, as a dump shows it)."""
    return bool((pod.manifest.get("metadata") or {}).get("deletionTimestamp"))


def _signature(pod: PodState) -> tuple[Any, ...] | None:
    """Pods with the same signature get the same answer (KEP-5598's homogeneous sub-groups); None for a pod
    with claims, whose answer depends on the devices the others took."""
    spec = pod.manifest.get("spec") or {}
    if spec.get("resourceClaims"):
        return None
    return (tuple(sorted(pod.requests.items())), repr(spec.get("nodeSelector")), repr(spec.get("affinity")),
            repr(spec.get("tolerations")), pod.priority)  # priority: which nominated pods its filters count


def _with_nominated(cycle: Cycle, place: Place, pod: PodState, nodes: tuple[str, ...] | None) -> Placement | Status:
    """A member's attempt as a single pod's (schedule_one_podgroup.go runs each member through schedulePod, whose
    RunFilterPluginsWithNominatedPods adds only nominated pods of priority >= the pod's): the others' room is
    hidden for the attempt and put back after it (cycle.py hide_nominated / show_nominated)."""
    hidden = cycle.hide_nominated(pod)
    try:
        return place(pod, nodes)
    finally:
        if hidden:
            cycle.show_nominated(hidden, pod, False)


def _distinct_shapes(pods: list[PodState]) -> dict[str, PodState]:
    """One pod per distinct placement constraint set (what the static filters read of a pod), by that set."""
    seen: dict[str, PodState] = {}
    for pod in pods:
        spec = pod.manifest.get("spec") or {}
        seen.setdefault(repr((spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations"),
                              spec.get("nodeName"))), pod)
    return seen


def _leftover(cycle: Cycle, nodes: tuple[str, ...], pods: list[PodState]) -> float:
    """The share of the requested resources left free in the domain after the trial (less is tighter)."""
    resources = {r for p in pods for r in p.requests}
    free = total = 0.0
    for name in nodes:
        node = cycle.view.nodes[name]
        used = cycle.used[name]
        for r in resources:
            cap = node.allocatable.get(r, 0)
            if cap:
                free += max(cap - used.get(r, 0), 0) / cap
                total += 1
    return free / total if total else 0.0


def schedule_group(cycle: Cycle, groups: PodGroupCycle, key: str, pods: list[PodState], place: Place) -> None:
    """One PodGroup's scheduling cycle (see the module docstring): PreEnqueue, the mismatch check, the group
    algorithm in each placement, then bind the best feasible placement or reject the whole group."""
    group, rejection = groups.admit(key)
    if rejection is not None or group is None:
        assert rejection is not None
        for pod in pods:
            cycle.pending(pod, NOT_READY, rejection.message, rejection.cause, rejection.detail)
        return
    if all(scheduler_name(p) != DEFAULT_SCHEDULER for p in pods) and len({scheduler_name(p) for p in pods}) == 1:
        return  # pods of another scheduler: kube-scheduler's queue never takes them (not our profile)
    ready: list[PodState] = []
    for pod in pods:
        gate = gated(pod)  # SchedulingGates' PreEnqueue still holds its own pods back
        if terminating(pod):
            continue  # skipPodGroupPodSchedule: a member being deleted is dropped from the cycle, left as it is
        if gate is not None:
            cycle.pending(pod, SCHEDULING_GATED, gate.message, gate.cause, gate.detail)
        else:
            ready.append(pod)
    if not ready:
        return
    for pod in ready:  # the room kept for its pods' nominations is theirs in this cycle
        cycle.release_nomination(pod)
    if cycle.nominated:  # each member's filters count the nominated pods of its priority or higher
        place = partial(_with_nominated, cycle, place)
    error = groups.mismatch(group, ready)
    if error is not None:
        for pod in ready:
            cycle.pending(pod, SCHEDULER_ERROR, error, "gang", error)
        groups.condition(cycle, group, "False", SCHEDULER_ERROR, error)
        return
    view = groups.view
    running = running_members(view, key)
    min_count = group.min_count
    need = min_count - running if min_count is not None else 0  # basic: binding takes precedence
    domains = groups.domains(group)
    if isinstance(domains, str):
        reject(cycle, groups, group, ready, Trial(None), need, f"no placement for the pod group: {domains}")
        return
    sp = cycle.savepoint()
    best, trials = choose(cycle, groups, group, ready, place, domains, need)
    if best is not None:
        cycle.release(sp)
        accept(cycle, groups, group, ready, best, running)
        return
    cycle.rollback(sp)
    if groups.preemption and preempts(group) and preempt(
            cycle, groups.view, group, ready, partial(_placement, groups=groups, group=group, pods=ready, place=place,
                                                      domains=domains, need=need),
            lambda message: groups.condition(cycle, group, "False", "Unschedulable", message)):
        return
    if domains == [None]:
        reject(cycle, groups, group, ready, trials[0], need, None)
        return
    closest = max(trials, key=lambda t: len(t.placed))
    # upstream (schedule_one_podgroup.go podGroupSchedulingPlacementAlgorithm): when no placement is feasible the
    # group's status is "0/<placements> placements are available, first placement status: <why>"
    reject(cycle, groups, group, ready, closest, need,
            f"0/{len(domains)} placements are available, first placement status: "
            f"no {group.topology_key} domain fits the pod group ({len(domains)} tried; at most "
            f"{len(closest.placed)} of {need} pods fit, in {closest.domain})")


def choose(cycle: Cycle, groups: PodGroupCycle, group: PodGroupState, pods: list[PodState], place: Place,
            domains: list[str | None], need: int) -> tuple[Trial | None, list[Trial]]:
    """Run the group algorithm in each placement and leave the best feasible one applied in the cycle
    (bound); (None, the trials) when none is feasible, with nothing applied."""
    if len(domains) == 1:
        sp = cycle.savepoint()
        trial = groups.trial(cycle, group, pods, place, domains[0], need)
        if _feasible(trial, need):
            cycle.release(sp)
            return trial, [trial]
        cycle.rollback(sp)
        return None, [trial]
    # Topology: every domain is a placement; run the algorithm in each (once per signature: domains alike give
    # the same answer), keep the best feasible one.
    key = str(group.topology_key)
    trials: list[Trial] = []
    alike: dict[tuple[Any, ...], list[str]] = {}
    for domain, sig in groups.signatures(cycle, key, [str(d) for d in domains], pods).items():
        alike.setdefault(sig, []).append(domain)
    for members in alike.values():
        sp = cycle.savepoint()
        trial = groups.trial(cycle, group, pods, place, members[0], need)
        cycle.rollback(sp)
        trial.alike = members
        trials.append(trial)
    feasible = [t for t in trials if _feasible(t, need)]
    if not feasible:
        return None, trials
    top = max((len(t.placed), -t.leftover) for t in feasible)
    best_ones = [(t, d) for t in feasible if (len(t.placed), -t.leftover) == top for d in t.alike]
    best, domain = best_ones[0] if len(best_ones) == 1 else cycle.rng.choice(best_ones)
    if domain == best.domain:
        for p in best.placed:  # the chosen placement again, as it was found (same order, same state)
            p.rebind() if p.rebind is not None else cycle.bind(p.pod, p.node, p.claims, p.allocations)
        return best, trials
    again = groups.trial(cycle, group, pods, place, domain, need)  # a domain like the one tried: the same answer
    return again, trials


def _placement(cycle: Cycle, groups: PodGroupCycle, group: PodGroupState, pods: list[PodState], place: Place,
               domains: list[str | None], need: int) -> tuple[dict[str, str], set[tuple[str, str, str]]] | None:
    """The group algorithm's best placement on the cycle as it is (preemption's what-if): pod -> node, and the
    devices it took; None when the group does not fit."""
    best, _ = choose(cycle, groups, group, pods, place, domains, need)
    if best is None:
        return None
    return ({p.pod.key: p.node for p in best.placed},
            {d for p in best.placed for a in p.allocations.values() for d in devices(a)})


SCHEDULER_ERROR = "SchedulerError"


def _feasible(trial: Trial, need: int) -> bool:
    return not trial.aborted and len(trial.placed) >= max(need, 1)


def accept(cycle: Cycle, groups: PodGroupCycle, group: PodGroupState, pods: list[PodState], trial: Trial,
            running: int) -> None:
    """The placed pods are bound; the others go back to the queue with their own failure."""
    for pod in pods:
        failure = trial.failures.get(pod.key)
        if failure is not None:
            cycle.pending(pod, "Unschedulable", failure.message, failure.cause, failure.detail)
    where = f" in {group.topology_key}={trial.domain}" if trial.domain is not None else ""
    groups.condition(cycle, group, "True", "Scheduled",
                     f"{len(trial.placed) + running} pods of the group scheduled{where}")


def reject(cycle: Cycle, groups: PodGroupCycle, group: PodGroupState, pods: list[PodState], trial: Trial,
            need: int, why: str | None) -> None:
    """Nothing binds: every pod of the group is unschedulable with the group's reason (its own, if it did not
    fit either)."""
    name = group.key.split("/", 1)[1]
    if why is None:
        if group.min_count is None:
            why = "no pod of the pod group fits"
        else:
            why = f"only {len(trial.placed)} of the {need} pods the pod group still needs (minCount " \
                  f"{group.min_count}) fit"
    message = f'pod group "{name}" is unschedulable: {why}'
    first = next(iter(trial.failures.values()), None)
    for pod in pods:
        own = trial.failures.get(pod.key)
        if own is not None and own.cause != "gang":
            cycle.pending(pod, "Unschedulable", f"{own.message}; {message}", own.cause, own.detail or why)
        else:  # it fit, but the group did not: the group's reason, with the cause of what blocked it
            cause = first.cause if first is not None and first.cause != "gang" else "gang"
            cycle.pending(pod, "Unschedulable", message, cause, why)
    # a failed group cycle clears every nominatedNodeName an earlier attempt set (KEP-4671 "Failure Handling")
    cycle.events.extend(PodNominated(pod=pod.key) for pod in pods if pod.key in groups.view.gang.nominated)
    groups.condition(cycle, group, "False", "Unschedulable", message)
