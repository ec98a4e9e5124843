"""One pending pod against a cluster snapshot, for `dralab audit` and `dralab schedule`: its verdict (why it
does not fit, from the node that came closest), queue order, and the Placer that binds pods one by one.
audit.py runs the passes, audit_gang.py places gangs; both build on this module, which imports neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..dra.binding_status import waiting_for_binding
from ..dra.model import DeviceID
from ..kube.resources import pod_requests
from .audit_devices import reachable_from_any
from .audit_shape import LocalDevices, Shape
from .audit_snapshot import NodeResult, PodClaims, Snapshot, claims_shape, pod_key, static_signature

__all__ = ["Placer", "PodVerdict", "device_totals", "evaluate", "gated", "queue_order", "stranded_devices"]


@dataclass
class PodVerdict:
    namespace: str
    name: str
    node: str | None
    reason: str | None
    message: str
    closest: dict[str, Any] | None
    summary: str = ""
    claims: PodClaims = field(default_factory=PodClaims)
    usable_nodes: list[str] = field(default_factory=list)  # nodes passing every non-DRA filter
    shape: Shape | None = None  # the node-by-node evaluation it came from (for `choose_node`)
    group: str = ""  # the 1.36+ PodGroup (<ns>/<name>) the pod belongs to, if any

    def to_json(self) -> dict[str, Any]:
        out = {"namespace": self.namespace, "name": self.name, "node": self.node, "reason": self.reason,
               "message": self.message, "closest": self.closest}
        if self.summary:
            out["summary"] = self.summary
        if self.group:
            out["pod_group"] = self.group
        return out


def pod_names(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return meta.get("namespace") or "default", str(meta.get("name"))


def gated(pod: dict[str, Any]) -> PodVerdict | None:
    """The verdict of a pod held by scheduling gates (the SchedulingGates PreEnqueue plugin), else None."""
    gates = [str((g or {}).get("name")) for g in (pod.get("spec") or {}).get("schedulingGates") or []
             if isinstance(g, dict)]
    if not gates:
        return None
    ns, name = pod_names(pod)
    return PodVerdict(ns, name, None, "gated", f"waiting for scheduling gates: {gates}",
                      {"node": None, "missing": gates})

def evaluate(snap: Snapshot, pod: dict[str, Any], memo: dict[tuple[str, str], Shape] | None = None, *,
             share_nodes: bool = False) -> PodVerdict:
    """The verdict of one pending pod. ``memo`` shares the node-by-node work among pods of the same static
    signature and claims shape (and keeps it up to date when ``snap`` changes, see :class:`Shape`).

    With ``share_nodes`` (see :meth:`Snapshot.dra_shape`) the per-node allocations may be another node's:
    for callers that only need feasibility (not `choose_node`)."""
    ns, name = pod_names(pod)
    claims = snap.resolve_claims(pod)
    if claims.missing:
        what = "; ".join(claims.missing)
        return PodVerdict(ns, name, None, "missing", f"{what} not found", {"node": None, "missing": claims.missing},
                          claims=claims)
    waiting = waiting_for_binding(name, claims.claims)  # held in kube-scheduler's PreBind (KEP-5007)
    if waiting:
        return PodVerdict(ns, name, None, "binding-conditions", f"waiting for binding conditions: {', '.join(waiting)}",
                          {"node": None, "missing": waiting}, claims=claims)
    key = (static_signature(pod), claims_shape(claims.claims))
    shape = memo.get(key) if memo is not None else None
    if shape is None or shape.share_nodes != share_nodes or not shape.refresh(snap, pod, claims.claims):
        shape = Shape(snap, pod, claims.claims, key[1], share_nodes)
        if memo is not None:
            memo[key] = shape
    feasible = shape.feasible
    if feasible:
        first = shape.names[min(feasible)]
        return PodVerdict(ns, name, None, None, f"fits on {len(feasible)} node(s), e.g. {first}",
                          {"node": first, "missing": []}, claims=claims, usable_nodes=shape.usable, shape=shape)
    if shape.best is None:
        return PodVerdict(ns, name, None, "resources", "the cluster has no nodes", {"node": None, "missing": []},
                          claims=claims)
    best = shape.best
    if shape.best_dra:  # its messages, with this pod's claims
        dra = snap.dra(claims.claims, snap.nodes[best.node], explain=shape.best_explained)
        best = NodeResult(best.node, snap.node_static(pod, best.node) + dra.failures, dra.dra_progress)
    reason, message = best.failures[0].reason, best.failures[0].message
    if reason == "capacity" and shape.fragmentation:
        reason, message = "fragmentation", shape.fragmentation
    return PodVerdict(ns, name, None, reason, message,
                      {"node": best.node, "missing": [f.message for f in best.failures]},
                      summary=shape.summary, claims=claims, usable_nodes=shape.usable, shape=shape)

def device_totals(snap: Snapshot, verdicts: Iterable[PodVerdict]) -> dict[str, int]:
    total = len(snap.complete)
    in_use = [snap.in_use(d.id) for _, d in snap.complete]
    allocated = sum(in_use)
    stranded = len(stranded_devices(snap, verdicts, in_use))
    return {"total": total, "allocated": allocated, "free": total - allocated, "stranded": stranded}


def stranded_devices(snap: Snapshot, verdicts: Iterable[PodVerdict], in_use: list[bool] | None = None
                     ) -> set[DeviceID]:
    """The free devices of ``snap.complete`` that no pending pod can use: matched by the selectors of no pending
    pod's unallocated claims, or reachable only from nodes where every such pod fails a non-DRA filter
    (``in_use``: `snap.in_use` of each device, when the caller has it). `device_totals` counts them; the audit's
    picture (core/analysis/audit_picture.py) colours them."""
    if in_use is None:
        in_use = [snap.in_use(d.id) for _, d in snap.complete]
    # (requests, usable nodes) of every pending pod, each distinct pair once
    distinct: dict[tuple[Any, ...], tuple[list[tuple[str, tuple[str, ...]]], list[str]]] = {}
    for v in verdicts:
        if v.node is not None:
            continue
        subs = [(sub.device_class, tuple(sub.selectors)) for _, c in v.claims.claims if c.allocation is None
                for r in c.requests for sub in r.choices()]
        if subs:
            distinct.setdefault((tuple(subs), tuple(v.usable_nodes)), (subs, v.usable_nodes))
    wants = [(subs, set(usable), [snap.nodes[n] for n in usable]) for subs, usable in distinct.values()]
    stranded: set[DeviceID] = set()
    for (slc, d), used in zip(snap.complete, in_use, strict=True):
        if used:
            continue
        if not any(reachable_from_any(slc, d, names, nodes)
                   and any(snap.devices.device_matches(d, cls, sels) for cls, sels in subs)
                   for subs, names, nodes in wants):
            stranded.add(d.id)
    return stranded


def queue_order(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Upstream PrioritySort: priority descending, then creationTimestamp, then namespace/name."""
    def key(pod: dict[str, Any]) -> tuple[int, str, str]:
        meta = pod.get("metadata") or {}
        return (-int((pod.get("spec") or {}).get("priority") or 0), str(meta.get("creationTimestamp") or ""),
                pod_key(pod))
    return sorted(pods, key=key)


