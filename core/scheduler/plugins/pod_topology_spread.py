"""PodTopologySpread (pkg/scheduler/framework/plugins/podtopologyspread): spec.topologySpreadConstraints.

Filter (whenUnsatisfiable: DoNotSchedule; filtering.go): at PreFilter, for each constraint, the pods matching
its selector in the pod's namespace are counted per topology domain over the eligible nodes: nodes carrying
every constraint's topologyKey, and passing the pod's nodeSelector / required node affinity
(nodeAffinityPolicy Honor, the default) and its taint tolerations (nodeTaintsPolicy Honor; default Ignore). A
node passes when, for every constraint, `matching pods in its domain + 1 if the pod matches its own selector
- the global minimum <= maxSkew`; the global minimum is the smallest domain count, 0 while there are fewer
domains than minDomains (the MinDomainsInPodTopologySpread gate is GA and gone in 1.34-1.37; so are
NodeInclusionPolicyInPodTopologySpread's). A node without one of the keys fails UnschedulableAndUnresolvable
("...(missing required label)"), a skew too large Unschedulable (preemption or a new node may help).

Score (whenUnsatisfiable: ScheduleAnyway; scoring.go): `SpreadScore`, in the duck-typed shape the weighted
score framework takes (pre_score / score / normalize): per node the sum over constraints of `count * log(size
+ 2) + maxSkew - 1` (size: the constraint's domains among the filtered nodes, hostname: the nodes), rounded;
normalized as `100 * (max + min - s) / max` (0 for nodes missing a key, 100 for all when max is 0).

Cluster default constraints (args defaultConstraints, defaultingType System | List; plugin.go, common.go
buildDefaultConstraints): they apply only to a pod without constraints of its own, with the selector
helper.DefaultSelector (plugins/helper/spread.go) builds: the selectors of the Services in the pod's namespace
that select it, plus that of its controller (metav1.GetControllerOf) when the reference is a v1
ReplicationController or an apps/v1 ReplicaSet or StatefulSet AND the lister finds that object by name (a
missing object adds nothing); an empty selector means no default constraint. Why this never applies in dralab,
exactly as upstream would on the same cluster: a scenario holds no Service, ReplicationController, ReplicaSet
or StatefulSet objects (the loader has no such kinds), so a pod's controller reference of those kinds names an
object upstream's lister would not find either; the one controller dralab keeps objects for, Job
(kube/jobs.py), is not a kind DefaultSelector looks at; the workload controllers' replacement pods
(cluster/workload_controllers.py) keep the failed pod's reference, no selector. Building a selector from the
pod's own labels would be a guess upstream does not make (a ReplicaSet's selector is usually a subset of its
pods' labels). So the System defaults (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) never change a
dralab score. `check_args` still checks the arguments as upstream's validation does.

Pods counted: those on the node in the decision (bound before it, bound or held earlier in it, minus those a
preemption dry run took off: the pod view of scheduler/placement.py), in the pod's namespace, not terminating
(metadata.deletionTimestamp; common.go countPodsMatchSelector). Nodes looked at: in release profiles every node, Ready
or not, as upstream's snapshot (a NotReady node is a domain unless nodeTaintsPolicy Honor and the pod does
not tolerate the not-ready taint: `included`); the legacy model counts the Ready ones only (placement.py
CyclePods.domain_nodes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...kube.affinity import Selector, compile_selector, merged_selector, pod_labels, pod_namespace, selector_matches
from ...kube.fields import FieldError, check_fields, expect_enum, expect_int, expect_list, expect_map, index, join
from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable, unschedulable
from .node_affinity import node_selector
from .taint_toleration import taints, tolerates

NAME = "PodTopologySpread"
EXTENSION_POINTS = (ExtensionPoint.PRE_FILTER, ExtensionPoint.FILTER, ExtensionPoint.PRE_SCORE,
                    ExtensionPoint.SCORE)
CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
LABEL_NOT_MATCH = CONSTRAINTS_NOT_MATCH + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
MAX_NODE_SCORE = 100
_NOT_MATCH = unschedulable(CONSTRAINTS_NOT_MATCH, "spread", NAME)
# missing label: only another node (or other labels) can help, as NodeAffinity's mismatch ("selector")
_LABEL = unresolvable(LABEL_NOT_MATCH, "selector", NAME)
SYSTEM_DEFAULTS = ({"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
                   {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"})


class NodePods(Protocol):
    """The pods on each node in the decision (scheduler/placement.py)."""

    def on(self, node: str, /) -> Iterable[PodState]: ...


class DomainPods(NodePods, Protocol):
    """The decision's pod view with the nodes it counts (placement.py CyclePods.domain_nodes)."""

    def domain_nodes(self) -> list[NodeState]: ...


