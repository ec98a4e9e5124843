"""Gangs in `dralab audit` and `dralab schedule`: Workload pod groups with a `gang` policy (KEP-4671), and
scheduler-plugins Coscheduling PodGroups.

Two APIs declare gangs, and both come down to "no pod of the group binds until ``minCount`` of them can":

- a ``scheduling.k8s.io/v1alpha1`` Workload pod group with ``policy.gang.minCount``, joined through the
  pod's ``spec.workloadRef`` (kube-scheduler 1.35, GangScheduling plugin);
- a ``scheduling.x-k8s.io/v1alpha1`` PodGroup with ``spec.minMember``, joined through the pod's label
  ``scheduling.x-k8s.io/pod-group`` (kubernetes-sigs/scheduler-plugins, pkg/coscheduling).

:func:`pod_gang` maps a pod to a :class:`GangId` whichever API it uses (a pod with both a workloadRef and
the label belongs to the Workload's gang: the workloadRef is a validated field of the core API, the label a
convention of an out-of-tree plugin, and a pod is in one gang only), and :func:`gang_policy` gives its
``minCount`` (a PodGroup's ``minMember``). Everything below works on those, whatever the API.

Both schedulers hold a gang's pods in two places, and the audit reports both:

- before any node is tried (GangScheduling's PreEnqueue, Coscheduling's PreFilter): a pod waits until
  ``minCount`` pods of its group exist (not Succeeded/Failed, bound or not) -> reason ``gang`` with the
  plugin's message ("waiting for minCount pods from a gang to appear in scheduling queue" / "pre-filter
  pod P cannot find enough sibling pods, current pods number: N, minMember of group: M"), and no node is
  tried. Coscheduling's PreFilter also refuses the pods of a PodGroup with ``minResources`` while the
  cluster does not have them free (see :class:`ResourceGate`);
- Permit: a pod that passed the filters waits (reserved, not bound) until ``minCount`` pods of the group
  are bound or waiting; at the group's deadline all waiting pods are rejected and their reservations
  undone. So either at least ``minCount`` bind, or none of those waiting does.

A pod whose Workload (or pod group in it) or PodGroup does not exist is ``missing``: it names the object,
like a missing ResourceClaim (Coscheduling's Permit rejects such a pod: "PodGroup not found"). The
``basic`` policy is no gang: its pods are judged one by one. A gang whose bound pods already reach
``minCount`` lets the others through Permit at once: they are judged as ordinary pods.

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..kube.quantity import resource_amount
from ..kube.resources import pod_requests
from ..kube.workloads import POD_GROUP_KIND, WORKLOAD_KIND, gang_ref, group_policy, min_count, pod_group_label
from .audit_pods import Placer, PodVerdict, queue_order
from .audit_snapshot import is_pending, node_ready, pod_key

if TYPE_CHECKING:
    from ..dra.model import Inventory
    from .audit_snapshot import Snapshot

__all__ = ["Gang", "GangId", "GangIndex", "GangPolicy", "ResourceGate", "audit_gang", "gang_policy", "pod_gang",
           "schedule_gang"]

_DONE = ("Succeeded", "Failed")
_DEFAULT_PODS = 110  # a node's allocatable pods when it does not say (as `Snapshot.resource_failures`)


@dataclass(frozen=True)
class GangId:
    """A pod's gang, whichever API declares it (one type, so the gang logic below does not care which)."""

    key: str  # <ns>/<workload>/<podGroup>[/<replicaKey>], or <ns>/<PodGroup>: never equal (3+ parts vs 2)
    kind: str  # WORKLOAD_KIND or POD_GROUP_KIND: the object that declares the gang
    object_key: str  # <ns>/<name> of that object
    pod_group: str = ""  # for a Workload: the pod group in it

    @property
    def count_field(self) -> str:
        """What the API calls the gang's minimum, for messages."""
        return "minMember" if self.kind == POD_GROUP_KIND else "minCount"


def pod_gang(pod: dict[str, Any]) -> GangId | None:
    """The pod's gang: its `spec.workloadRef` if it has one (it wins over the label), else the PodGroup its
    `scheduling.x-k8s.io/pod-group` label names (in the pod's namespace), else None."""
    ref = gang_ref(pod)
    if ref is not None:
        return GangId(ref.key, WORKLOAD_KIND, ref.workload_key, ref.pod_group)
    name = pod_group_label(pod)
    if name is None:
        return None
    key = f"{(pod.get('metadata') or {}).get('namespace') or 'default'}/{name}"
    return GangId(key, POD_GROUP_KIND, key)


