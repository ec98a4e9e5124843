"""Gangs in `dralab audit` and `dralab schedule`: Workload pod groups with a `gang` policy (KEP-4671).

kube-scheduler 1.35 with the GangScheduling feature (pkg/scheduler/framework/plugins/gangscheduling)
holds a gang's pods in two places, and the audit reports both:

- PreEnqueue: a pod does not even enter the active queue until ``minCount`` pods of its group exist
  (not Succeeded/Failed, bound or not) -> reason ``gang``, "waiting for minCount pods from a gang to
  appear in scheduling queue" (upstream's message), and no node is tried;
- Permit: a pod that passed the filters waits (reserved, not bound) until ``minCount`` pods of the group
  are bound or waiting; at the group's deadline all waiting pods are rejected and their reservations
  undone. So either at least ``minCount`` bind, or none of those waiting does.

A pod whose Workload (or pod group in it) does not exist is ``missing``: it names the object, like a
missing ResourceClaim. The ``basic`` policy is no gang: its pods are judged one by one. A gang whose bound
pods already reach ``minCount`` lets the others through Permit at once: they are judged as ordinary pods.

What dralab models of the rest (upstream does it over several scheduling cycles; dralab in one pass):
`schedule` places a gang's pending pods when the first of them reaches the head of the queue, one by one
in queue order, each with the normal filters and score (tentatively, on a checkpointed snapshot), and
keeps them only if ``bound + placed >= minCount``; otherwise it rolls all of them back (no pod of the
group binds) and reports them pending. `audit` makes the same trial in a scratch state (rolled back, so
other pods' verdicts do not see it): a member that fits on its own keeps reason None when the group can be
placed, and gets ``gang`` when it cannot.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .snapshot import is_pending, pod_key
from .workloads import GangRef, gang_ref, group_policy, min_count

if TYPE_CHECKING:
    from .audit import Placer, PodVerdict
    from .dra.model import Inventory

__all__ = ["Gang", "GangIndex", "audit_gang", "schedule_gang"]

_DONE = ("Succeeded", "Failed")


@dataclass
class Gang:
    """A pod group (one replica) with a gang policy that is not satisfied yet but has enough members."""

    ref: GangRef
    min_count: int
    members: int  # pods of the group not Succeeded/Failed, bound or not
    bound: int
    pending: list[dict[str, Any]]  # in queue order

    @property
    def need(self) -> int:
        """How many pending pods must be placed at once to reach ``minCount``."""
        return self.min_count - self.bound


class GangIndex:
    """The pending pods that gangs concern: ``blocked`` (pod key -> verdict: Workload or pod group
    missing, or fewer members than ``minCount``) and ``groups`` (pod key -> its unsatisfied Gang). Pods in
    neither (no workloadRef, basic policy, gang already satisfied) are judged as usual."""

    def __init__(self, inv: Inventory) -> None:
        from .audit import queue_order

        self.blocked: dict[str, PodVerdict] = {}
        self.groups: dict[str, Gang] = {}
        members: dict[str, tuple[GangRef, list[dict[str, Any]]]] = {}
        for pod in inv.pods.values():
            ref = gang_ref(pod)
            if ref is not None and (pod.get("status") or {}).get("phase") not in _DONE:
                members.setdefault(ref.key, (ref, []))[1].append(pod)
        for key, (ref, pods) in sorted(members.items()):
            pending = queue_order(p for p in pods if is_pending(p))
            if not pending:
                continue
            workload = inv.workloads.get(ref.workload_key)
            policy = None if workload is None else group_policy(workload, ref.pod_group)
            if policy is None:
                what = (f"Workload {ref.workload_key}" if workload is None
                        else f"pod group {ref.pod_group} in Workload {ref.workload_key}")
                self._block(pending, "missing", f"{what} not found", what)
                continue
            needed = min_count(policy)
            if needed is None:  # basic: pods are scheduled one by one
                continue
            if len(pods) < needed:
                self._block(pending, "gang", f"waiting for minCount pods from a gang to appear in scheduling "
                                             f"queue: {len(pods)} of minCount {needed} pods of gang {key} exist",
                            f"{needed - len(pods)} more pod(s) of gang {key}")
                continue
            bound = len(pods) - len(pending)
            if bound >= needed:  # the gang runs: Permit lets the others through
                continue
            gang = Gang(ref, needed, len(pods), bound, pending)
            for pod in pending:
                self.groups[pod_key(pod)] = gang

    def _block(self, pods: list[dict[str, Any]], reason: str, message: str, missing: str) -> None:
        from .audit import PodVerdict

        for pod in pods:
            meta = pod.get("metadata") or {}
            self.blocked[pod_key(pod)] = PodVerdict(meta.get("namespace") or "default", str(meta.get("name")),
                                                    None, reason, message, {"node": None, "missing": [missing]})

    def distinct(self) -> list[Gang]:
        """Every unsatisfied gang once, by key."""
        return sorted({g.ref.key: g for g in self.groups.values()}.values(), key=lambda g: g.ref.key)


def gang_verdict(verdict: PodVerdict, gang: Gang, placed: int, node: str | None) -> PodVerdict:
    """The verdict of a member that fits on its own (on ``node``) while its gang does not fit."""
    key = gang.ref.key
    return dataclasses.replace(
        verdict, reason="gang", summary="",
        message=f"room for {placed} of the {gang.need} pods gang {key} needs (minCount {gang.min_count}, "
                f"{gang.bound} bound)",
        closest={"node": node, "missing": [f"gang {key}: {placed} of {gang.need} pods fit at once"]})


def _try(placer: Placer, gang: Gang) -> tuple[list[dict[str, Any]], dict[str, PodVerdict]]:
    """Place the gang's pending pods one by one in queue order (on the current snapshot): the bindings
    made and the verdicts of the pods that did not fit."""
    placed: list[dict[str, Any]] = []
    left: dict[str, PodVerdict] = {}
    for pod in gang.pending:
        verdict = placer.evaluate(pod)
        if verdict.reason is None:
            placed.append(placer.bind(pod, verdict))
        else:
            left[pod_key(pod)] = verdict
    return placed, left


def schedule_gang(placer: Placer, gang: Gang) -> tuple[list[dict[str, Any]], list[PodVerdict]]:
    """Place a gang all-or-nothing: the bindings (all the members that fit, or none) and the verdicts of
    the members left pending, in queue order."""
    snap = placer.snap
    cp = snap.checkpoint()
    placed, left = _try(placer, gang)
    if len(placed) >= gang.need:
        snap.release(cp)
        return placed, [left[pod_key(p)] for p in gang.pending if pod_key(p) in left]
    snap.rollback(cp)  # Permit timed out: every reservation of the group is undone
    nodes = {f"{b['namespace']}/{b['name']}": b["node"] for b in placed}
    out = []
    for pod in gang.pending:
        verdict = placer.evaluate(pod)  # on its own, as the cluster is without the gang
        if verdict.reason is None:
            verdict = gang_verdict(verdict, gang, len(placed), nodes.get(pod_key(pod)) or placer.choose(pod, verdict))
        out.append(verdict)
    return [], out


def audit_gang(placer: Placer, gang: Gang, verdicts: dict[str, PodVerdict]) -> None:
    """Replace the verdicts of a gang's members that fit on their own by ``gang`` when the group cannot be
    placed at once (tried in a scratch state: the snapshot is rolled back)."""
    snap = placer.snap
    cp = snap.checkpoint()
    try:
        placed, _ = _try(placer, gang)
    finally:
        snap.rollback(cp)
    if len(placed) >= gang.need:
        return
    nodes = {f"{b['namespace']}/{b['name']}": b["node"] for b in placed}
    for pod in gang.pending:
        key = pod_key(pod)
        if verdicts[key].reason is not None:  # does not fit on its own: its own reason says why
            continue
        node = nodes.get(key)
        if node is None:
            alone = placer.evaluate(pod)
            node = placer.choose(pod, alone) if alone.reason is None else (verdicts[key].closest or {}).get("node")
        verdicts[key] = gang_verdict(verdicts[key], gang, len(placed), node)
