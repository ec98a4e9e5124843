"""InterPodAffinity (pkg/scheduler/framework/plugins/interpodaffinity): spec.affinity.podAffinity and
podAntiAffinity.

Filter (filtering.go): at PreFilter three counts per topology pair (key, value) are made over the pods on the
nodes in the decision (scheduler/placement.py's view: bound before it, bound or held earlier in it, minus a
preemption dry run's victims):
- existing pods' required anti-affinity terms that match the incoming pod (existingAntiAffinityCounts);
- for the incoming pod's required affinity terms: pods matching ALL of them count once per term;
- for its required anti-affinity terms: pods matching each term.
A node fails, in this order (upstream's codes and reasons):
- "node(s) didn't match pod affinity rules" (UnschedulableAndUnresolvable upstream): it lacks a term's
  topologyKey, or a term's pair has no matching pod, unless no pod in the cluster matches any term and the
  pod matches all its own terms (the first pod of a group may self-match);
- "node(s) didn't match pod anti-affinity rules" (Unschedulable): a term's pair has a matching pod;
- "node(s) didn't satisfy existing pods anti-affinity rules" (Unschedulable): one of the node's label pairs has
  an existing pod's anti-affinity against the incoming pod.
dralab's pending cause for all three is "affinity", which the FitError counts as Unschedulable (filters.py): the
node-level codes are upstream's (preemption skips a node failing pod affinity), while for the autoscaler a new
node of another domain, or the affinity target arriving, can still help.

A term (AffinityTerm): its labelSelector with matchLabelKeys (In) and mismatchLabelKeys (NotIn) merged, with
the owning pod's label values, as the API server does at creation (gate MatchLabelKeysInPodAffinity, GA since
1.33: 1.34-1.37 alike); its namespaces: `namespaces`, or the owning pod's own namespace when neither
`namespaces` nor a namespaceSelector is set, or every namespace with namespaceSelector {} (a non-empty one is
refused at load: kube/affinity.py).

Score (scoring.go): `AffinityScore`, in the score framework's duck-typed shape: per topology pair, the
incoming pod's preferred terms matching existing pods (+/- weight), existing pods' required affinity terms
matching it (+ hardPodAffinityWeight, default 1) and, unless ignorePreferredTermsOfExistingPods, their
preferred terms (+/- weight); a node's score is the sum over its label pairs; normalized to 0..100 by
(s - min) / (max - min).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ...kube.affinity import (
    ALL_NAMESPACES,
    Selector,
    compile_selector,
    merged_selector,
    pod_labels,
    pod_namespace,
    selector_matches,
)
from ...kube.fields import check_fields, expect_bool, expect_int, expect_map, join
from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable, unschedulable
from .pod_topology_spread import MAX_NODE_SCORE, DomainPods, NodePods

NAME = "InterPodAffinity"
EXTENSION_POINTS = (ExtensionPoint.PRE_FILTER, ExtensionPoint.FILTER, ExtensionPoint.PRE_SCORE,
                    ExtensionPoint.SCORE)
AFFINITY_NOT_MATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
_AFFINITY = unresolvable(AFFINITY_NOT_MATCH, "affinity", NAME)  # upstream: preemption cannot help
_ANTI = unschedulable(ANTI_AFFINITY_NOT_MATCH, "affinity", NAME)
_EXISTING = unschedulable(EXISTING_ANTI_AFFINITY_NOT_MATCH, "affinity", NAME)
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Term:
    """framework.AffinityTerm: namespaces (frozenset; ALL_NAMESPACES in it: every one), selector, key."""

    namespaces: frozenset[str]
    selector: Selector
    key: str
    weight: int = 0

    def matches(self, pod: PodState) -> bool:
        meta = pod.manifest.get("metadata") or {}
        if ALL_NAMESPACES not in self.namespaces and (meta.get("namespace") or "default") not in self.namespaces:
            return False
        return selector_matches(self.selector, meta.get("labels") or {})


def _term(raw: Mapping[str, Any], owner: PodState, weight: int = 0) -> Term:
    labels = pod_labels(owner.manifest)
    selector = compile_selector(raw.get("labelSelector"))
    selector = merged_selector(selector, raw.get("matchLabelKeys"), labels)
    selector = merged_selector(selector, raw.get("mismatchLabelKeys"), labels, mismatch=True)
    namespaces = set(raw.get("namespaces") or ())
    if raw.get("namespaceSelector") is not None:
        namespaces.add(ALL_NAMESPACES)  # {}: every namespace (a non-empty one is refused at load)
    elif not namespaces:
        namespaces.add(pod_namespace(owner.manifest))
    return Term(frozenset(namespaces), selector, str(raw["topologyKey"]), weight)


TermMemo = dict[tuple[str, str, str], tuple[dict[str, Any], list[Term]]]


def terms(pod: PodState, kind: str, which: str, memo: TermMemo | None = None) -> list[Term]:
    """The pod's terms of `kind` (podAffinity | podAntiAffinity), `which` (required | preferred); `memo`: kept
    per pod key while the pod has the same manifest (the fold replaces a manifest, never changes it)."""
    if memo is not None:
        hit = memo.get((pod.key, kind, which))
        if hit is not None and hit[0] is pod.manifest:
            return hit[1]
    spec = ((pod.manifest.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    if which == REQUIRED:
        out = [_term(t, pod) for t in spec.get(REQUIRED) or ()]
    else:
        out = [_term(w["podAffinityTerm"], pod, int(w["weight"])) for w in spec.get(PREFERRED) or ()]
    if memo is not None:
        if len(memo) > 65_536:
            memo.clear()
        memo[(pod.key, kind, which)] = (pod.manifest, out)
    return out


def has_required_anti(pod: PodState) -> bool:
    return bool((((pod.manifest.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}).get(REQUIRED))


def has_pod_affinity(pod: PodState) -> bool:
    """Whether the pod has pod affinity or anti-affinity of any kind (upstream's NodeInfo.PodsWithAffinity)."""
    affinity = (pod.manifest.get("spec") or {}).get("affinity") or {}
    return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def has_required(pod: PodState) -> bool:
    """Whether the pod's own required affinity or anti-affinity makes its Filter depend on other pods."""
    affinity = (pod.manifest.get("spec") or {}).get("affinity") or {}
    return any((affinity.get(kind) or {}).get(REQUIRED) for kind in ("podAffinity", "podAntiAffinity"))


def add(counts: dict[Pair, int], node: NodeState, key: str, n: int = 1) -> None:
    """topologyToMatchedTermCount.update: a pair that drops to 0 is removed (its absence is read)."""
    value = node.labels.get(key)
    if value is not None:
        pair = (key, value)
        total = counts.get(pair, 0) + n
        if total:
            counts[pair] = total
        else:
            counts.pop(pair, None)


@dataclass
class AffinityFilter:
    """PreFilter's state (filtering.go preFilterState) and the Filter over it."""

    affinity: list[Term]
    anti: list[Term]
    self_match: bool  # the pod matches all its own affinity terms
    existing: dict[Pair, int]
    affinity_counts: dict[Pair, int]
    anti_counts: dict[Pair, int]

    def __call__(self, node: NodeState) -> Status | None:
        labels = node.labels
        if self.affinity:
            exist = True
            for t in self.affinity:
                value = labels.get(t.key)
                if value is None:
                    return _AFFINITY
                if self.affinity_counts.get((t.key, value), 0) <= 0:
                    exist = False
            if not exist and not (not self.affinity_counts and self.self_match):
                return _AFFINITY
        if self.anti_counts:
            for t in self.anti:
                value = labels.get(t.key)
                if value is not None and self.anti_counts.get((t.key, value), 0) > 0:
                    return _ANTI
        if self.existing:
            for pair in labels.items():
                if self.existing.get(pair, 0) > 0:
                    return _EXISTING
        return None


def existing_anti(pod: PodState, with_anti: Iterable[tuple[PodState, NodeState]], memo: TermMemo | None = None,
                  sign: int = 1, counts: dict[Pair, int] | None = None) -> dict[Pair, int]:
    """existingAntiAffinityCounts: the placed pods' required anti-affinity terms matching `pod` (added to
    `counts`, with `sign`)."""
    counts = {} if counts is None else counts
    for other, node in with_anti:
        for t in terms(other, "podAntiAffinity", REQUIRED, memo):
            if t.matches(pod):
                add(counts, node, t.key, sign)
    return counts


def own_counts(affinity: list[Term], anti: list[Term], placed: Iterable[tuple[PodState, NodeState]], sign: int = 1,
               counts: tuple[dict[Pair, int], dict[Pair, int]] | None = None
               ) -> tuple[dict[Pair, int], dict[Pair, int]]:
    """affinityCounts (pods matching all the affinity terms, once per term) and antiAffinityCounts (pods
    matching each anti-affinity term) over `placed` (pod, its node), added to `counts` with `sign`."""
    aff, anti_counts = ({}, {}) if counts is None else counts
    for other, node in placed:
        if affinity and all(t.matches(other) for t in affinity):
            for t in affinity:
                add(aff, node, t.key, sign)
        for t in anti:
            if t.matches(other):
                add(anti_counts, node, t.key, sign)
    return aff, anti_counts


class Counts(Protocol):
    """The decision's counts kept incrementally (scheduler/placement.py)."""

    def existing(self, pod: PodState, /) -> dict[Pair, int]: ...

    def own(self, affinity: list[Term], anti: list[Term], /) -> tuple[dict[Pair, int], dict[Pair, int]]: ...


def pre_filter(pod: PodState, nodes: Iterable[NodeState], pods: NodePods,
               with_anti: Iterable[tuple[PodState, NodeState]], counter: Counts | None = None,
               memo: TermMemo | None = None) -> AffinityFilter | None:
    """PreFilter; None: Skip (no term of its own and no existing pod's anti-affinity against it). `counter`:
    counts kept within a decision (read only), else counted here."""
    affinity = terms(pod, "podAffinity", REQUIRED, memo)
    anti = terms(pod, "podAntiAffinity", REQUIRED, memo)
    existing = counter.existing(pod) if counter is not None else existing_anti(pod, with_anti, memo)
    if not affinity and not anti and not existing:
        return None
    affinity_counts: dict[Pair, int] = {}
    anti_counts: dict[Pair, int] = {}
    if affinity or anti:
        if counter is not None:
            affinity_counts, anti_counts = counter.own(affinity, anti)
        else:
            affinity_counts, anti_counts = own_counts(
                affinity, anti, ((other, node) for node in nodes for other in pods.on(node.name)))
    self_match = all(t.matches(pod) for t in affinity)
    return AffinityFilter(affinity, anti, self_match, existing, affinity_counts, anti_counts)


# --- Score ------------------------------------------------------------------------------------------------


@dataclass
class ScoreState:
    """preScoreState: the score per topology key and value."""

    scores: dict[str, dict[str, int]]


class AffinityScore:
    """InterPodAffinity's Score for one pod attempt (shape of the score framework, duck-typed)."""

    NAME = NAME

    def __init__(self, args: Mapping[str, Any] | None = None,
                 node_pods: Callable[[Any], DomainPods] | None = None) -> None:
        args = args or {}
        self.hard_weight = int(args.get("hardPodAffinityWeight", 1))
        self.ignore_existing = bool(args.get("ignorePreferredTermsOfExistingPods", False))
        self.node_pods = node_pods

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> ScoreState | None:
        """PreScore over all nodes' pods; None: Skip."""
        affinity = terms(pod, "podAffinity", PREFERRED)
        anti = terms(pod, "podAntiAffinity", PREFERRED)
        own = bool(affinity or anti)
        assert self.node_pods is not None, "AffinityScore needs the decision's pod view"
        pods = self.node_pods(cycle)
        # the decision's kept counts (scheduler/affinity_scores.py: the same sums, grouped per distinct term and
        # per class of placed pod, brought up to date with the decision's moves), else the walk below
        kept = getattr(pods, "affinity_scores", None)
        if kept is not None and getattr(pods, "with_affinity", None) is not None:
            scores = kept().scores(pod, affinity, anti, self.hard_weight, self.ignore_existing)
            return None if not own and not scores else ScoreState(scores)
        scores = {}

        def process(ts: list[Term], target: PodState, node: NodeState, sign: int, weight: int | None = None) -> None:
            for t in ts:
                if t.matches(target):
                    value = node.labels.get(t.key)
                    if value is not None:
                        by_value = scores.setdefault(t.key, {})
                        by_value[value] = by_value.get(value, 0) + (t.weight if weight is None else weight) * sign

        # scoring.go PreScore: unless the incoming pod has preferred terms, only the nodes hosting pods with
        # affinity are processed (HavePodsWithAffinityList): a pod without any adds nothing. Same sums either way.
        # The nodes counted are the pod view's domain nodes: the Ready ones (legacy model) or all (domain_nodes).
        with_affinity = getattr(pods, "with_affinity", None)
        if own or with_affinity is None:
            placed: Iterable[tuple[NodeState, Iterable[PodState]]] = (
                (node, pods.on(node.name)) for node in pods.domain_nodes())
        else:
            view_nodes, every = cycle.view.nodes, bool(getattr(pods, "upstream", False))
            placed = ((view_nodes[name], on.values()) for name, on in with_affinity().items()
                      if on and name in view_nodes and (every or view_nodes[name].ready))
        for node, on_node in placed:
            if not node.labels:
                continue
            for other in on_node:
                process(affinity, other, node, 1)
                process(anti, other, node, -1)
                if self.hard_weight > 0:
                    process(terms(other, "podAffinity", REQUIRED), pod, node, 1, self.hard_weight)
                if not self.ignore_existing:
                    process(terms(other, "podAffinity", PREFERRED), pod, node, 1)
                    process(terms(other, "podAntiAffinity", PREFERRED), pod, node, -1)
        if not own and not scores:
            return None
        return ScoreState(scores)

    def score(self, state: ScoreState, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        total = 0
        labels = node.labels
        for key, by_value in state.scores.items():
            value = labels.get(key)
            if value is not None:
                total += by_value.get(value, 0)
        return total

    def score_all(self, state: ScoreState, pod: PodState, found: list[tuple[str, NodeState, dict[str, int]]]
                  ) -> dict[str, int]:
        """`score` on each found node (scoring.PodScore.rank), in one call."""
        if len(state.scores) != 1:
            return {name: self.score(state, pod, node, used) for name, node, used in found}
        ((key, by_value),) = state.scores.items()
        out: dict[str, int] = {}
        for name, node, _ in found:
            value = node.labels.get(key)
            out[name] = 0 if value is None else by_value.get(value, 0)
        return out

    def normalize(self, state: ScoreState, scores: dict[str, int]) -> None:
        if not state.scores or not scores:
            return
        low, high = min(scores.values()), max(scores.values())
        diff = high - low
        if diff <= 0:
            for name in scores:
                scores[name] = 0
            return
        for name, s in scores.items():
            scores[name] = int(MAX_NODE_SCORE * ((s - low) / diff))


def score_plugin(args: dict[str, Any] | None = None) -> AffinityScore:
    return AffinityScore(args)


def check_args(args: dict[str, Any], path: str) -> None:
    """InterPodAffinityArgs validation: hardPodAffinityWeight in 0..100; ignorePreferredTermsOfExistingPods."""
    obj = expect_map(args, path)
    check_fields(obj, path, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"))
    if "hardPodAffinityWeight" in obj:
        expect_int(obj["hardPodAffinityWeight"], join(path, "hardPodAffinityWeight"), minimum=0, maximum=100)
    if "ignorePreferredTermsOfExistingPods" in obj:
        expect_bool(obj["ignorePreferredTermsOfExistingPods"], join(path, "ignorePreferredTermsOfExistingPods"))