@dataclass(frozen=True)
class GangPolicy:
    """What a gang asks: ``min_count`` pods at once (None: no gang, the Workload's `basic` policy), and for a
    PodGroup its ``minResources`` (in `resource_amount` units). ``missing`` names the object (Workload, pod
    group in it, PodGroup) that does not exist; then the rest is meaningless."""

    min_count: int | None = None
    min_resources: dict[str, int] = field(default_factory=dict)
    missing: str = ""


def gang_policy(inv: Inventory, gid: GangId) -> GangPolicy:
    """The policy of the gang ``gid`` as the dump declares it."""
    if gid.kind == POD_GROUP_KIND:
        group = inv.pod_groups.get(gid.object_key)
        if group is None:
            return GangPolicy(missing=f"PodGroup {gid.object_key}")
        spec = group.get("spec") or {}  # checked on input: minMember is an int >= 1
        wanted = {str(name): resource_amount(str(name), q) for name, q in (spec.get("minResources") or {}).items()}
        return GangPolicy(int(spec["minMember"]), wanted)
    workload = inv.workloads.get(gid.object_key)
    policy = None if workload is None else group_policy(workload, gid.pod_group)
    if policy is None:
        return GangPolicy(missing=f"Workload {gid.object_key}" if workload is None
                          else f"pod group {gid.pod_group} in Workload {gid.object_key}")
    return GangPolicy(min_count(policy))


@dataclass
class Gang:
    """A gang (one replica) that is not satisfied yet but has enough members."""

    ref: GangId
    min_count: int
    members: int  # pods of the group not Succeeded/Failed, bound or not
    bound: int
    pending: list[dict[str, Any]]  # in queue order

    @property
    def need(self) -> int:
        """How many pending pods must be placed at once to reach ``minCount``."""
        return self.min_count - self.bound


def _amount(resource: str, amount: int) -> str:
    """An amount in `resource_amount` units written as a quantity (``500m``, ``4``, ``16Gi``)."""
    if resource == "cpu":
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, shift in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
            if amount and amount % (1 << shift) == 0:
                return f"{amount >> shift}{suffix}"
    return str(amount)


@dataclass
class ResourceGate:
    """Coscheduling's minResources check (PreFilter, after the minMember one): the PodGroup's
    ``minResources``, plus ``minMember`` pods, must be free in the cluster before any of its pods is tried.

    Free: over the Ready nodes, allocatable minus the requests of the pods bound there (as the snapshot is
    when asked: in `schedule`, after the bindings made so far), where the group's own bound pods count as
    free (upstream removes them from each node before the sum). Upstream sums over every node of its
    snapshot; dralab leaves out the nodes that are not Ready, which no pod can use. It is a pre-check only,
    as upstream's: a group that passes may still not fit (per-node filters, DRA), which the gang's trial
    placement then reports."""

    gang: GangId
    wanted: dict[str, int]  # minResources and pods: minMember
    own: list[tuple[str, dict[str, int]]]  # (node, requests) of the group's bound pods
    _memo: tuple[int, list[tuple[str, int, int]]] | None = field(default=None, init=False, repr=False)  # (version, gap)

    def gap(self, snap: Snapshot) -> list[tuple[str, int, int]]:
        """The (resource, wanted, free) that are short on ``snap``; empty when the group may go on. One
        `GangIndex` serves one snapshot, so its version tells when to count again."""
        if self._memo is not None and self._memo[0] == snap.version:
            return self._memo[1]
        ready = {name for name, node in snap.nodes.items() if node_ready(node)}
        free = dict.fromkeys(self.wanted, 0)
        for name in ready:
            alloc, used = snap.allocatable[name], snap.used[name]
            for res in self.wanted:
                total = alloc.get(res, _DEFAULT_PODS if res == "pods" else 0)
                free[res] += total - used.get(res, 0)
        for node, requests in self.own:
            if node in ready:
                for res in self.wanted:
                    free[res] += 1 if res == "pods" else requests.get(res, 0)
        out = [(res, want, free[res]) for res, want in sorted(self.wanted.items()) if free[res] < want]
        self._memo = (snap.version, out)
        return out

    def message(self, gap: list[tuple[str, int, int]]) -> tuple[str, list[str]]:
        """The verdict's message and ``closest.missing`` for a non-empty ``gap``."""
        shown = "; ".join(f"{res}: {_amount(res, want)} wanted, {_amount(res, free)} free" for res, want, free in gap)
        return (f"minResources of PodGroup {self.gang.object_key} are not free on the Ready nodes (resource gap): "
                f"{shown}", [f"{_amount(res, want - free)} more {res} free for PodGroup {self.gang.object_key}"
                             for res, want, free in gap])


