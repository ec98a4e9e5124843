"""Why pods are pending, from a cluster dump: `dralab audit` and `dralab schedule`.

:func:`audit` tries every pending pod on every node (see :mod:`dralab.core.snapshot` for the filters),
classifies why it does not fit from the node that came closest (fewest failing filters, then most DRA
progress, then name), and counts devices: total, allocated, free and stranded (free, but no pending pod
can use them). :func:`schedule` runs one greedy scheduling pass over the same snapshot in queue order.

Reasons: ``capacity`` (no node has enough free matching devices), ``topology`` (a node has them but a
constraint cannot be met), ``fragmentation`` (enough free matching devices across the nodes the pod may
use, but not on one node), ``resources`` (cpu/memory/pods/extended resources), ``taint``, ``selector``,
``not-ready`` (node not Ready or cordoned, or its devices not fully published), ``missing`` (a referenced
claim, template or class does not exist). A pending pod that fits somewhere has reason None.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .dra.model import Claim, DeviceID, Inventory
from .resources import pod_requests
from .snapshot import (
    NodeResult,
    PodClaims,
    Snapshot,
    claims_shape,
    is_pending,
    pod_key,
    reachable_from_any,
    reached_nodes,
    static_signature,
)

__all__ = ["PodVerdict", "audit", "queue_order", "schedule"]


@dataclass
class PodVerdict:
    namespace: str
    name: str
    node: str | None
    reason: str | None
    message: str
    closest: dict[str, Any] | None
    summary: str = ""
    feasible: list[NodeResult] = field(default_factory=list)
    claims: PodClaims = field(default_factory=PodClaims)
    usable_nodes: list[str] = field(default_factory=list)  # nodes passing every non-DRA filter

    def to_json(self) -> dict[str, Any]:
        out = {"namespace": self.namespace, "name": self.name, "node": self.node, "reason": self.reason,
               "message": self.message, "closest": self.closest}
        if self.summary:
            out["summary"] = self.summary
        return out


def _names(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return meta.get("namespace") or "default", str(meta.get("name"))


def _summary(total: int, results: list[NodeResult]) -> str:
    """Upstream's FitError shape: '0/N nodes are available: <count> <reason>, ...'."""
    counts = Counter(r.failures[0].reason for r in results if r.failures)
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return f"0/{total} nodes are available" + (f": {parts}." if parts else ".")


@dataclass
class _Shape:
    """What `evaluate` finds for every pod with the same static signature and claims shape (see
    :meth:`Snapshot.dra_shape`): per-node results whose messages may name another pod's claims."""

    results: list[NodeResult]
    usable: list[str]
    feasible: list[NodeResult]
    best: NodeResult | None = None
    best_dra: bool = False  # the best node's failures include DRA ones ...
    best_explained: bool = False  # ... computed with explain=True
    summary: str = ""
    fragmentation: str | None = None


def _shape(snap: Snapshot, pod: dict[str, Any], claims: PodClaims, shape: str, share_nodes: bool) -> _Shape:
    statics = snap.node_statics(pod)
    usable = [name for name, failures in statics.items() if not failures]
    least = min((len(f) for f in statics.values()), default=0)
    results: list[NodeResult] = []
    ran: set[int] = set()  # indexes of the results that ran the allocator
    for i, node in enumerate(snap.nodes.values()):
        static = statics[node.name]
        if len(static) > least:  # cannot be feasible nor closer than the others: spare the allocator
            results.append(NodeResult(node.name, list(static)))
            continue
        ran.add(i)
        dra = snap.dra_shape(claims.claims, node, explain=False, shape=shape, share_nodes=share_nodes)
        results.append(NodeResult(node.name, static + dra.failures, dra.dra_progress, dra.allocations))
    feasible = [r for r in results if r.feasible]
    out = _Shape(results, usable, feasible)
    if feasible or not results:
        return out
    # explain the DRA failures of the nodes that came closest (explanations cost a few more searches)
    fewest = min(len(r.failures) for r in results)
    explained: set[int] = set()
    for i, r in enumerate(results):
        if len(r.failures) == fewest and r.failures[-1].reason in ("capacity", "topology", "taint", "not-ready",
                                                                    "missing"):
            node = snap.nodes[r.node]
            dra = snap.dra_shape(claims.claims, node, explain=True, shape=shape, share_nodes=share_nodes)
            results[i] = NodeResult(r.node, statics[r.node] + dra.failures, dra.dra_progress)
            explained.add(i)
    best_i = min(range(len(results)), key=lambda i: (len(results[i].failures), -results[i].dra_progress[0],
                                                     -results[i].dra_progress[1], results[i].node))
    out.best, out.best_dra, out.best_explained = results[best_i], best_i in ran, best_i in explained
    out.summary = _summary(len(results), results)
    if out.best.failures[0].reason == "capacity" and usable:
        out.fragmentation = _fragmentation(snap, claims.claims, usable)
    return out