@dataclass(frozen=True, slots=True)
class Constraint:
    """A constraint as the plugin reads it (common.go topologySpreadConstraint): its selector parsed and
    matchLabelKeys merged in."""

    max_skew: int
    key: str
    selector: Selector
    min_domains: int = 1
    affinity_honor: bool = True
    taints_honor: bool = False


def constraints(pod: PodState, when: str) -> list[Constraint]:
    """The pod's own constraints with this whenUnsatisfiable (filterTopologySpreadConstraints). The cluster
    defaults never apply in dralab (see the module's docstring)."""
    labels = pod_labels(pod.manifest)
    out = []
    for c in pod.manifest.get("spec", {}).get("topologySpreadConstraints") or ():
        if c.get("whenUnsatisfiable") != when:
            continue
        selector = merged_selector(compile_selector(c.get("labelSelector")), c.get("matchLabelKeys"), labels)
        out.append(Constraint(int(c["maxSkew"]), str(c["topologyKey"]), selector, int(c.get("minDomains") or 1),
                              c.get("nodeAffinityPolicy", "Honor") == "Honor",
                              c.get("nodeTaintsPolicy", "Ignore") == "Honor"))
    return out


def has_required(pod: PodState) -> bool:
    """Whether the pod has a DoNotSchedule constraint (the Filter's work depends on other pods)."""
    return any(c.get("whenUnsatisfiable") == "DoNotSchedule"
               for c in pod.manifest.get("spec", {}).get("topologySpreadConstraints") or ())


def count_matching(pods: Iterable[PodState], selector: Selector, namespace: str) -> int:
    """countPodsMatchSelector: not terminating, in the namespace, selected."""
    n = 0
    for p in pods:
        meta = p.manifest.get("metadata") or {}
        if meta.get("deletionTimestamp") or (meta.get("namespace") or "default") != namespace:
            continue
        if selector_matches(selector, meta.get("labels") or {}):
            n += 1
    return n


def included(c: Constraint, pod: PodState, node: NodeState) -> bool:
    """matchNodeInclusionPolicies: the pod's node affinity (Honor) and its tolerations (Honor). Upstream
    checks the node's NoSchedule/NoExecute taints (helper.DoNotScheduleTaintsFilterFunc); a NotReady node
    carries the node lifecycle controller's `node.kubernetes.io/not-ready:NoSchedule` (TaintNodesByCondition),
    which dralab's node manifests do not show, so it is added here: such a node is a domain under Honor only
    for a pod tolerating it (the admission-added NoExecute tolerations do not). Under Ignore (the default) it
    is a domain."""
    empty: dict[str, int] = {}
    if c.affinity_honor and node_selector(pod, node, empty) is not None:
        return False
    if not c.taints_honor:
        return True
    if not node.ready and not tolerates(NOT_READY_TAINT, pod.tolerations):
        return False
    return taints(pod, node, empty) is None


def has_keys(labels: Mapping[str, str], cs: list[Constraint]) -> bool:
    return all(c.key in labels for c in cs)


