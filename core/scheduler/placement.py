"""The pods on each node within a decision, and the Filters that read them: PodTopologySpread and
InterPodAffinity (plugins/pod_topology_spread.py, plugins/inter_pod_affinity.py).

Why apart: every other filter is a function of (pod, node, node usage); these two depend on which pods are
where, including pods bound or held earlier in the same decision and pods a preemption dry run took off.
Cycle._count, through which every such change goes, appends it to `Cycle.moves`; `CyclePods` folds that
journal into a per-node pod map lazily (built on first use in a decision, then only the new moves are
applied; a rollback, which cuts the journal, makes it start over).

`attempt_filter` runs both PreFilters for one pod attempt and answers with a node filter, or None when the
pod depends on no other pod (no DoNotSchedule constraint, no required (anti-)affinity term of its own, and no
placed pod's required anti-affinity matching it): such a pod keeps every fast path of the node search.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

from ..kube.affinity import pod_namespace
from ..state.cluster import RUNNING, ClusterState, NodeState, PodState
from .affinity_scores import AffinityScoreCounts
from .cycle import Cycle
from .framework import Status
from .plugins import inter_pod_affinity, pod_topology_spread
from .plugins.pod_topology_spread import Constraint

NodeFilter = Callable[[NodeState], Status | None]


class AntiIndex:
    """The pods of a view with required pod anti-affinity, each pod looked at once, kept by the scheduler across
    decisions. Why it can be: the fold only ever adds pods to `ClusterState.pods`, in creation order, and a pod's
    affinity never changes (an update may not add one), so each decision looks only at the pods created since
    the last (another view object: start over)."""

    def __init__(self, predicate: Callable[[PodState], bool] | None = None) -> None:
        self._view: ClusterState | None = None
        self._seen = 0
        self.keys: list[str] = []
        self._predicate = inter_pod_affinity.has_required_anti if predicate is None else predicate
        self._answers: dict[str, tuple[dict[str, Any], bool]] = {}  # pod key -> (manifest, predicate's answer)
        # the pods' parsed (anti-)affinity terms, kept while a pod's manifest object is the same (bounded)
        self.terms: inter_pod_affinity.TermMemo = {}
        # the pods with pod (anti-)affinity of any kind, indexed alike (InterPodAffinity's PreScore)
        self.affinity = None if predicate is not None else AntiIndex(inter_pod_affinity.has_pod_affinity)

    def has(self, pod: PodState) -> bool:
        """The predicate's answer for the pod, kept while its manifest object is the same: a decision's moves
        are replayed after every rollback (a PodGroup's trials), each asking it again."""
        hit = self._answers.get(pod.key)
        if hit is not None and hit[0] is pod.manifest:
            return hit[1]
        if len(self._answers) > 262_144:
            self._answers.clear()
        out = self._predicate(pod)
        self._answers[pod.key] = (pod.manifest, out)
        return out

    def of(self, view: ClusterState) -> list[str]:
        pods = view.pods
        if view is not self._view or len(pods) < self._seen:
            self._view, self._seen, self.keys = view, 0, []
        if len(pods) > self._seen:
            self.keys += [p.key for p in islice(pods.values(), self._seen, None)
                          if self._predicate(p)]
            self._seen = len(pods)
        return self.keys


class CyclePods:
    """node -> its pods in the decision (pod key -> PodState), and the placed pods with required
    anti-affinity. Each part is built on first use: most decisions need neither. `index`: the scheduler's
    AntiIndex, kept across decisions."""

    def __init__(self, cycle: Cycle, index: AntiIndex | None = None) -> None:
        self.cycle = cycle
        self._index = AntiIndex() if index is None else index
        self._pods: dict[str, dict[str, PodState]] | None = None
        self._anti: dict[str, tuple[PodState, str]] | None = None  # pod key -> (pod, node)
        self._affinity: dict[str, dict[str, PodState]] | None = None  # node -> its pods with pod (anti-)affinity
        self._epoch = cycle.moves_epoch
        self._applied = {"pods": 0, "anti": 0}
        self._ready: list[NodeState] | None = None
        # upstream's rules (release profiles, set by the scheduler): every node of the snapshot is a topology
        # domain (`domain_nodes`), and nominated pods count per node, filters run with and without them
        # (`attempt_filter`); False: the legacy model (Ready nodes only, nominated pods count everywhere)
        self.upstream = False
        # PodTopologySpread's counts per (namespace, selector, key, keys, inclusion): [node -> value, value ->
        # count, moves applied]
        self._spread: dict[tuple[Any, ...], list[Any]] = {}
        self._existing: dict[tuple[Any, ...], list[Any]] = {}  # InterPodAffinity's, per namespace and labels
        self._own: dict[tuple[Any, ...], list[Any]] = {}  # InterPodAffinity's, per set of terms
        self.terms = self._index.terms  # parsed terms, kept across decisions (identity-checked)
        self._scores: AffinityScoreCounts | None = None  # InterPodAffinity's PreScore counts (affinity_scores.py)

    def _has_anti(self, pod: PodState) -> bool:
        return self._index.has(pod)

    def _restart(self) -> None:
        """A rollback cut the journal: build again from the view."""
        if self._epoch != self.cycle.moves_epoch:
            self._pods = self._anti = None
            self._affinity = None
            self._spread.clear()
            self._existing.clear()
            self._own.clear()
            self._scores = None
            self._epoch = self.cycle.moves_epoch
            self._applied = {"pods": 0, "anti": 0}

    def _node_pods(self) -> dict[str, dict[str, PodState]]:
        self._restart()
        view, moves = self.cycle.view, self.cycle.moves
        if self._pods is None:
            self._pods = {name: {k: view.pods[k] for k in node.pods if k in view.pods}
                          for name, node in view.nodes.items()}
        for pod, node, sign in moves[self._applied["pods"]:]:
            on = self._pods.setdefault(node, {})
            if sign > 0:
                on[pod.key] = pod
            else:
                on.pop(pod.key, None)
        self._applied["pods"] = len(moves)
        return self._pods

    def domain_nodes(self) -> list[NodeState]:
        """The nodes whose pods and labels the two plugins count (readiness does not change within a decision).
        Upstream counts every node of the scheduler's snapshot (podtopologyspread/filtering.go calPreFilterState
        and scoring.go initPreScoreState walk `nodeInfos` = snapshot.NodeInfos().List(); interpodaffinity's
        PreFilter/PreScore likewise): a NotReady node is in it and is a spread domain unless the constraint's
        nodeTaintsPolicy is Honor and the pod does not tolerate the lifecycle controller's not-ready taint
        (pod_topology_spread.included). The legacy model (no `kubernetes` entry) counts only the Ready nodes,
        kept so that its logs never change."""
        if self._ready is None:
            nodes = self.cycle.view.nodes.values()
            self._ready = list(nodes) if self.upstream else [n for n in nodes if n.ready]
        return self._ready

    def spread_counts(self, pod: PodState, cs: list[Constraint]) -> list[dict[str, int]]:
        """pod_topology_spread.domain_counts, kept per (namespace, selector, key, the constraints' keys, the
        pod's node inclusion) for the decision and brought up to date with the moves since (read only)."""
        self._restart()
        namespace, keys = pod_namespace(pod.manifest), tuple(c.key for c in cs)
        out = []
        for c in cs:
            key = (namespace, c.selector, c.key, keys, _inclusion(pod, c))
            entry = self._spread.get(key)
            moves = self.cycle.moves
            if entry is None:
                eligible = {n.name: n.labels[c.key] for n in self.domain_nodes()
                            if pod_topology_spread.has_keys(n.labels, cs) and pod_topology_spread.included(c, pod, n)}
                node_pods = self._node_pods()
                counts = dict.fromkeys(eligible.values(), 0)
                for name, value in eligible.items():
                    counts[value] += pod_topology_spread.count_matching(node_pods.get(name, {}).values(), c.selector,
                                                                        namespace)
                entry = self._spread[key] = [eligible, counts, len(moves)]
            eligible, counts, applied = entry
            if applied < len(moves):
                for other, node, sign in moves[applied:]:
                    value = eligible.get(node)
                    if value is not None and pod_topology_spread.count_matching((other,), c.selector, namespace):
                        counts[value] += sign
                entry[2] = len(moves)
            out.append(counts)
        return out

    def eligible(self, pod: PodState, cs: list[Constraint], c: Constraint) -> dict[str, str]:
        """The constraint's eligible nodes (node -> its value), as spread_counts made them for this pod."""
        keys = tuple(x.key for x in cs)
        found: dict[str, str] = self._spread[(pod_namespace(pod.manifest), c.selector, c.key, keys,
                                              _inclusion(pod, c))][0]
        return found

    def existing(self, pod: PodState) -> dict[inter_pod_affinity.Pair, int]:
        """existingAntiAffinityCounts for pods of this namespace and labels, kept for the decision."""
        self._restart()
        meta = pod.manifest.get("metadata") or {}
        key = (pod_namespace(pod.manifest), tuple(sorted((meta.get("labels") or {}).items())))
        entry = self._existing.get(key)
        moves = self.cycle.moves
        if entry is None:
            entry = self._existing[key] = [inter_pod_affinity.existing_anti(pod, self.with_anti(), self.terms),
                                           len(moves)]
        elif entry[1] < len(moves):
            nodes = self.cycle.view.nodes
            for other, node, sign in moves[entry[1]:]:
                if self._has_anti(other) and node in nodes:
                    inter_pod_affinity.existing_anti(pod, ((other, nodes[node]),), self.terms, sign, entry[0])
            entry[1] = len(moves)
        found: dict[inter_pod_affinity.Pair, int] = entry[0]
        return found

    def own(self, affinity: list[inter_pod_affinity.Term], anti: list[inter_pod_affinity.Term]
            ) -> tuple[dict[inter_pod_affinity.Pair, int], dict[inter_pod_affinity.Pair, int]]:
        """The incoming pod's affinity and anti-affinity counts, kept per set of terms for the decision."""
        self._restart()
        key = (tuple(affinity), tuple(anti))
        entry = self._own.get(key)
        moves = self.cycle.moves
        nodes = self.cycle.view.nodes
        if entry is None:
            node_pods = self._node_pods()
            counts = inter_pod_affinity.own_counts(affinity, anti, (
                (p, n) for n in self.domain_nodes() for p in node_pods.get(n.name, {}).values()))
            entry = self._own[key] = [counts, len(moves)]
        elif entry[1] < len(moves):
            placed = [(other, nodes[node], sign) for other, node, sign in moves[entry[1]:] if node in nodes]
            for other, node_state, sign in placed:
                inter_pod_affinity.own_counts(affinity, anti, ((other, node_state),), sign, entry[0])
            entry[1] = len(moves)
        out: tuple[dict[inter_pod_affinity.Pair, int], dict[inter_pod_affinity.Pair, int]] = entry[0]
        return out

    def everywhere(self, pod: PodState, cs: list[Constraint]) -> bool:
        """Whether every domain node is eligible for each constraint (has all the keys, passes the inclusion
        policies): read from spread_counts' entries, made for this pod just before."""
        namespace, keys = pod_namespace(pod.manifest), tuple(c.key for c in cs)
        ready = len(self.domain_nodes())
        for c in cs:
            entry = self._spread.get((namespace, c.selector, c.key, keys, _inclusion(pod, c)))
            if entry is None or len(entry[0]) != ready:
                return False
        return True

    def on(self, node: str) -> list[PodState]:
        return list(self._node_pods().get(node, {}).values())

    def with_affinity(self) -> dict[str, dict[str, PodState]]:
        """node -> its pods in the decision that have pod affinity or anti-affinity terms (upstream's
        HavePodsWithAffinityList): InterPodAffinity's PreScore of a pod without preferred terms of its own reads
        only these (the other pods add nothing to any score), kept up to date with the moves like `on`."""
        self._restart()
        view, moves = self.cycle.view, self.cycle.moves
        index = self._index.affinity
        if index is None:  # an index made for another predicate (not the scheduler's)
            index = self._index.affinity = AntiIndex(inter_pod_affinity.has_pod_affinity)
        if self._affinity is None:  # as _node_pods: the view's placements (node.pods), then every move
            self._affinity, self._applied["affinity"] = {}, 0
            for k in index.of(view):
                p = view.pods[k]
                node = view.nodes.get(p.node) if p.node is not None else None
                if node is not None and k in node.pods:
                    self._affinity.setdefault(node.name, {})[k] = p
        has = index.has
        for pod, name, sign in moves[self._applied["affinity"]:]:
            if sign > 0:
                if has(pod):
                    self._affinity.setdefault(name, {})[pod.key] = pod
            elif name in self._affinity:
                self._affinity[name].pop(pod.key, None)
        self._applied["affinity"] = len(moves)
        return self._affinity

    def on_nodes(self) -> dict[str, dict[str, PodState]]:
        """node -> its pods in the decision (pod key -> pod), brought up to date with the moves (read only)."""
        return self._node_pods()

    def affinity_scores(self) -> AffinityScoreCounts:
        """InterPodAffinity's PreScore counts for the decision (affinity_scores.py), started over after a
        rollback or when the domain nodes change (`upstream` set)."""
        self._restart()
        if self._scores is None or self._scores.upstream != self.upstream:
            index = self._index.affinity
            if index is None:
                index = self._index.affinity = AntiIndex(inter_pod_affinity.has_pod_affinity)
            self._scores = AffinityScoreCounts(self.cycle, self, index.has, self.terms)
        return self._scores

    def with_anti(self) -> list[tuple[PodState, NodeState]]:
        self._restart()
        view, moves = self.cycle.view, self.cycle.moves
        if self._anti is None:
            pods = view.pods
            self._anti = {k: (p, p.node) for k in self._index.of(view)
                          if (p := pods[k]).node is not None and p.phase == RUNNING}
        for pod, node, sign in moves[self._applied["anti"]:]:
            if sign > 0:
                if self._has_anti(pod):
                    self._anti[pod.key] = (pod, node)
            else:
                self._anti.pop(pod.key, None)
        self._applied["anti"] = len(moves)
        nodes = view.nodes
        return [(p, nodes[n]) for p, n in self._anti.values() if n in nodes]


def _inclusion(pod: PodState, c: Constraint) -> tuple[str, str]:
    """What a node's eligibility for the pod's constraint depends on (the inclusion policies honoured)."""
    spec = pod.manifest.get("spec") or {}
    return (repr((pod.node_selector, (spec.get("affinity") or {}).get("nodeAffinity"))) if c.affinity_honor else "",
            repr(pod.tolerations) if c.taints_honor else "")


def cycle_pods(cycle: Cycle, memo: AntiIndex | None = None, upstream: bool | None = None) -> CyclePods:
    """The decision's pod view, made once per cycle (kept in the cycle). `upstream`: set by the scheduler
    when it makes the cycle (True in release profiles: `CyclePods.upstream`)."""
    pods = cycle.pod_view
    if pods is None:
        pods = cycle.pod_view = CyclePods(cycle, memo)
    if upstream is not None:
        assert isinstance(pods, CyclePods)
        pods.upstream, pods._ready = upstream, None
    assert isinstance(pods, CyclePods)
    return pods


def depends(cycle: Cycle, pod: PodState, memo: AntiIndex | None = None) -> bool:
    """Whether the pod's Filter answer depends on other pods' placement (else every fast path holds)."""
    if pod_topology_spread.has_required(pod) or inter_pod_affinity.has_required(pod):
        return True
    with_anti = cycle_pods(cycle, memo).with_anti()
    return bool(with_anti) and bool(cycle_pods(cycle, memo).existing(pod))


def attempt_filter(cycle: Cycle, pod: PodState, memo: AntiIndex | None = None) -> NodeFilter | None:
    """PodTopologySpread's and InterPodAffinity's PreFilter for this attempt, as one node filter (spread
    first, upstream's order); None when both Skip. In release profiles with pods nominated in the decision:
    upstream's nominated-pod rule (`_per_node_nominated`)."""
    if not depends(cycle, pod, memo):
        return None
    pods = cycle_pods(cycle)
    if pods.upstream and cycle.nominated:
        return _per_node_nominated(pods, pod)
    ready = pods.domain_nodes()
    spread = pod_topology_spread.pre_filter(pod, ready, pods, pods.spread_counts)
    if spread is not None and spread.rejects_nothing(pods.everywhere(pod, spread.constraints)):
        spread = None  # no node can fail it in this attempt: the node search keeps its fast paths
    return _both(spread, inter_pod_affinity.pre_filter(pod, ready, pods, (), pods, pods.terms))


def _both(spread: NodeFilter | None, affinity: NodeFilter | None) -> NodeFilter | None:
    if spread is None or affinity is None:
        return spread or affinity

    def both(node: NodeState) -> Status | None:
        status = spread(node)
        return status if status is not None else affinity(node)
    return both


Change = tuple[PodState, NodeState, int]


class _Adjusted:
    """The decision's kept counts with `changes` (pod, node, +1/-1) applied to copies: what upstream's
    PreFilter state is after its AddPod/RemovePod extensions (podtopologyspread's and interpodaffinity's
    updateWithPod), for one node's filters."""

    def __init__(self, pods: CyclePods, changes: list[Change]) -> None:
        self.pods, self.changes = pods, changes

    def spread_counts(self, pod: PodState, cs: list[Constraint]) -> list[dict[str, int]]:
        counts = [dict(c) for c in self.pods.spread_counts(pod, cs)]
        namespace = pod_namespace(pod.manifest)
        for i, c in enumerate(cs):
            eligible = self.pods.eligible(pod, cs, c)
            for other, node, sign in self.changes:
                value = eligible.get(node.name)
                if value is not None and pod_topology_spread.count_matching((other,), c.selector, namespace):
                    counts[i][value] += sign
        return counts

    def existing(self, pod: PodState) -> dict[inter_pod_affinity.Pair, int]:
        counts = dict(self.pods.existing(pod))
        for other, node, sign in self.changes:
            if inter_pod_affinity.has_required_anti(other):
                inter_pod_affinity.existing_anti(pod, ((other, node),), self.pods.terms, sign, counts)
        return counts

    def own(self, affinity: list[inter_pod_affinity.Term], anti: list[inter_pod_affinity.Term]
            ) -> tuple[dict[inter_pod_affinity.Pair, int], dict[inter_pod_affinity.Pair, int]]:
        aff, anti_counts = (dict(c) for c in self.pods.own(affinity, anti))
        for other, node, sign in self.changes:
            inter_pod_affinity.own_counts(affinity, anti, ((other, node),), sign, (aff, anti_counts))
        return aff, anti_counts

    def filter(self, pod: PodState) -> NodeFilter | None:
        ready, pods = self.pods.domain_nodes(), self.pods
        return _both(pod_topology_spread.pre_filter(pod, ready, pods, self.spread_counts),
                     inter_pod_affinity.pre_filter(pod, ready, pods, (), self, pods.terms))


def _per_node_nominated(pods: CyclePods, pod: PodState) -> NodeFilter:
    """Upstream's RunFilterPluginsWithNominatedPods (pkg/scheduler/framework/runtime/framework.go): for the node
    being filtered, the pods nominated to THAT node with a priority at least the pod's (not the pod itself:
    addGENominatedPods) are added to the PreFilter state (AddPod) and the filters run; if they were added and
    passed, the filters run again without them, and the node must pass both. So a nominated pod counts for
    spread and affinity only where it is nominated and only while that node is filtered (not in the global
    minimum, not for its zone's other nodes), and a pod's affinity cannot be met by a nominated pod alone.
    dralab's decision counts every kept nomination as placed (Cycle.moves): all of them are taken off for the
    second pass, and the counted ones of the node put back for the first."""
    view, nodes = pods.cycle.view, pods.cycle.view.nodes
    gone: list[Change] = [(view.pods[k], nodes[n], -1) for k, n in pods.cycle.nominated.items() if n in nodes]
    counted: dict[str, list[Change]] = {}
    for other, node, _ in gone:
        if other.key != pod.key and other.priority >= pod.priority:
            counted.setdefault(node.name, []).append((other, node, 1))
    without = _Adjusted(pods, gone).filter(pod)

    def per_node(node: NodeState) -> Status | None:
        added = counted.get(node.name)
        if added:
            with_them = _Adjusted(pods, gone + added).filter(pod)
            status = None if with_them is None else with_them(node)
            if status is not None:
                return status
        return None if without is None else without(node)
    return per_node


class PlacementFilter:
    """The two plugins at PreFilter and Filter for the plain run's profile (profile.py): PreFilter binds
    the attempt's node filter, Filter asks it."""

    def __init__(self) -> None:
        self._filter: NodeFilter | None = None

    def pre_filter(self, state: Any, pod: PodState) -> Status | None:
        self._filter = attempt_filter(state.cycle, pod)
        return None

    def __call__(self, pod: PodState, node: NodeState, used: dict[str, int]) -> Status | None:
        return None if self._filter is None else self._filter(node)


def spread_score(args: dict[str, Any] | None = None) -> pod_topology_spread.SpreadScore:
    """PodTopologySpread's score object bound to the decision's pod view (for the score framework)."""
    return pod_topology_spread.SpreadScore(args, cycle_pods)


def affinity_score(args: dict[str, Any] | None = None) -> inter_pod_affinity.AffinityScore:
    """InterPodAffinity's score object bound to the decision's pod view (for the score framework)."""
    return inter_pod_affinity.AffinityScore(args, cycle_pods)
