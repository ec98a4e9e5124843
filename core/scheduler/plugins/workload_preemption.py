"""Workload-aware preemption (KEP-5710): when a PodGroup's cycle fails, evict lower-priority pods and groups
so that the group fits, whole groups as one victim when their `disruptionMode` is `all`.

kube-scheduler 1.37 (GenericWorkload, which absorbed the WorkloadAwarePreemption gate; 1.36 behind that gate)
disables per-pod PostFilter in the group cycle and runs one PodGroupPostFilter after the group failed:

1. The preemptor's priority is the PodGroup's (`spec.priority`, resolved from `priorityClassName` at
   admission; dralab: the pods' when the group has none). `preemptionPolicy: Never` means no preemption.
2. Candidate victims: running pods of lower priority, in units: a pod, or every running pod of a PodGroup
   whose `disruptionMode` is `all` (the unit's priority is its group's).
3. With every candidate removed, the group algorithm must place the group (minCount), else preemption cannot
   help and the group fails as before.
4. Reprieve: with the group placed, victims are put back from the most important (higher priority first; at
   equal priority groups before single pods, then the older first) as long as they still fit where they run;
   a unit comes back whole or not at all. What is left is evicted.
5. The victims are deleted gracefully (`PodTerminating`: deletionTimestamp, DisruptionTarget, their own
   terminationGracePeriodSeconds, core/state/termination.py; they hold their node until then), victim PodGroups
   get `DisruptionTarget` True with reason `PreemptionByScheduler`; the preemptor's pods are nominated where
   they will go and wait (Unschedulable, cause `preemption`), tried again once the victims are gone.

Not modelled: PodDisruptionBudgets here (DefaultPreemption reads them: default_preemption.py), and the scoring
of several candidate victim sets: dralab takes the one reprieve leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...log.events import AnyEvent, PodGroupConditionSet, PodNominated, PodTerminating
from ...state.cluster import RUNNING, ClusterState, PodState
from ...state.gangs import PodGroupState
from ...state.termination import grace_ms
from ..framework import ExtensionPoint
from .node_resources_fit import lacking

if TYPE_CHECKING:
    from ..cycle import Cycle

NAME = "WorkloadAwarePreemption"
# 1.37's PodGroupPostFilter point, run once after a group cycle failed (upstream's PostFilter for groups)
EXTENSION_POINTS = (ExtensionPoint.POST_FILTER,)
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass
class Victim:
    """A unit of eviction: one pod, or a whole PodGroup with disruptionMode `all`."""

    pods: list[PodState]
    priority: int
    group: str | None  # "ns/name" of the PodGroup the pods belong to (for its DisruptionTarget)
    whole: bool  # the unit is the group (disruptionMode all)
    allocations: list[dict[str, Any]]  # claims only this unit uses, freed with it


def group_priority(group: PodGroupState, pods: list[PodState]) -> int:
    priority = group.priority
    return priority if priority is not None else max((p.priority for p in pods), default=0)


def preempts(group: PodGroupState) -> bool:
    return bool(group.spec.get("preemptionPolicy", "PreemptLowerPriority") != "Never")


def ongoing_preemption(view: ClusterState, pods: list[PodState], priority: int) -> str | None:
    """A preemption already under way for the group (podgrouppreemption.go preemptorEligibleToPreemptOthers):
    a pod of lower (effective: its PodGroup's) priority terminating by preemption (deletionTimestamp and
    DisruptionTarget) on a node one of the group's pods is nominated to (`status.nominatedNodeName`, as a dump
    shows it, or dralab's own graceful deletion). The pod's key, or None."""
    nominated = {str(n) for p in pods if (n := (p.manifest.get("status") or {}).get("nominatedNodeName"))}
    if not nominated:
        return None
    for key in view.pods_by_phase[RUNNING]:
        pod = view.pods[key]
        if pod.node not in nominated or not _terminating_by_preemption(pod.manifest):
            continue
        group = view.gang.podgroups.get(view.gang.group_of.get(key, ""))
        effective = group.priority if group is not None and group.priority is not None else pod.priority
        if effective < priority:
            return key
    return None


def _terminating_by_preemption(manifest: dict[str, Any]) -> bool:
    if not (manifest.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"
               for c in (manifest.get("status") or {}).get("conditions") or [])


def candidates(view: ClusterState, priority: int, own_group: str) -> list[Victim]:
    """Running pods of lower priority, as eviction units, least important first."""
    running = view.pods_by_phase[RUNNING]
    units: dict[str, Victim] = {}
    singles: list[Victim] = []
    for key in running:
        pod = view.pods[key]
        if pod.node is None:
            continue
        group_key = view.gang.group_of.get(key)
        if group_key == own_group:
            continue
        group = view.gang.podgroups.get(group_key) if group_key is not None else None
        whole = group is not None and "all" in (group.spec.get("disruptionMode") or {})
        if group is not None and whole:
            unit = units.get(group.key)
            if unit is None:
                unit = units[group.key] = Victim([], 0, group.key, True, [])
            unit.pods.append(pod)
            continue
        pod_priority = group.priority if group is not None and group.priority is not None else pod.priority
        if pod_priority < priority:
            singles.append(Victim([pod], pod_priority, group_key, False, []))
    for unit in units.values():
        group = view.gang.podgroups[str(unit.group)]
        unit.priority = group_priority(group, unit.pods)
    victims = [u for u in units.values() if u.priority < priority] + singles
    for victim in victims:
        victim.allocations = _own_allocations(view, victim)
    # Least important first, the reverse of upstream's moreImportantVictim (podgrouppreemption.go): lower
    # priority; at equal priority a pod outside any PodGroup before a PodGroup unit (upstream's
    # victim.IsPodGroup: the pod names a scheduling group, whatever its disruptionMode); single pods by start
    # time, the latest first; PodGroup units by size, the smaller first, then by their earliest start, the
    # latest first. Start is the binding time; pods bound in one record (a dump, ordered by status.startTime)
    # keep their order in the fold.
    order = {key: i for i, key in enumerate(view.pods)} if len(victims) > 1 else {}

    def earliest(v: Victim) -> tuple[int, int, int]:
        return min((p.bound_t, p.created_offset, order.get(p.key, 0)) for p in v.pods)

    def rank(v: Victim) -> tuple[int, ...]:
        start = earliest(v)
        grouped = v.group is not None
        return (v.priority, grouped, len(v.pods) if grouped else 0, -start[0], -start[1], -start[2])

    victims.sort(key=rank)
    return victims


def _own_allocations(view: ClusterState, victim: Victim) -> list[dict[str, Any]]:
    """The allocations of the claims no one but the victim's pods (or its group) uses."""
    consumers = {p.key for p in victim.pods}
    if victim.whole and victim.group is not None:
        consumers.add(f"podgroup/{victim.group}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for owner in sorted(consumers):
        for key in view.dra.pod_claims.get(owner, {}).values():
            state = view.dra.claims.get(key)
            if key in seen or state is None or state.allocation is None or not state.reserved_for:
                continue
            if set(state.reserved_for) <= consumers:
                seen.add(key)
                out.append(state.allocation)
    return out


def devices(allocation: dict[str, Any]) -> set[tuple[str, str, str]]:
    results = (allocation.get("devices") or {}).get("results") or []
    return {(str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) for r in results}


def reprieve(cycle: Cycle, victims: list[Victim], taken: set[tuple[str, str, str]]) -> list[Victim]:
    """Put back the victims that still fit, most important first, each unit whole; return the evicted ones."""
    evicted: list[Victim] = []
    for victim in reversed(victims):  # most important first
        fits = not any(devices(a) & taken for a in victim.allocations)
        usage: dict[str, dict[str, int]] = {}
        for pod in victim.pods:
            node = str(pod.node)
            used = usage.setdefault(node, dict(cycle.used[node]))
            if lacking(sorted(pod.requests.items()), used, cycle.view.nodes[node].allocatable):
                fits = False
                break
            for resource, amount in pod.requests.items():
                used[resource] = used.get(resource, 0) + amount
            used["pods"] = used.get("pods", 0) + 1
        if fits:
            for i, pod in enumerate(victim.pods):
                cycle.restore(pod, victim.allocations if i == 0 else [])
        else:
            evicted.append(victim)
    return evicted


def evict(cycle: Cycle, victims: list[Victim], preemptor: str) -> None:
    """The eviction events: each pod (DisruptionTarget), and each victim PodGroup's DisruptionTarget."""
    events: list[AnyEvent] = []
    groups: dict[str, None] = {}
    for victim in victims:
        for pod in victim.pods:  # deleted with the pod's own grace period (core/state/termination.py; a pod
            # already terminating keeps its deadline)
            events.append(PodTerminating(pod=pod.key, node=str(pod.node), grace_ms=grace_ms(pod.manifest),
                                         reason=f"preemption: by pod group {preemptor} ({NAME})"))
        if victim.group is not None:
            groups[victim.group] = None
    for group in groups:
        events.append(PodGroupConditionSet(group=group, condition=DISRUPTION_TARGET, status="True",
                                           reason=PREEMPTION_BY_SCHEDULER,
                                           message=f"preempted to make room for pod group {preemptor}"))
    cycle.events.extend(events)


# The group algorithm with some pods taken off: (the cycle) -> pods placed, devices they took, or None.
Attempt = Callable[["Cycle"], "tuple[int, set[tuple[str, str, str]]] | None"]


def plan(cycle: Cycle, victims: list[Victim], attempt: Attempt) -> list[Victim] | None:
    """Remove every candidate, place the group, reprieve; the victims to evict, or None if even removing all
    of them does not let the group fit. Everything is rolled back: only the answer is kept."""
    if not victims:
        return None
    sp = cycle.savepoint()
    try:
        for victim in victims:
            for i, pod in enumerate(victim.pods):
                cycle.remove(pod, victim.allocations if i == 0 else [])
        placed = attempt(cycle)
        if placed is None:
            return None
        return reprieve(cycle, victims, placed[1])
    finally:
        cycle.rollback(sp)


# The group algorithm on the cycle as it is: (pod -> node, devices taken) of its best placement, or None.
Placement = Callable[["Cycle"], "tuple[dict[str, str], set[tuple[str, str, str]]] | None"]


def preempt(cycle: Cycle, view: ClusterState, group: PodGroupState, pods: list[PodState], placement: Placement,
            mark: Callable[[str], None]) -> bool:
    """PodGroupPostFilter: evict what the group needs and nominate its pods where they will go; False when no
    set of lower-priority victims makes room. `mark` writes the group's Unschedulable condition."""
    name = group.key.split("/", 1)[1]
    priority = group_priority(group, pods)
    ongoing = ongoing_preemption(view, pods, priority)
    if ongoing is not None:  # upstream: no new victim search while the last one's victims terminate
        message = f'pod group "{name}" is waiting for preemption victims to terminate on its nominated nodes'
        for pod in pods:
            cycle.pending(pod, "Unschedulable", message, "preemption", ongoing)
        mark(message)
        return True
    where: dict[str, str] = {}  # the placement found with the victims gone: pod -> node

    def attempt(c: Cycle) -> tuple[int, set[tuple[str, str, str]]] | None:
        found = placement(c)
        if found is None:
            return None
        where.clear()
        where.update(found[0])
        return len(found[0]), found[1]

    evicted = plan(cycle, candidates(view, priority, group.key), attempt)
    if not evicted:
        return False
    evict(cycle, evicted, group.key)
    # status.nominatedNodeName: the room stays theirs while the victims go (KEP-5710, KEP-5278)
    cycle.events.extend(PodNominated(pod=key, node=node) for key, node in where.items()
                        if view.gang.nominated.get(key) != node)
    count = sum(len(v.pods) for v in evicted)
    message = f'pod group "{name}" is waiting for {count} preemption victims to terminate'
    detail = ", ".join(p.key for v in evicted for p in v.pods)
    for pod in pods:
        cycle.pending(pod, "Unschedulable", message, "preemption", detail)
    mark(message)
    return True

