"""Why pods are pending, from a cluster dump: `dralab audit` and `dralab schedule`.

:func:`audit` tries every pending pod on every node (see :mod:`dralab.core.analysis.audit_snapshot` for the filters),
classifies why it does not fit from the node that came closest (fewest failing filters, then most DRA
progress, then name), and counts devices: total, allocated, free and stranded (free, but no pending pod
can use them). :func:`schedule` runs one greedy scheduling pass over the same snapshot in queue order.

Reasons: ``capacity`` (no node has enough free matching devices), ``topology`` (a node has them but a
constraint cannot be met), ``fragmentation`` (enough free matching devices across the nodes the pod may
use, but not on one node), ``resources`` (cpu/memory/pods/extended resources), ``taint``, ``selector``,
``not-ready`` (node not Ready or cordoned, or its devices not fully published), ``missing`` (a referenced
claim, template, class, Workload, pod group or PodGroup does not exist), ``gang`` (a KEP-4671 Workload
gang or a scheduler-plugins PodGroup: fewer than ``minCount``/``minMember`` pods of its gang exist, a
PodGroup's ``minResources`` are not free, or no room for ``minCount`` of them at once; see
:mod:`dralab.core.analysis.audit_gang`), ``gated`` (the pod has scheduling gates, e.g. Kueue's
``kueue.x-k8s.io/admission``: the scheduler does not try it, and cluster-autoscaler does not scale up for
it, until they are removed), ``preemption`` (the pod's 1.36+ PodGroup waits for its preemption victims to go, or
the pod, nominated to a node, waits for its own), ``device-taint`` (the devices it could use carry taints its claims
do not tolerate), and, from the dump's own evidence (:mod:`dralab.core.analysis.audit_causes`):
``binding-conditions``, ``spread``, ``affinity``. The report's ``not_modelled`` lists the fields the dump uses that
change scheduling and that dralab does not model (their constraints were not checked).
A pending pod that fits somewhere has reason None.

1.36/1.37 PodGroups (pods with ``spec.schedulingGroup``) are placed as the scheduler's PodGroup cycle places
them (:mod:`dralab.core.analysis.audit_podgroups`): each member's verdict gets ``pod_group``, and the report a
``pod_groups`` list saying, per group, what is in the way (the words of core/analysis/podgroups.py), with the
evidence and the PodGroup's own conditions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..dra.model import Inventory
from ..kube.unmodelled import unmodelled_uses
from .audit_causes import refine
from .audit_gang import GangIndex, audit_gang, schedule_gang
from .audit_podgroups import Group, GroupIndex, Outcome, conditions
from .audit_pods import Placer, PodVerdict, device_totals, evaluate, gated, pod_names, queue_order
from .audit_shape import Shape
from .audit_snapshot import Snapshot, is_pending, pod_key
from .autoscaler_status import dump_events

__all__ = ["Placer", "PodVerdict", "audit", "evaluate", "queue_order", "schedule"]


def audit(inv: Inventory, version: str | None = None, *, view: dict[str, Any] | None = None) -> dict[str, Any]:
    """``version``: the dump's release (1.37 checks that a PodGroup's pods have its priority). ``view``, when
    given, receives the snapshot (as the dump left it: every scratch placement is rolled back) and the verdicts
    the report was made of, for the picture of `dralab audit -o html` (core/analysis/audit_picture.py)."""
    snap = Snapshot(inv)
    gangs = GangIndex(inv)
    groups = GroupIndex(inv, snap, version)  # before any pod is judged: group claims are shared
    verdicts: dict[str, PodVerdict] = {}
    memo: dict[tuple[str, str], Shape] = {}
    for key, pod in inv.pods.items():
        if is_pending(pod):
            verdicts[key] = refine(pod, gated(pod) or gangs.held(snap, pod)
                                   or evaluate(snap, groups.member(pod), memo, share_nodes=True))
        else:
            ns, name = pod_names(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            verdicts[key] = PodVerdict(ns, name, node, None, "", {"node": node, "missing": []})
    if gangs.groups:  # after every other pod: each gang is tried in a scratch state, then rolled back
        placer = Placer(snap)
        for gang in gangs.distinct():
            if gangs.held(snap, gang.pending[0]) is None:  # held: every member already says why
                audit_gang(placer, gang, verdicts)
    rows = _audit_groups(groups, Placer(snap), verdicts) if groups.groups else None
    ordered = sorted(verdicts.values(), key=lambda v: (v.namespace, v.name))
    pods = [v.to_json() for v in ordered]
    said = dump_events(inv.other)  # cluster-autoscaler's Events on the dump's pods (autoscaler_status.py)
    for row in pods:
        if (hit := said.get((row["namespace"], row["name"]))) is not None and row["node"] is None:
            row["autoscaler"] = hit
    out = {"pods": pods, "devices": device_totals(snap, ordered)}
    if rows is not None:
        out["pod_groups"] = rows
    unmodelled = not_modelled(inv)
    if unmodelled:
        out["not_modelled"] = unmodelled
    if view is not None:
        view.update(snap=snap, verdicts=verdicts)
    return out


def not_modelled(inv: Inventory) -> list[dict[str, Any]]:
    """The fields of the dump's pods and nodes that change scheduling and that dralab does not model: a dump is a
    real cluster, so they are reported (what the audit could not check), where a scenario would be refused
    (core/kube/unmodelled.py)."""
    return (unmodelled_uses("Pod", list(inv.pods.values()))
            + unmodelled_uses("Node", [n.manifest for n in inv.nodes.values()]))


def _place_unit(groups: GroupIndex, placer: Placer, key: str) -> list[Outcome]:
    """Place the group ``key`` (or, when it is in a CompositePodGroup, the root composite's whole tree): the
    outcome of every pending PodGroup placed, applied to the snapshot when it fits."""
    group = groups.groups[key]
    root = groups.root(group)
    if root is not None:
        return groups.place_composite(placer, root)[1]
    return [groups.held(group) or groups.place(placer, group)]


def _audit_groups(groups: GroupIndex, placer: Placer, verdicts: dict[str, PodVerdict]) -> list[dict[str, Any]]:
    """Try each PodGroup (or composite tree) in a scratch state, rolled back; set its members' verdicts and
    return the `pod_groups` rows."""
    snap = placer.snap
    outcomes: dict[str, Outcome] = {}
    for key, group in groups.groups.items():
        if not group.pending or key in outcomes:
            continue
        cp = snap.checkpoint()
        try:
            for outcome in _place_unit(groups, placer, key):
                outcomes[outcome.group] = outcome
        finally:
            snap.rollback(cp)
    rows = []
    for key, group in groups.groups.items():
        found = outcomes.get(key)
        if found is not None:
            for pod in group.pending:
                pk = pod_key(pod)
                verdicts[pk] = member_verdict(verdicts[pk], found)
        rows.append(group_row(group, found))
    return rows


def schedule(inv: Inventory, version: str | None = None) -> dict[str, Any]:
    """One greedy pass in queue order. A gang (KEP-4671 Workload or scheduler-plugins PodGroup) is placed
    when its first pending pod's turn comes, all-or-nothing (see :mod:`dralab.core.analysis.audit_gang`);
    so is a 1.36+ PodGroup (or the root CompositePodGroup above it), as the PodGroup cycle places it."""
    snap = Snapshot(inv)
    placer = Placer(snap)
    gangs = GangIndex(inv)
    groups = GroupIndex(inv, snap, version)
    outcomes: dict[str, Outcome] = {}
    bindings: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    done: set[str] = set()  # pods of gangs already tried
    for pod in queue_order(p for p in inv.pods.values() if is_pending(p)):
        key = pod_key(pod)
        if key in done:
            continue
        if (held_back := gated(pod)) is not None:
            pending.append(held_back.to_json())
            continue
        if key in groups.of_pod:
            for outcome in _place_unit(groups, placer, groups.of_pod[key].key):
                outcomes[outcome.group] = outcome
                bindings += outcome.bindings
                taken = {f"{b['namespace']}/{b['name']}" for b in outcome.bindings}
                for member in groups.groups[outcome.group].pending:
                    done.add(pod_key(member))
                    if pod_key(member) not in taken:
                        alone = gated(member) or placer.evaluate(groups.member(member))
                        pending.append(member_verdict(alone, outcome).to_json())
            continue
        gang = gangs.groups.get(key)
        held = gangs.held(snap, pod)  # a PodGroup's minResources: on the snapshot as this pass left it
        if held is not None and gang is None:
            pending.append(held.to_json())
            continue
        if held is not None and gang is not None:  # the check is group-wide: every member is held now
            done.update(pod_key(p) for p in gang.pending)
            pending += [(gangs.held(snap, p) or held).to_json() for p in gang.pending]
            continue
        if gang is not None:
            done.update(pod_key(p) for p in gang.pending)
            placed, waiting = schedule_gang(placer, gang)
            bindings += placed
            pending += [v.to_json() for v in waiting]
            continue
        verdict = refine(pod, placer.evaluate(pod))  # the dump's own evidence (audit_causes.py), as audit does
        if verdict.reason is not None:
            pending.append(verdict.to_json())
            continue
        bindings.append(placer.bind(pod, verdict))
    out: dict[str, Any] = {"bindings": bindings, "pending": pending}
    if groups.groups:
        out["pod_groups"] = [group_row(g, outcomes.get(k)) for k, g in groups.groups.items()]
    return out


def member_verdict(verdict: PodVerdict, outcome: Outcome, placer: Placer | None = None) -> PodVerdict:
    """A pending member's verdict once its group's outcome is known: a member that fits on its own (reason
    None) takes the group's reason; one that does not keeps its own (its reason says why), except that the
    checks before any node is tried (missing, gated, min-count, priority, preemption) hold every member."""
    if outcome.kind is None:
        return dataclasses.replace(verdict, group=outcome.group)
    before = outcome.kind in ("missing", "gated", "priority-mismatch", "min-count", "preemption")
    if verdict.reason is not None and not before:
        return dataclasses.replace(verdict, group=outcome.group)
    if outcome.kind == "gated" and verdict.reason == "gated":
        return dataclasses.replace(verdict, group=outcome.group)
    node = outcome.nodes.get(f"{verdict.namespace}/{verdict.name}") or (verdict.closest or {}).get("node")
    if before:
        node = None
    missing = outcome.missing or [str(outcome.evidence.get("missing") or outcome.why)]
    return dataclasses.replace(verdict, reason=outcome.pod_reason or outcome.kind, message=outcome.why, summary="",
                               closest={"node": node, "missing": missing}, group=outcome.group)


def group_row(group: Group, outcome: Outcome | None) -> dict[str, Any]:
    """The `pod_groups` entry of a group: policy, pods, what is in the way, evidence, its own conditions."""
    bound = len(group.bound)
    row: dict[str, Any] = {
        "name": group.key,
        "policy": group.policy(),
        "pods": {"pending": len(group.pending), "bound": bound},
        "blocked_by": None if outcome is None else outcome.kind,
        "why": "no pending pods" if outcome is None else outcome.why,
        "evidence": {} if outcome is None else outcome.evidence,
        "conditions": conditions(group.obj),
    }
    if group.parent is not None:
        row["composite"] = group.parent
    if outcome is not None and outcome.kind is None:
        row["domain"] = outcome.domain
        row["bindings"] = [f"{b['namespace']}/{b['name']}" for b in outcome.bindings]
    return row