@dataclass
class SpreadFilter:
    """PreFilter's state (filtering.go preFilterState) and the Filter over it."""

    constraints: list[Constraint]
    counts: list[dict[str, int]]  # per constraint: topology value -> matching pods
    minimum: list[int]  # per constraint: the global minimum (minDomains taken into account)
    self_match: list[int]

    def __post_init__(self) -> None:
        # per constraint: its key, the domains whose skew would be too large, and whether a domain without a
        # count (a node not eligible) would be: the per-node check is then two lookups
        self._checks = [(c.key, {v for v, n in self.counts[i].items() if n + self.self_match[i] - self.minimum[i]
                                 > c.max_skew}, self.self_match[i] - self.minimum[i] > c.max_skew, self.counts[i])
                        for i, c in enumerate(self.constraints)]

    def rejects_nothing(self, everywhere: bool) -> bool:
        """Whether no node can fail: no domain over the skew, and either every node is an eligible one with all
        the keys (`everywhere`) or a node outside the counted domains would pass too (then the node search
        may treat the pod as depending on nothing, for this attempt)."""
        return everywhere and all(not too_many for _, too_many, _, _ in self._checks)

    def __call__(self, node: NodeState) -> Status | None:
        labels = node.labels
        for key, too_many, empty_too_many, counts in self._checks:
            value = labels.get(key)
            if value is None:
                return _LABEL
            if value in too_many or (empty_too_many and value not in counts):
                return _NOT_MATCH
        return None


Counter = Callable[[PodState, list[Constraint]], list[dict[str, int]]]


def domain_counts(pod: PodState, cs: list[Constraint], nodes: Iterable[NodeState], pods: NodePods
                  ) -> list[dict[str, int]]:
    """Per constraint: topology value -> matching pods, over the eligible nodes (calPreFilterState's count)."""
    namespace = pod_namespace(pod.manifest)
    counts: list[dict[str, int]] = [{} for _ in cs]
    for node in nodes:
        labels = node.labels
        if not has_keys(labels, cs):
            continue
        on = None
        for i, c in enumerate(cs):
            if not included(c, pod, node):
                continue
            if on is None:
                on = list(pods.on(node.name))
            value = labels[c.key]
            counts[i][value] = counts[i].get(value, 0) + count_matching(on, c.selector, namespace)
    return counts


def pre_filter(pod: PodState, nodes: Iterable[NodeState], pods: NodePods, counter: Counter | None = None
               ) -> SpreadFilter | None:
    """calPreFilterState; None: Skip (no DoNotSchedule constraint). `counter`: the counts kept incrementally
    within a decision (scheduler/placement.py), else counted here."""
    cs = constraints(pod, "DoNotSchedule")
    if not cs:
        return None
    counts = counter(pod, cs) if counter is not None else domain_counts(pod, cs, nodes, pods)
    minimum = [0 if len(counts[i]) < c.min_domains else min(counts[i].values()) for i, c in enumerate(cs)]
    labels = pod_labels(pod.manifest)
    return SpreadFilter(cs, counts, minimum, [1 if selector_matches(c.selector, labels) else 0 for c in cs])


# --- Score ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Domains:
    """initPreScoreState's first pass over a set of nodes for a set of keys (SpreadScore._domains_of)."""

    ignored: frozenset[str]  # the nodes missing one of the keys
    values: list[tuple[str, ...]]  # per key: its values on the other nodes, in node order (none for hostname)
    of_node: dict[str, tuple[str, ...]]  # each other node's values of the keys


