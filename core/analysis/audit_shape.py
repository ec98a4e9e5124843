"""The node-by-node evaluation behind `dralab audit` and `dralab schedule`, kept up to date across bindings.

:class:`Shape` holds, for every pod with the same static signature and claims shape, each node's filter
outcome and the aggregates the verdict reads (feasible nodes, the closest node, the FitError summary, the
fragmentation counts, the scores of the feasible nodes). :mod:`dralab.core.analysis.audit` turns it into verdicts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..dra.model import Claim, DeviceID, SubRequest
from .audit_devices import reachable_from_any, reached_nodes
from .audit_snapshot import Failure, NodeResult, Snapshot

__all__ = ["LocalDevices", "Shape", "fragmentation", "score"]


def _summary(total: int, counts: Counter[str]) -> str:
    """Upstream's FitError shape: '0/N nodes are available: <count> <reason>, ...'."""
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()) if n > 0)
    return f"0/{total} nodes are available" + (f": {parts}." if parts else ".")


# the failures of the closest nodes that get explained (explanations cost a few more searches)
_EXPLAIN = ("capacity", "topology", "taint", "device-taint", "not-ready", "missing")


class Shape:
    """What `evaluate` finds for every pod with the same static signature and claims shape (see
    :meth:`Snapshot.dra_shape`), node by node: results whose messages may name another pod's claims.

    Kept up to date across bindings (``schedule``): a binding changes one node (its used resources and the
    devices of its node-local pools), so only the nodes :meth:`Snapshot.changed_since` names are evaluated
    again and the aggregates (feasible nodes, failure counts, the closest node, the FitError summary, the
    fragmentation counts, scores) are updated from them, instead of every pod walking every node after
    every binding. The outcome is the one a fresh evaluation would give; when that cannot be had cheaply
    (the fewest static failures moved, or a change may concern any node) the shape is built again."""

    def __init__(self, snap: Snapshot, pod: dict[str, Any], claims: list[tuple[str, Claim]], shape: str,
                 share_nodes: bool) -> None:
        self.shape, self.share_nodes = shape, share_nodes
        self.version = snap.version
        self.names = list(snap.nodes)
        statics = snap.node_statics(pod)
        self.statics: list[list[Failure]] = [statics[n] for n in self.names]
        self.least = min((len(f) for f in self.statics), default=0)
        self.results: list[NodeResult] = []
        self.ran: list[bool] = []  # did the node run the allocator?
        self.n_static: Counter[int] = Counter()  # number of nodes by count of static failures
        self.by_fail: dict[int, set[int]] = {}  # node indexes by count of failures
        self.usable_idx: set[int] = set()
        self._usable: list[str] | None = None
        self.first: Counter[str] = Counter()  # first failure reasons (before explanations)
        self.explained: dict[int, NodeResult] = {}  # explained results of nodes that came closest ...
        self.ranks: dict[int, tuple[int, int, int, str]] = {}  # ... their rank (see `_derive`) ...
        self.reasons: dict[int, str | None] = {}  # ... and their first failure's reason, where it changed
        self._fewest: int | None = None  # the fewest failures and the closest node at the last `_derive`
        self._best_i: int | None = None
        # fragmentation (see `_fragmentation`): per usable node, free matching devices per request and all
        # together; their sums over those nodes, and how many nodes have each number of devices
        self.frag: dict[int, tuple[tuple[int, ...], int]] = {}
        self.frag_totals: list[int] = []
        self.frag_pooled: Counter[int] = Counter()
        self.scores: dict[int, tuple[float, str]] = {}  # see `choose_node`
        for i, name in enumerate(self.names):
            self.results.append(NodeResult(name))
            self.ran.append(False)
            self._set(snap, claims, i, name)
        self._derive(snap, claims, None)

    # --------------------------------------------------------------- per node

    def _set(self, snap: Snapshot, claims: list[tuple[str, Claim]], i: int, name: str) -> None:
        static = self.statics[i]
        if len(static) > self.least:  # cannot be feasible nor closer than the others: spare the allocator
            result, ran = NodeResult(name, list(static)), False
        else:
            dra = snap.dra_shape(claims, snap.nodes[name], explain=False, shape=self.shape,
                                 share_nodes=self.share_nodes)
            result, ran = NodeResult(name, static + dra.failures, dra.dra_progress, dra.allocations), True
        self.results[i], self.ran[i] = result, ran
        self.by_fail.setdefault(len(result.failures), set()).add(i)
        if result.failures:
            self.first[result.failures[0].reason] += 1
        self.n_static[len(static)] += 1
        if not static and i not in self.usable_idx:
            self.usable_idx.add(i)
            self._usable = None

    def _unset(self, i: int) -> None:
        result, static = self.results[i], self.statics[i]
        group = self.by_fail[len(result.failures)]
        group.discard(i)
        if not group:
            del self.by_fail[len(result.failures)]
        if result.failures:
            self.first[result.failures[0].reason] -= 1
        self.n_static[len(static)] -= 1
        if not self.n_static[len(static)]:
            del self.n_static[len(static)]
        for cache in (self.explained, self.ranks, self.reasons, self.scores):
            cache.pop(i, None)
        frag = self.frag.pop(i, None)
        if frag is not None:
            for j, n in enumerate(frag[0]):
                self.frag_totals[j] -= n
            self.frag_pooled[frag[1]] -= 1

    def refresh(self, snap: Snapshot, pod: dict[str, Any], claims: list[tuple[str, Claim]]) -> bool:
        """Bring the shape to ``snap.version``; False when it must be built again instead."""
        if self.version == snap.version:
            return True
        dirty = snap.changed_since(self.version)
        if dirty is None or 4 * len(dirty) > len(self.names):
            return False
        changed: set[int] = set()
        for name in dirty:
            i = snap.node_index[name]
            changed.add(i)
            self._unset(i)
            self.statics[i] = static = snap.node_static(pod, name)
            if static and i in self.usable_idx:
                self.usable_idx.discard(i)
                self._usable = None
            self._set(snap, claims, i, name)
        if min(self.n_static, default=0) != self.least:  # other nodes now run (or skip) the allocator
            return False
        self.version = snap.version
        self._derive(snap, claims, changed)
        return True

    # --------------------------------------------------------------- aggregates

    @property
    def feasible(self) -> set[int]:
        return self.by_fail.get(0) or set()

    @property
    def usable(self) -> list[str]:
        if self._usable is None:
            self._usable = [self.names[i] for i in sorted(self.usable_idx)]
        return self._usable

    def _derive(self, snap: Snapshot, claims: list[tuple[str, Claim]], changed: set[int] | None) -> None:
        """The closest node, the summary and the fragmentation message, as a walk over every node gives
        them: the nodes with the fewest failures whose last failure may be explained are evaluated again
        with explanations (that may change their reason, progress, even their count of failures); the
        closest node has the fewest failures, then the most DRA progress, then the name. Per node, what
        the explanation gives is kept until the node changes (``ranks``, ``reasons``); ``changed``: the
        nodes re-evaluated since the last call (None: all)."""
        self.best: NodeResult | None = None
        self.best_dra = self.best_explained = False
        self.summary, self.fragmentation = "", None
        if self.feasible or not self.results:
            self._fewest = self._best_i = None
            return
        fewest = min(self.by_fail)
        group = self.by_fail[fewest]
        incremental = changed is not None and fewest == self._fewest and self._best_i is not None
        if incremental:
            assert changed is not None
            fresh = [i for i in changed if i in group]
            todo = [i for i in fresh if i not in self.ranks]
        else:
            todo = [i for i in group if i not in self.ranks]
        for i in todo:
            result = self.results[i]
            if result.failures[-1].reason in _EXPLAIN:
                dra = snap.dra_shape(claims, snap.nodes[result.node], explain=True, shape=self.shape,
                                     share_nodes=self.share_nodes)
                result = self.explained[i] = NodeResult(result.node, self.statics[i] + dra.failures,
                                                        dra.dra_progress)
                after = result.failures[0].reason if result.failures else None
                if after != self.results[i].failures[0].reason:
                    self.reasons[i] = after
            self.ranks[i] = (len(result.failures), -result.dra_progress[0], -result.dra_progress[1], result.node)
        if incremental and self._best_i in group and self._best_i not in fresh:
            best_i = min([self._best_i, *fresh], key=self.ranks.__getitem__)
        else:
            best_i = min(group, key=self.ranks.__getitem__)
        self._fewest, self._best_i = fewest, best_i
        if self.ranks[best_i][0] > fewest:  # explaining found more failures on every closest node: look at all
            def rank(i: int) -> tuple[int, int, int, str]:
                r = self.results[i]
                return self.ranks[i] if i in group else (len(r.failures), -r.dra_progress[0], -r.dra_progress[1],
                                                         r.node)
            best_i = min(range(len(self.results)), key=rank)
            self._best_i = None  # not kept: the next call looks at every node again
        counts = Counter(self.first)
        for i in self.reasons.keys() & group:
            counts[self.results[i].failures[0].reason] -= 1
            after = self.reasons[i]
            if after is not None:
                counts[after] += 1
        self.best = self.explained.get(best_i, self.results[best_i]) if best_i in group else self.results[best_i]
        self.best_dra, self.best_explained = self.ran[best_i], best_i in group and best_i in self.explained
        self.summary = _summary(len(self.results), counts)
        if self.best.failures[0].reason == "capacity" and self.usable_idx:
            self.fragmentation = self._fragmentation(snap, claims)

    def _fragmentation(self, snap: Snapshot, claims: list[tuple[str, Claim]]) -> str | None:
        """`fragmentation` from per-node counts kept across bindings, when every matching device is
        node-local (else the general function): per usable node, the free matching devices of each
        request and of all of them together."""
        subs = exact_requests(claims)
        if subs is None:
            return None
        by_node = [snap.devices.matching_by_node(sub.device_class, sub.selectors) for sub in subs]
        if not subs or any(b is None for b in by_node):
            return fragmentation(snap, claims, self.usable)
        if not self.frag_totals:
            self.frag_totals = [0] * len(subs)
        for i in [i for i in self.usable_idx if i not in self.frag]:
            name, ids, per_sub = self.names[i], set(), []
            for j, devices in enumerate(by_node):
                free = [d.id for d in (devices or {}).get(name, ()) if not snap.in_use(d.id)]
                per_sub.append(len(free))
                self.frag_totals[j] += len(free)
                ids.update(free)
            self.frag[i] = (tuple(per_sub), len(ids))
            self.frag_pooled[len(ids)] += 1
        pooled = sum(n * count for n, count in self.frag_pooled.items())
        nodes = sum(count for n, count in self.frag_pooled.items() if n)
        most = max((n for n, count in self.frag_pooled.items() if count), default=0)
        need = sum(sub.count for sub in subs)
        totals = self.frag_totals
        if any(total < sub.count for total, sub in zip(totals, subs, strict=True)) or pooled < need or most >= need:
            return None
        return (f"the claims need {need} device(s): {pooled} matching devices are free across "
                f"{nodes} node(s), but at most {most} on one node")

    def choose_node(self, snap: Snapshot, requests: dict[str, int], local: LocalDevices) -> str:
        """The feasible node with the best most-allocated score, ties by name (scores kept per node until
        the node changes)."""
        local.sync()
        for i in [i for i in self.feasible if i not in self.scores]:
            self.scores[i] = (-score(snap, requests, self.results[i], local), self.names[i])
        return min(map(self.scores.__getitem__, self.feasible))[1]




