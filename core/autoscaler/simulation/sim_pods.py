"""PodTopologySpread and InterPodAffinity in the autoscaler's simulation (capacity.py), as cluster-autoscaler
runs them: its ClusterSnapshot runs the scheduler's PreFilter and Filter plugins, these two included, over
the snapshot's nodes and pods, so a pod placed on a node in the simulation (FilterOutSchedulable's absorbed
pods, the binpacking estimator's pods on template nodes) counts for the next pod's spread and affinity, and
a template node's labels (its zone) make it a domain of its own.

What follows from upstream's estimator (cluster-autoscaler/estimator/binpacking_estimator.go), and is kept:
each pod is tried on the new nodes already added, then on one fresh template node; when the pod fails on a
fresh empty node (a zonal spread constraint: the new node is in the zone the pods already crowd) the
estimate for that group stops there. A node group is one zone, so a zone-spread workload gets one new node
per group per loop, and the expander picks one group: scale-up goes one zone, one node at a time
(kubernetes/autoscaler#9150, open; #4129 and PR #4970 for the stop on an empty node, which replaced the
earlier overshoot). Hostname spreading packs one pod per new node, as the scheduler would.

The snapshot here: the Ready nodes with their bound pods, the upcoming nodes (templates) and the current
estimate's template nodes, each with the pods the simulation placed on it. A new binpacking estimate (its
first template node, `template-<group>-0`) starts from the snapshot without the last estimate's template
nodes, as CA forks and reverts its snapshot per estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ...kube.affinity import pod_namespace
from ...scheduler.framework import Status
from ...scheduler.placement import AntiIndex
from ...scheduler.plugins import inter_pod_affinity, pod_topology_spread
from ...scheduler.plugins.pod_topology_spread import Constraint
from ...state.cluster import RUNNING, ClusterState, NodeState, PodState


class SimNode(Protocol):
    """capacity.SimNode as seen here: the node and the pods the simulation placed on it."""

    node: NodeState
    pods: list[PodState]


INDEX = "anti-index"  # the memo's one entry
NodeFilter = Callable[[NodeState], Status | None]


class SimPlacement:
    """The simulation's pods per node and the two plugins' filter for a pod, recomputed when the snapshot's
    placements changed."""

    def __init__(self, view: ClusterState, ready: Callable[[NodeState], bool],
                 memo: dict[str, tuple[dict[str, Any], bool]] | None = None, release: bool = False) -> None:
        self.view = view
        self.release = release  # release profiles: the view's other NotReady nodes are domains (snapshot_nodes)
        # the scheduler's AntiIndex (each pod looked at once), kept across loops in `memo` when given
        memo = {} if memo is None else memo
        entry = memo.get(INDEX)
        if entry is None:
            entry = memo[INDEX] = ({"index": AntiIndex()}, True)
        self._index: AntiIndex = entry[0]["index"]
        self._ready = ready
        self.nodes: dict[str, SimNode] = {}  # the simulation's nodes by name (existing ones once looked at)
        self.version = 0  # bumped on every placement and restore
        self._filters: dict[str, tuple[int, NodeFilter | None]] = {}
        self._anti: list[tuple[PodState, str]] | None = None  # bound pods with required anti-affinity
        self._placed_anti: list[tuple[PodState, SimNode]] | None = []  # placed ones (None: to recount)
        # PodTopologySpread's counts, kept up to date as pods are placed and template nodes added (cleared when
        # placements are taken back or a new estimate starts): key -> [node -> value, value -> count, a pod
        # and constraint of that key, all the pod's constraints]
        self._spread: dict[tuple[Any, ...], list[Any]] = {}
        self._nodes: list[NodeState] | None = None  # the snapshot's nodes (see `snapshot_nodes`)

    def register(self, sim: SimNode) -> None:
        name = sim.node.name
        if name.startswith("template-") and name.endswith("-0"):  # a new estimate: drop the last one's nodes
            for old in [n for n in self.nodes if n.startswith("template-")]:
                del self.nodes[old]
            self._spread.clear()
        elif name not in self.view.nodes:  # a node new to the snapshot: a domain of the kept counts
            for eligible, counts, pod, c, cs in self._spread.values():
                labels = sim.node.labels
                if pod_topology_spread.has_keys(labels, cs) and pod_topology_spread.included(c, pod, sim.node):
                    eligible[name] = labels[c.key]
                    counts.setdefault(labels[c.key], 0)
        self.nodes[name] = sim
        self._nodes = None
        self.version += 1

    def placed(self, pod: PodState, sim: SimNode) -> None:
        self.version += 1
        if self.nodes.get(sim.node.name) is not sim:  # a ready node the caller made itself (count policy)
            self.nodes[sim.node.name] = sim
        for eligible, counts, incoming, c, _ in self._spread.values():
            value = eligible.get(sim.node.name)
            if value is not None and pod_topology_spread.count_matching((pod,), c.selector,
                                                                        pod_namespace(incoming.manifest)):
                counts[value] += 1
        if self._placed_anti is not None and inter_pod_affinity.has_required_anti(pod):
            self._placed_anti.append((pod, sim))

    def changed(self) -> None:
        """Placements were taken back (capacity.Savepoint.restore)."""
        self.version += 1
        self._placed_anti = None
        self._spread.clear()

    def snapshot_nodes(self) -> list[NodeState]:
        """The snapshot's nodes: the view's ready ones and the simulation's own (upcoming, templates). In release
        profiles also the view's nodes that are neither ready nor replaced by an upcoming template (a group in
        backoff, a node given up on or timed out, a node of no group), with their bound pods: CA builds its
        snapshot from all nodes (static_autoscaler.go initializeClusterSnapshot(allNodes, ...)) and removes only
        the registered upcoming (NotStarted) ones, which it replaces by templates as dralab does; such a node
        takes no pod here (FirstFit never walks it) but is a topology domain, as in the scheduler
        (scheduler/placement.py CyclePods.domain_nodes). The legacy model leaves them out."""
        if self._nodes is None:
            view, sims = self.view.nodes, self.nodes
            self._nodes = [n for n in view.values() if self._ready(n) or (
                self.release and f"upcoming-{n.name}" not in sims and n.name not in sims)]
            self._nodes += [sim.node for name, sim in sims.items() if name not in view]
        return self._nodes

    def spread_counts(self, pod: PodState, cs: list[Constraint]) -> list[dict[str, int]]:
        """pod_topology_spread.domain_counts, kept per (namespace, selector, key, keys, node inclusion)."""
        namespace, keys = pod_namespace(pod.manifest), tuple(c.key for c in cs)
        spec = pod.manifest.get("spec") or {}
        out = []
        for c in cs:
            include = (repr((pod.node_selector, (spec.get("affinity") or {}).get("nodeAffinity")))
                       if c.affinity_honor else "", repr(pod.tolerations) if c.taints_honor else "")
            key = (namespace, c.selector, c.key, keys, include)
            entry = self._spread.get(key)
            if entry is None:
                nodes = [n for n in self.snapshot_nodes()
                         if pod_topology_spread.has_keys(n.labels, cs) and pod_topology_spread.included(c, pod, n)]
                counts = pod_topology_spread.domain_counts(pod, [c], nodes, self)[0]
                entry = self._spread[key] = [{n.name: n.labels[c.key] for n in nodes}, counts, pod, c, cs]
            out.append(entry[1])
        return out

    def on(self, node: str) -> list[PodState]:
        """pod_topology_spread.NodePods: the node's bound pods (a real node) and those placed on it."""
        sim = self.nodes.get(node)
        real = self.view.nodes.get(node)
        bound = [self.view.pods[k] for k in real.pods if k in self.view.pods] if real is not None and (
            sim is None or sim.node is real) else []
        return bound + list(sim.pods) if sim is not None else bound

    def _with_anti(self) -> list[tuple[PodState, NodeState]]:
        if self._anti is None:
            pods = self.view.pods
            self._anti = [(p, str(p.node)) for k in self._index.of(self.view)
                          if (p := pods[k]).node is not None and p.phase == RUNNING]
        if self._placed_anti is None:
            self._placed_anti = [(p, sim) for sim in self.nodes.values() for p in sim.pods
                                 if inter_pod_affinity.has_required_anti(p)]
        live = self.nodes
        out = [(p, self.view.nodes[n]) for p, n in self._anti if n in self.view.nodes]
        out += [(p, sim.node) for p, sim in self._placed_anti if live.get(sim.node.name) is sim]
        return out

    def depends(self, pod: PodState) -> bool:
        """Whether the pod's fit depends on other pods' places (FirstFit then walks every node)."""
        if pod_topology_spread.has_required(pod) or inter_pod_affinity.has_required(pod):
            return True
        anti = self._with_anti()
        return bool(anti) and bool(inter_pod_affinity.existing_anti(pod, anti))

    def rejects(self, pod: PodState, node: NodeState) -> bool:
        """The two plugins' Filter refuses the pod on the node, in the snapshot as it is now."""
        hit = self._filters.get(pod.key)
        if hit is None or hit[0] != self.version:
            f = self._filter(pod) if self.depends(pod) else None
            if len(self._filters) > 4096:
                self._filters.clear()
            hit = self._filters[pod.key] = (self.version, f)
        return hit[1] is not None and hit[1](node) is not None

    def _filter(self, pod: PodState) -> NodeFilter | None:
        nodes = self.snapshot_nodes()
        spread = pod_topology_spread.pre_filter(pod, nodes, self, self.spread_counts)
        affinity = inter_pod_affinity.pre_filter(pod, nodes, self, self._with_anti())
        if spread is None or affinity is None:
            return spread or affinity

        def both(node: NodeState) -> Status | None:
            status = spread(node)
            return status if status is not None else affinity(node)
        return both