@dataclass
class ScoreState:
    """preScoreState: the soft constraints, the nodes missing a key, counts per domain, weights."""

    constraints: list[Constraint]
    ignored: set[str] | frozenset[str]
    counts: list[dict[str, int]]
    weights: list[float]
    namespace: str
    pods: NodePods
    of_node: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # node -> its values of the keys
    # a node's score when no constraint is on the hostname: a function of its values alone (`score`)
    by_values: dict[tuple[str, ...], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pointwise_values = all(c.key != HOSTNAME for c in self.constraints)


class SpreadScore:
    """PodTopologySpread's Score for one pod attempt (shape of the score framework, duck-typed)."""

    NAME = NAME
    # initPreScoreState reads the nodes that passed Filter (podtopologyspread/scoring.go: `filteredNodes` give
    # the ignored nodes, the topology values counted and TopologyNormalizingWeight, `len(filteredNodes) -
    # len(IgnoredNodes)` for hostname): scoring.py runs PreScore with the found nodes
    FILTERED_PRESCORE = True

    def skips(self, pod: PodState) -> bool:
        """PreScore's Skip: no ScheduleAnyway constraint (the system defaults never apply in dralab)."""
        return not constraints(pod, "ScheduleAnyway")

    def __init__(self, args: Mapping[str, Any] | None = None,
                 node_pods: Callable[[Any], DomainPods] | None = None) -> None:
        args = args or {}
        self.system_defaulted = args.get("defaultingType", "System") == "System"
        self.node_pods = node_pods  # cycle -> its pod view (scheduler/placement.py); set by the caller
        # the constraints' keys -> node name -> (its manifest when read, its values of the keys or None when it
        # misses one), a cache (`_domains_of`)
        self._domains: dict[tuple[str, ...], dict[str, tuple[Any, tuple[str, ...] | None]]] = {}

    def _domains_of(self, keys: tuple[str, ...], nodes: list[NodeState]) -> Domains:
        """initPreScoreState's first pass over the nodes that passed Filter (the nodes missing one of the keys:
        ignored; each constraint's domain values among the others, in node order, none for hostname; each
        node's values of the keys, for `score_all`). A node's values are a function of its labels alone: kept
        per set of keys and node while the node holds the same manifest object (the fold replaces a manifest,
        never changes it), so a pod's pass is one identity check and a few dict operations per node."""
        known = self._domains.get(keys)
        if known is None:
            if len(self._domains) > 64:
                self._domains.clear()
            known = self._domains[keys] = {}
        elif len(known) > 100_000:  # nodes come and go over a long run: bounded
            known.clear()
        ignored: set[str] = set()
        values: list[dict[str, None]] = [{} for _ in keys]
        zoned = [i for i, k in enumerate(keys) if k != HOSTNAME]
        of_node: dict[str, tuple[str, ...]] = {}
        for node in nodes:
            name, manifest = node.name, node.manifest
            hit = known.get(name)
            if hit is None or hit[0] is not manifest:
                labels = node.labels
                hit = known[name] = (manifest, tuple(labels[k] for k in keys)
                                     if all(k in labels for k in keys) else None)
            of = hit[1]
            if of is None:
                ignored.add(name)
                continue
            of_node[name] = of
            for i in zoned:
                values[i][of[i]] = None
        return Domains(frozenset(ignored), [tuple(v) for v in values], of_node)

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> ScoreState | None:
        """initPreScoreState and the counts over all nodes; None: Skip. `nodes`: those that passed Filter."""
        cs = constraints(pod, "ScheduleAnyway")
        if not cs:
            return None  # defaults: never in dralab (no Service/RC/RS/SS selector)
        assert self.node_pods is not None, "SpreadScore needs the decision's pod view"
        pods = self.node_pods(cycle)
        # the pod's own constraints (defaults, which relax it, never apply): every key required
        domains = self._domains_of(tuple(c.key for c in cs), nodes)
        ignored = domains.ignored
        counts: list[dict[str, int]] = [dict.fromkeys(v, 0) for v in domains.values]
        weights = [math.log((len(nodes) - len(ignored) if c.key == HOSTNAME else len(counts[i])) + 2)
                   for i, c in enumerate(cs)]
        namespace = pod_namespace(pod.manifest)
        kept: Counter | None = getattr(pods, "spread_counts", None)
        if all(c.key == HOSTNAME for c in cs):
            # counted per node in `score`
            return ScoreState(cs, ignored, counts, weights, namespace, pods, domains.of_node)
        if kept is not None:
            # the Filter side's counts (placement.py CyclePods.spread_counts: the same eligible domain nodes,
            # has_keys over every constraint + `included`, kept incrementally within the decision) restricted
            # to the filtered nodes' values: the walk below gives these, at one pass over every pod per pod
            for i, full in enumerate(kept(pod, cs)):
                if cs[i].key != HOSTNAME:
                    counts[i] = {value: full.get(value, 0) for value in counts[i]}
            return ScoreState(cs, ignored, counts, weights, namespace, pods, domains.of_node)
        for node in pods.domain_nodes():  # the Ready ones (legacy model) or all (placement.py domain_nodes)
            labels = node.labels
            if not has_keys(labels, cs):
                continue
            on = None
            for i, c in enumerate(cs):
                if c.key == HOSTNAME or not included(c, pod, node):
                    continue
                value = labels.get(c.key, "")
                if value not in counts[i]:
                    continue
                if on is None:
                    on = list(pods.on(node.name))
                counts[i][value] += count_matching(on, c.selector, namespace)
        return ScoreState(cs, ignored, counts, weights, namespace, pods, domains.of_node)

    def score(self, state: ScoreState, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        if node.name in state.ignored:
            return 0
        labels = node.labels
        if state.pointwise_values:
            # every key present (not ignored): the score is a function of the node's values, the same float
            # sum in the same order whichever node gives them
            values = tuple(labels[c.key] for c in state.constraints)
            hit = state.by_values.get(values)
            if hit is None:
                hit = state.by_values[values] = self._score(state, node, labels)
            return hit
        return self._score(state, node, labels)

    def score_all(self, state: ScoreState, pod: PodState, found: list[tuple[str, NodeState, dict[str, int]]]
                  ) -> dict[str, int]:
        """`score` on each found node (scoring.PodScore.rank): without a hostname constraint, each node's
        values of the keys, read once per set of nodes (`_domains_of`), give its score, made once per values."""
        if not state.pointwise_values:
            return {name: self.score(state, pod, node, used) for name, node, used in found}
        of_node, memo = state.of_node, state.by_values
        out: dict[str, int] = {}
        for name, node, _ in found:
            values = of_node.get(name)
            if values is None:  # missing a key (ignored)
                out[name] = 0
                continue
            hit = memo.get(values)
            if hit is None:
                hit = memo[values] = self._score(state, node, node.labels)
            out[name] = hit
        return out

    def _score(self, state: ScoreState, node: NodeState, labels: Mapping[str, str]) -> int:
        total = 0.0
        for i, c in enumerate(state.constraints):
            value = labels.get(c.key)
            if value is None:
                continue
            if c.key == HOSTNAME:
                cnt = count_matching(state.pods.on(node.name), c.selector, state.namespace)
            else:
                cnt = state.counts[i][value]
            total += cnt * state.weights[i] + (c.max_skew - 1)
        return _round(total)

    def normalize(self, state: ScoreState, scores: dict[str, int]) -> None:
        kept = [s for n, s in scores.items() if n not in state.ignored]
        low, high = (min(kept), max(kept)) if kept else (0, 0)
        for name, s in scores.items():
            if name in state.ignored:
                scores[name] = 0
            elif high == 0:
                scores[name] = MAX_NODE_SCORE
            else:
                scores[name] = MAX_NODE_SCORE * (high + low - s) // high


def _round(x: float) -> int:
    """Go's math.Round: half away from zero (Python's round is half to even)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def score_plugin(args: dict[str, Any] | None = None) -> SpreadScore:
    return SpreadScore(args)


def check_args(args: dict[str, Any], path: str) -> None:
    """PodTopologySpreadArgs validation (pkg/scheduler/apis/config/validation): defaultingType System | List;
    with System no defaultConstraints; each default constraint a valid constraint without labelSelector
    (and without matchLabelKeys), no duplicate (topologyKey, whenUnsatisfiable)."""
    obj = expect_map(args, path)
    check_fields(obj, path, ("defaultConstraints", "defaultingType"))
    kind = expect_enum(obj.get("defaultingType", "System"), join(path, "defaultingType"), ("System", "List"))
    defaults = expect_list(obj.get("defaultConstraints") or [], join(path, "defaultConstraints"))
    if kind == "System" and defaults:
        raise FieldError(join(path, "defaultConstraints"), "when .defaultingType is \"System\", "
                                                           ".defaultConstraints must be empty")
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(defaults):
        c_path = index(join(path, "defaultConstraints"), i)
        c = expect_map(item, c_path)
        check_fields(c, c_path, ("maxSkew", "topologyKey", "whenUnsatisfiable", "minDomains", "nodeAffinityPolicy",
                                 "nodeTaintsPolicy"), ("maxSkew", "topologyKey", "whenUnsatisfiable"))
        expect_int(c["maxSkew"], join(c_path, "maxSkew"), minimum=1)
        when = expect_enum(c["whenUnsatisfiable"], join(c_path, "whenUnsatisfiable"),
                           ("DoNotSchedule", "ScheduleAnyway"))
        key = str(c["topologyKey"])
        if not key:
            raise FieldError(join(c_path, "topologyKey"), "can not be empty")
        if (key, when) in seen:
            raise FieldError(c_path, f"duplicate {{{key}, {when}}}")
        seen.add((key, when))
