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
from .snapshot import NodeResult, PodClaims, Snapshot, device_reachable, is_pending, pod_key

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


def evaluate(snap: Snapshot, pod: dict[str, Any]) -> PodVerdict:
    ns, name = _names(pod)
    claims = snap.resolve_claims(pod)
    if claims.missing:
        what = "; ".join(claims.missing)
        return PodVerdict(ns, name, None, "missing", f"{what} not found", {"node": None, "missing": claims.missing},
                          claims=claims)
    statics = {node.name: snap.static_failures(pod, node) for node in snap.nodes.values()}
    usable = [name for name, failures in statics.items() if not failures]
    least = min((len(f) for f in statics.values()), default=0)
    results: list[NodeResult] = []
    for node in snap.nodes.values():
        static = statics[node.name]
        if len(static) > least:  # cannot be feasible nor closer than the others: spare the allocator
            results.append(NodeResult(node.name, static))
            continue
        dra = snap.dra(claims.claims, node, explain=False)
        results.append(NodeResult(node.name, static + dra.failures, dra.dra_progress, dra.allocations))
    feasible = [r for r in results if r.feasible]
    if feasible:
        return PodVerdict(ns, name, None, None, f"fits on {len(feasible)} node(s), e.g. {feasible[0].node}",
                          {"node": feasible[0].node, "missing": []}, feasible=feasible, claims=claims,
                          usable_nodes=usable)
    if not results:
        return PodVerdict(ns, name, None, "resources", "the cluster has no nodes", {"node": None, "missing": []},
                          claims=claims)
    # explain the DRA failures of the nodes that came closest (explanations cost a few more searches)
    fewest = min(len(r.failures) for r in results)
    for i, r in enumerate(results):
        if len(r.failures) == fewest and r.failures[-1].reason in ("capacity", "topology", "taint", "not-ready",
                                                                    "missing"):
            node = snap.nodes[r.node]
            static = snap.static_failures(pod, node)
            dra = snap.dra(claims.claims, node, explain=True)
            results[i] = NodeResult(r.node, static + dra.failures, dra.dra_progress)
    best = min(results, key=lambda r: (len(r.failures), -r.dra_progress[0], -r.dra_progress[1], r.node))
    reason, message = best.failures[0].reason, best.failures[0].message
    if reason == "capacity" and usable:
        frag = _fragmentation(snap, claims.claims, usable)
        if frag:
            reason, message = "fragmentation", frag
    return PodVerdict(ns, name, None, reason, message,
                      {"node": best.node, "missing": [f.message for f in best.failures]},
                      summary=_summary(len(results), results), claims=claims, usable_nodes=usable)


def _fragmentation(snap: Snapshot, claims: list[tuple[str, Claim]], usable: list[str]) -> str | None:
    """A message when the free devices matching the pod's requests, over the nodes it may use, are
    enough in total but no single node has enough; else None."""
    nodes = [snap.nodes[n] for n in usable]
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
            matching = [(slc, d) for slc, d in snap.complete if not snap.in_use(d.id)
                        and snap.device_matches(d, sub.device_class, sub.selectors)]
            reach = [(slc, d) for slc, d in matching if any(device_reachable(slc, d, n) for n in nodes)]
            if len(reach) < sub.count:
                return None
            need += sub.count
            for slc, d in reach:
                if d.id not in pooled:
                    pooled.add(d.id)
                    for n in nodes:
                        if device_reachable(slc, d, n):
                            per_node[n.name] += 1
    if need == 0 or len(pooled) < need:
        return None
    most = max(per_node.values(), default=0)
    if most >= need:
        return None
    return (f"the claims need {need} device(s): {len(pooled)} matching devices are free across "
            f"{len(per_node)} node(s), but at most {most} on one node")


def device_totals(snap: Snapshot, verdicts: Iterable[PodVerdict]) -> dict[str, int]:
    total = len(snap.complete)
    allocated = sum(1 for _, d in snap.complete if snap.in_use(d.id))
    wants = []  # (requests, usable nodes) of every pending pod
    for v in verdicts:
        if v.node is not None:
            continue
        subs = [sub for _, c in v.claims.claims if c.allocation is None for r in c.requests for sub in r.choices()]
        if subs:
            wants.append((subs, [snap.nodes[n] for n in v.usable_nodes]))
    stranded = 0
    for slc, d in snap.complete:
        if snap.in_use(d.id):
            continue
        if not any(any(device_reachable(slc, d, n) for n in nodes)
                   and any(snap.device_matches(d, s.device_class, s.selectors) for s in subs)
                   for subs, nodes in wants):
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
    for pod in inv.pods.values():
        if is_pending(pod):
            verdicts.append(evaluate(snap, pod))
        else:
            ns, name = _names(pod)
            node = (pod.get("spec") or {}).get("nodeName")
            verdicts.append(PodVerdict(ns, name, node, None, "", {"node": node, "missing": []}))
    verdicts.sort(key=lambda v: (v.namespace, v.name))
    return {"pods": [v.to_json() for v in verdicts], "devices": device_totals(snap, verdicts)}


def _score(snap: Snapshot, pod: dict[str, Any], result: NodeResult, local: dict[str, list[DeviceID]]) -> float:
    """most-allocated: the mean fraction in use after placing the pod, over the resources it requests
    and, when it is allocated devices, the node's devices."""
    used, alloc = snap.used[result.node], snap.allocatable[result.node]
    fractions = [(used.get(r, 0) + a) / alloc[r] for r, a in pod_requests(pod).items() if alloc.get(r)]
    devices = local.get(result.node, [])
    if result.allocations and devices:
        taken = {(r["driver"], r["pool"], r["device"]) for a in result.allocations.values()
                 for r in (a.get("devices") or {}).get("results") or []}
        busy = sum(1 for d in devices if snap.in_use(d) or (d.driver, d.pool, d.device) in taken)
        fractions.append(busy / len(devices))
    return sum(fractions) / len(fractions) if fractions else 0.0


def schedule(inv: Inventory) -> dict[str, Any]:
    snap = Snapshot(inv)
    local: dict[str, list[DeviceID]] = {}
    for slc, d in snap.complete:
        if slc.node_selection is not None and slc.node_selection.node_name:
            local.setdefault(slc.node_selection.node_name, []).append(d.id)
    bindings: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for pod in queue_order(p for p in inv.pods.values() if is_pending(p)):
        verdict = evaluate(snap, pod)
        if not verdict.feasible:
            pending.append(verdict.to_json())
            continue
        best = min(verdict.feasible, key=lambda r: (-_score(snap, pod, r, local), r.node))
        by_key = {c.key: c for _, c in verdict.claims.claims}
        snap.commit(best.allocations, by_key)
        snap.add_pod(best.node, pod)
        claims = [{"name": name, "allocation": best.allocations.get(c.key, c.allocation)}
                  for name, c in verdict.claims.claims]
        bindings.append({"namespace": verdict.namespace, "name": verdict.name, "node": best.node, "claims": claims})
    return {"bindings": bindings, "pending": pending}