def evaluate(snap: Snapshot, pod: dict[str, Any], memo: dict[tuple[str, str], _Shape] | None = None, *,
             share_nodes: bool = False) -> PodVerdict:
    """The verdict of one pending pod. ``memo`` (for callers that do not change ``snap`` in between) shares
    the node-by-node work among pods of the same static signature and claims shape.

    The allocations of ``feasible`` are those of the claims' shape: their keys may name another pod's
    claims (run :meth:`Snapshot.dra` on the chosen node for this pod's own). With ``share_nodes`` (see
    :meth:`Snapshot.dra_shape`) they may even be another node's: for callers that only need feasibility."""
    ns, name = _names(pod)
    claims = snap.resolve_claims(pod)
    if claims.missing:
        what = "; ".join(claims.missing)
        return PodVerdict(ns, name, None, "missing", f"{what} not found", {"node": None, "missing": claims.missing},
                          claims=claims)
    key = (static_signature(pod), claims_shape(claims.claims))
    shape = memo.get(key) if memo is not None else None
    if shape is None:
        shape = _shape(snap, pod, claims, key[1], share_nodes)
        if memo is not None:
            memo[key] = shape
    feasible, usable = shape.feasible, shape.usable
    if feasible:
        return PodVerdict(ns, name, None, None, f"fits on {len(feasible)} node(s), e.g. {feasible[0].node}",
                          {"node": feasible[0].node, "missing": []}, feasible=feasible, claims=claims,
                          usable_nodes=usable)
    if shape.best is None:
        return PodVerdict(ns, name, None, "resources", "the cluster has no nodes", {"node": None, "missing": []},
                          claims=claims)
    best = shape.best
    if shape.best_dra:  # its messages, with this pod's claims
        node = snap.nodes[best.node]
        dra = snap.dra(claims.claims, node, explain=shape.best_explained)
        best = NodeResult(best.node, snap.node_statics(pod)[best.node] + dra.failures, dra.dra_progress)
    reason, message = best.failures[0].reason, best.failures[0].message
    if reason == "capacity" and shape.fragmentation:
        reason, message = "fragmentation", shape.fragmentation
    return PodVerdict(ns, name, None, reason, message,
                      {"node": best.node, "missing": [f.message for f in best.failures]},
                      summary=shape.summary, claims=claims, usable_nodes=usable)


def _fragmentation(snap: Snapshot, claims: list[tuple[str, Claim]], usable: list[str]) -> str | None:
    """A message when the free devices matching the pod's requests, over the nodes it may use, are
    enough in total but no single node has enough; else None."""
    nodes = [snap.nodes[n] for n in usable]
    names = set(usable)
    need = 0
    pooled: set[DeviceID] = set()
    per_node: Counter[str] = Counter()
    for _, claim in claims:
        if claim.allocation is not None:
            continue
        for request in claim.requests:
            sub = request.choices()[0]
            if sub.allocation_mode != "ExactCount":
                return None
            matching = [(slc, d) for slc, d in snap.matching_devices(sub.device_class, sub.selectors)
                        if not snap.in_use(d.id)]
            reach = [(slc, d) for slc, d in matching if reachable_from_any(slc, d, names, nodes)]
            if len(reach) < sub.count:
                return None
            need += sub.count
            for slc, d in reach:
                if d.id not in pooled:
                    pooled.add(d.id)
                    per_node.update(reached_nodes(slc, d, names, nodes))
    if need == 0 or len(pooled) < need:
        return None
    most = max(per_node.values(), default=0)
    if most >= need:
        return None
    return (f"the claims need {need} device(s): {len(pooled)} matching devices are free across "
            f"{len(per_node)} node(s), but at most {most} on one node")


def device_totals(snap: Snapshot, verdicts: Iterable[PodVerdict]) -> dict[str, int]:
    total = len(snap.complete)
    in_use = [snap.in_use(d.id) for _, d in snap.complete]
    allocated = sum(in_use)
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
    stranded = 0
    for (slc, d), used in zip(snap.complete, in_use, strict=True):
        if used:
            continue
        if not any(reachable_from_any(slc, d, names, nodes)
                   and any(snap.device_matches(d, cls, sels) for cls, sels in subs)
                   for subs, names, nodes in wants):
            stranded += 1
    return {"total": total, "allocated": allocated, "free": total - allocated, "stranded": stranded}