class Placer:
    """Places pods one by one on a snapshot, as `schedule` does: `evaluate` (memo kept across bindings),
    `choose` the best feasible node, `bind` there. Gangs (:mod:`dralab.core.analysis.audit_gang`) use one on a
    checkpointed snapshot to place a group tentatively."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.local = LocalDevices(snap)
        self.memo: dict[tuple[str, str], Shape] = {}

    def evaluate(self, pod: dict[str, Any]) -> PodVerdict:
        """`evaluate` with nodes sharing allocator outcomes (see `_score` for what that means to scores)."""
        return evaluate(self.snap, pod, self.memo, share_nodes=True)

    def choose(self, pod: dict[str, Any], verdict: PodVerdict) -> str:
        """The node `bind` would pick for a pod that fits (``verdict`` from `evaluate`)."""
        assert verdict.shape is not None and verdict.shape.feasible
        return verdict.shape.choose_node(self.snap, pod_requests(pod), self.local)

    def bind(self, pod: dict[str, Any], verdict: PodVerdict) -> dict[str, Any]:
        """Bind a pod that fits to its best node: allocate its claims there and update the snapshot.
        Returns the binding as `schedule` prints it."""
        snap = self.snap
        node = self.choose(pod, verdict)
        best = snap.dra(verdict.claims.claims, snap.nodes[node], explain=False)  # this pod's claim keys
        assert best.feasible, f"node {node} was feasible for {verdict.name} but its allocation failed"
        by_key = {c.key: c for _, c in verdict.claims.claims}
        snap.commit(best.allocations, by_key)
        snap.add_pod(node, pod)
        claims = [{"name": name, "allocation": best.allocations.get(c.key, c.allocation)}
                  for name, c in snap.extended.on_node(verdict.claims.claims, node)]  # no special claim there
        return {"namespace": verdict.namespace, "name": verdict.name, "node": node, "claims": claims}