def exact_requests(claims: list[tuple[str, Claim]]) -> list[SubRequest] | None:
    """The first choice of every request of the unallocated claims; None if one is not ExactCount (its
    device count is not known ahead)."""
    subs = []
    for _, claim in claims:
        if claim.allocation is not None:
            continue
        for request in claim.requests:
            sub = request.choices()[0]
            if sub.allocation_mode != "ExactCount":
                return None
            subs.append(sub)
    return subs


def fragmentation(snap: Snapshot, claims: list[tuple[str, Claim]], usable: list[str]) -> str | None:
    """A message when the free devices matching the pod's requests, over the nodes it may use, are
    enough in total but no single node has enough; else None."""
    nodes = [snap.nodes[n] for n in usable]
    names = set(usable)
    need = 0
    pooled: set[DeviceID] = set()
    per_node: Counter[str] = Counter()
    subs = exact_requests(claims)
    if subs is None:
        return None
    for sub in subs:
        matching = [(slc, d) for slc, d in snap.devices.matching_devices(sub.device_class, sub.selectors)
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




class LocalDevices:
    """The node-local devices of each node (``nodeName`` slices), and per node how many are in use and
    which are free: kept while a scheduling pass commits allocations (`sync` forgets the nodes that
    changed since)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.version = snap.version
        self.devices: dict[str, list[DeviceID]] = {}
        for slc, d in snap.complete:
            if slc.node_selection is not None and slc.node_selection.node_name:
                self.devices.setdefault(slc.node_selection.node_name, []).append(d.id)
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

    def sync(self) -> None:
        if self.version == self.snap.version:
            return
        changed = self.snap.changed_since(self.version)
        if changed is None:
            self._counts.clear()
        else:
            for node in changed:
                self._counts.pop(node, None)
        self.version = self.snap.version


def score(snap: Snapshot, requests: dict[str, int], result: NodeResult, local: LocalDevices) -> float:
    """most-allocated: the mean fraction in use after placing the pod, over the resources it requests
    and, when it is allocated devices, the node's devices.

    ``result.allocations`` may be those of another node with the same DRA signature (see
    :meth:`Snapshot.dra_shape`): then every pool is local to one node and the devices taken are free
    devices of complete node-local pools, so this node would take as many of its own."""
    used, alloc = snap.used[result.node], snap.allocatable[result.node]
    fractions = [(used.get(r, 0) + a) / alloc[r] for r, a in requests.items() if alloc.get(r)]
    devices = local.devices.get(result.node, [])
    if result.allocations and devices:
        taken = {(r["driver"], r["pool"], r["device"]) for a in result.allocations.values()
                 for r in (a.get("devices") or {}).get("results") or []}
        busy, free = local.counts(result.node)  # busy: in use or taken
        if all(snap.pool_node(driver, pool) == result.node for driver, pool, _ in taken):
            busy += sum(free.get(t, 0) for t in taken)
        else:  # another node's outcome, shared
            busy += len(taken)
        fractions.append(busy / len(devices))
    return sum(fractions) / len(fractions) if fractions else 0.0