def queue_order(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Upstream PrioritySort: priority descending, then creationTimestamp, then namespace/name."""
    def key(pod: dict[str, Any]) -> tuple[int, str, str]:
        meta = pod.get("metadata") or {}
        return (-int((pod.get("spec") or {}).get("priority") or 0), str(meta.get("creationTimestamp") or ""),
                pod_key(pod))
    return sorted(pods, key=key)


def audit(inv: Inventory) -> dict[str, Any]:
    snap = Snapshot(inv)
    verdicts: list[PodVerdict] = []
    memo: dict[tuple[str, str], _Shape] = {}
    for pod in inv.pods.values():
        if is_pending(pod):
            verdicts.append(evaluate(snap, pod, memo, share_nodes=True))
        else:
            ns, name = _names(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            verdicts.append(PodVerdict(ns, name, node, None, "", {"node": node, "missing": []}))
    verdicts.sort(key=lambda v: (v.namespace, v.name))
    return {"pods": [v.to_json() for v in verdicts], "devices": device_totals(snap, verdicts)}


class _LocalDevices:
    """The node-local devices of each node (``nodeName`` slices), and per node how many are in use and
    which are free: kept while a scheduling pass commits allocations (`forget` after each one)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.devices: dict[str, list[DeviceID]] = {}
        self._owners: dict[tuple[str, str, str], set[str]] = {}
        for slc, d in snap.complete:
            if slc.node_selection is not None and slc.node_selection.node_name:
                self.devices.setdefault(slc.node_selection.node_name, []).append(d.id)
                self._owners.setdefault((d.id.driver, d.id.pool, d.id.device), set()).add(
                    slc.node_selection.node_name)
        self._counts: dict[str, tuple[int, Counter[tuple[str, str, str]]]] = {}

    def counts(self, node: str) -> tuple[int, Counter[tuple[str, str, str]]]:
        hit = self._counts.get(node)
        if hit is None:
            busy, free = 0, Counter[tuple[str, str, str]]()
            for d in self.devices.get(node, []):
                if self.snap.in_use(d):
                    busy += 1
                else:
                    free[(d.driver, d.pool, d.device)] += 1
            hit = self._counts[node] = (busy, free)
        return hit

    def forget(self, allocations: dict[str, dict[str, Any]]) -> None:
        for a in allocations.values():
            for r in (a.get("devices") or {}).get("results") or []:
                for node in self._owners.get((r["driver"], r["pool"], r["device"]), ()):
                    self._counts.pop(node, None)


def _score(snap: Snapshot, requests: dict[str, int], result: NodeResult, local: _LocalDevices) -> float:
    """most-allocated: the mean fraction in use after placing the pod, over the resources it requests
    and, when it is allocated devices, the node's devices."""
    used, alloc = snap.used[result.node], snap.allocatable[result.node]
    fractions = [(used.get(r, 0) + a) / alloc[r] for r, a in requests.items() if alloc.get(r)]
    devices = local.devices.get(result.node, [])
    if result.allocations and devices:
        taken = {(r["driver"], r["pool"], r["device"]) for a in result.allocations.values()
                 for r in (a.get("devices") or {}).get("results") or []}
        busy, free = local.counts(result.node)  # busy: in use or taken
        busy += sum(free.get(t, 0) for t in taken)
        fractions.append(busy / len(devices))
    return sum(fractions) / len(fractions) if fractions else 0.0


def schedule(inv: Inventory) -> dict[str, Any]:
    snap = Snapshot(inv)
    local = _LocalDevices(snap)
    bindings: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    memo: dict[tuple[str, str], _Shape] = {}  # valid until the next binding changes the snapshot
    for pod in queue_order(p for p in inv.pods.values() if is_pending(p)):
        verdict = evaluate(snap, pod, memo)
        if not verdict.feasible:
            pending.append(verdict.to_json())
            continue
        memo.clear()
        requests = pod_requests(pod)
        best = min(verdict.feasible, key=lambda r: (-_score(snap, requests, r, local), r.node))
        best = snap.dra(verdict.claims.claims, snap.nodes[best.node], explain=False)  # this pod's claim keys
        by_key = {c.key: c for _, c in verdict.claims.claims}
        snap.commit(best.allocations, by_key)
        local.forget(best.allocations)
        snap.add_pod(best.node, pod)
        claims = [{"name": name, "allocation": best.allocations.get(c.key, c.allocation)}
                  for name, c in verdict.claims.claims]
        bindings.append({"namespace": verdict.namespace, "name": verdict.name, "node": best.node, "claims": claims})
    return {"bindings": bindings, "pending": pending}