class GangIndex:
    """The pending pods that gangs concern: ``blocked`` (pod key -> verdict: Workload, pod group or PodGroup
    missing, or fewer members than ``minCount``), ``groups`` (pod key -> its unsatisfied Gang) and the
    PodGroups' minResources gates (see `held`). Pods in none (no gang, basic policy, gang already satisfied,
    no minResources) are judged as usual."""

    def __init__(self, inv: Inventory) -> None:
        self.blocked: dict[str, PodVerdict] = {}
        self.groups: dict[str, Gang] = {}
        self._gates: dict[str, ResourceGate] = {}  # pod key -> its PodGroup's minResources check
        members: dict[str, tuple[GangId, list[dict[str, Any]]]] = {}
        for pod in inv.pods.values():
            gid = pod_gang(pod)
            if gid is not None and (pod.get("status") or {}).get("phase") not in _DONE:
                members.setdefault(gid.key, (gid, []))[1].append(pod)
        for key, (gid, pods) in sorted(members.items()):
            pending = queue_order(p for p in pods if is_pending(p))
            if not pending:
                continue
            policy = gang_policy(inv, gid)
            if policy.missing:
                for pod in pending:
                    self._block(pod, "missing", f"{policy.missing} not found", policy.missing)
                continue
            needed = policy.min_count
            if needed is None:  # basic: pods are scheduled one by one
                continue
            if len(pods) < needed:
                for pod in pending:
                    self._block(pod, "gang", _too_few(gid, pod, len(pods), needed),
                                f"{needed - len(pods)} more pod(s) of gang {key}")
                continue
            if policy.min_resources:  # upstream adds the group's pods to what must be free
                own = [(str((p.get("spec") or {}).get("nodeName")), pod_requests(p)) for p in pods if not is_pending(p)]
                gate = ResourceGate(gid, {**policy.min_resources, "pods": needed}, own)
                for pod in pending:
                    self._gates[pod_key(pod)] = gate
            bound = len(pods) - len(pending)
            if bound >= needed:  # the gang runs: Permit lets the others through
                continue
            gang = Gang(gid, needed, len(pods), bound, pending)
            for pod in pending:
                self.groups[pod_key(pod)] = gang

    def _block(self, pod: dict[str, Any], reason: str, message: str, missing: str) -> None:
        self.blocked[pod_key(pod)] = _held(pod, reason, message, [missing])

    def held(self, snap: Snapshot, pod: dict[str, Any]) -> PodVerdict | None:
        """The verdict of a pending pod its gang keeps from every node (``blocked``, or its PodGroup's
        minResources not free on ``snap`` as it is now), or None. The minResources check is the same for
        every pod of a group: a gang either is held whole or not at all."""
        key = pod_key(pod)
        verdict = self.blocked.get(key)
        gate = self._gates.get(key)
        if verdict is not None or gate is None:
            return verdict
        gap = gate.gap(snap)
        if not gap:
            return None
        message, missing = gate.message(gap)
        return _held(pod, "gang", message, missing)

    def distinct(self) -> list[Gang]:
        """Every unsatisfied gang once, by key."""
        return sorted({g.ref.key: g for g in self.groups.values()}.values(), key=lambda g: g.ref.key)


def _held(pod: dict[str, Any], reason: str, message: str, missing: list[str]) -> PodVerdict:
    meta = pod.get("metadata") or {}
    return PodVerdict(meta.get("namespace") or "default", str(meta.get("name")), None, reason, message,
                      {"node": None, "missing": missing})


def _too_few(gid: GangId, pod: dict[str, Any], have: int, need: int) -> str:
    """The plugin's own message for a gang with fewer than ``need`` members."""
    if gid.kind == POD_GROUP_KIND:  # Coscheduling PreFilter
        return (f"pre-filter pod {(pod.get('metadata') or {}).get('name')} cannot find enough sibling pods, "
                f"current pods number: {have}, minMember of group: {need}")
    return (f"waiting for minCount pods from a gang to appear in scheduling queue: {have} of minCount {need} "
            f"pods of gang {gid.key} exist")


def gang_verdict(verdict: PodVerdict, gang: Gang, placed: int, node: str | None) -> PodVerdict:
    """The verdict of a member that fits on its own (on ``node``) while its gang does not fit."""
    key = gang.ref.key
    return dataclasses.replace(
        verdict, reason="gang", summary="",
        message=f"room for {placed} of the {gang.need} pods gang {key} needs ({gang.ref.count_field} "
                f"{gang.min_count}, {gang.bound} bound)",
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
