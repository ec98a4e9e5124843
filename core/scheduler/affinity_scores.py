"""InterPodAffinity's PreScore sums (plugins/inter_pod_affinity.py AffinityScore) from counts kept within a
decision, instead of re-reading every placed pod's terms for every incoming pod.

Why: upstream's PreScore (interpodaffinity/scoring.go) walks, per incoming pod, every node hosting pods with
affinity (all nodes when the incoming pod has preferred terms of its own) and every term of each pod there:
O(pods x terms) per pod. Its sums are additive over placed pods, so they can be grouped:
- the placed pods' own terms (required podAffinity, weighted hardPodAffinityWeight; preferred podAffinity and
  podAntiAffinity, +/- their weight) are counted per (term, topology value): a pod adds 1 for each of its
  terms at its node's value of the term's key. An incoming pod's sum is then, for each distinct term that
  matches it, count x weight per value: O(distinct terms x values);
- for the incoming pod's preferred terms, the placed pods are counted per class (namespace, labels: what
  Term.matches reads) and topology value of the term's key: O(classes x values) per pod.
Both are kept per decision in the pod view (placement.py CyclePods), built on first use from its maps (the
pods with affinity, every node's pods) and brought up to date with the decision's moves exactly as those maps
are (keyed per node and pod key, a re-added pod replacing itself); a rollback starts them over. A (term, value)
or (class, value) entry exists only while some pod counts there, so a sum's entry exists exactly when the walk
would have touched it (an entry that sums to 0 is kept, as upstream's map keeps it).

tests/test_affinity_score_counts.py compares every PreScore with the walk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from ..kube.affinity import ALL_NAMESPACES, selector_matches
from ..state.cluster import NodeState, PodState
from .cycle import Cycle
from .plugins.inter_pod_affinity import PREFERRED, REQUIRED, Term, TermMemo, terms

# which of a placed pod's terms (kind, required | preferred, sign), scored against the incoming pod
HARD, PREFERRED_AFFINITY, PREFERRED_ANTI = 0, 1, 2
_KINDS = ((HARD, "podAffinity", REQUIRED), (PREFERRED_AFFINITY, "podAffinity", PREFERRED),
          (PREFERRED_ANTI, "podAntiAffinity", PREFERRED))
Class = tuple[str, tuple[tuple[str, str], ...]]  # (namespace, labels as items): all Term.matches reads
Move = tuple[PodState, str, int]


class PodView(Protocol):
    """What the index reads of the decision's pod view (placement.py CyclePods)."""

    upstream: bool

    def with_affinity(self) -> dict[str, dict[str, PodState]]: ...

    def on_nodes(self) -> dict[str, dict[str, PodState]]: ...


def _class(pod: PodState) -> tuple[Class, Mapping[str, str]]:
    meta = pod.manifest.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (meta.get("namespace") or "default", tuple(labels.items())), labels


def _bump(by_value: dict[str, int], value: str, n: int) -> None:
    total = by_value.get(value, 0) + n
    if total:
        by_value[value] = total
    else:
        del by_value[value]


class AffinityScoreCounts:
    """The counts of one decision (see the module docstring). `has`: whether a pod has pod (anti-)affinity
    (the scheduler's AntiIndex answer); `memo`: parsed terms per pod, kept across decisions."""

    def __init__(self, cycle: Cycle, pods: PodView, has: Callable[[PodState], bool], memo: TermMemo) -> None:
        self.cycle, self.pods, self.has, self.memo = cycle, pods, has, memo
        self.upstream = pods.upstream  # what the domain nodes depend on (placement.py CyclePods.domain_nodes)
        self._nodes = cycle.view.nodes
        # placed pods' terms: (which, term) -> value -> pods; the pods counted, per (node, pod key)
        self._terms: dict[tuple[int, Term], dict[str, int]] | None = None
        self._with: dict[tuple[str, str], PodState] = {}
        # every placed pod per class, for each topology key asked: key -> class -> (namespace, labels, counts)
        self._classes: dict[str, dict[Class, tuple[str, Mapping[str, str], dict[str, int]]]] = {}
        self._all: dict[tuple[str, str], PodState] | None = None
        self._applied = {"terms": 0, "all": 0}

    def _domain(self, name: str) -> NodeState | None:
        """The node if it is a domain node (CyclePods.domain_nodes: every node in release profiles, the Ready
        ones in the legacy model), looked up rather than listed: a decision's PodGroup trials start over often."""
        node = self._nodes.get(name)
        return node if node is not None and (self.upstream or node.ready) else None

    # --- the placed pods' terms -------------------------------------------------------------------------------

    def _add_terms(self, pod: PodState, node: NodeState, sign: int) -> None:
        labels = node.labels
        counted = self._terms
        assert counted is not None
        for which, kind, req in _KINDS:
            for t in terms(pod, kind, req, self.memo):
                value = labels.get(t.key)
                if value is not None:
                    by_value = counted.get((which, t))
                    if by_value is None:
                        by_value = counted[(which, t)] = {}
                    _bump(by_value, value, sign)
                    if not by_value:
                        del counted[(which, t)]

    def placed_terms(self) -> dict[tuple[int, Term], dict[str, int]]:
        """(which, term) -> topology value -> placed pods with that term on a node of that value."""
        moves = self.cycle.moves
        if self._terms is None:
            self._terms = {}
            for name, on in self.pods.with_affinity().items():  # the moves so far applied
                node = self._domain(name)
                if node is not None:
                    for key, pod in on.items():
                        self._with[(name, key)] = pod
                        self._add_terms(pod, node, 1)
            self._applied["terms"] = len(moves)
        for pod, name, sign in moves[self._applied["terms"]:]:  # as CyclePods.with_affinity applies them
            node = self._domain(name)
            if node is None:
                continue
            if sign > 0:
                if self.has(pod):
                    old = self._with.get((name, pod.key))
                    if old is not None:
                        self._add_terms(old, node, -1)
                    self._with[(name, pod.key)] = pod
                    self._add_terms(pod, node, 1)
            else:
                old = self._with.pop((name, pod.key), None)
                if old is not None:
                    self._add_terms(old, node, -1)
        self._applied["terms"] = len(moves)
        return self._terms

    # --- every placed pod, per class ---------------------------------------------------------------------------

    def _add_pod(self, pod: PodState, node: NodeState, sign: int) -> None:
        cls, labels = _class(pod)
        node_labels = node.labels
        for key, classes in self._classes.items():
            value = node_labels.get(key)
            if value is None:
                continue
            entry = classes.get(cls)
            if entry is None:
                entry = classes[cls] = (cls[0], labels, {})
            _bump(entry[2], value, sign)
            if not entry[2]:
                del classes[cls]

    def classes(self, key: str) -> dict[Class, tuple[str, Mapping[str, str], dict[str, int]]]:
        """The placed pods per class with their counts per value of `key` (nodes without the key: none)."""
        moves = self.cycle.moves
        if self._all is None:
            self._all = {(name, k): p for name, on in self.pods.on_nodes().items()
                         if self._domain(name) is not None for k, p in on.items()}
            self._applied["all"] = len(moves)
        for pod, name, sign in moves[self._applied["all"]:]:  # as CyclePods._node_pods applies them
            node = self._domain(name)
            if node is None:
                continue
            old = self._all.pop((name, pod.key), None)
            if old is not None:
                self._add_pod(old, node, -1)
            if sign > 0:
                self._all[(name, pod.key)] = pod
                self._add_pod(pod, node, 1)
        self._applied["all"] = len(moves)
        classes = self._classes.get(key)
        if classes is None:
            classes = self._classes[key] = {}
            for (name, _), pod in self._all.items():
                value = self._nodes[name].labels.get(key)
                if value is not None:
                    cls, labels = _class(pod)
                    entry = classes.get(cls)
                    if entry is None:
                        entry = classes[cls] = (cls[0], labels, {})
                    entry[2][value] = entry[2].get(value, 0) + 1
        return classes

    # --- the sums ---------------------------------------------------------------------------------------------

    def scores(self, pod: PodState, affinity: list[Term], anti: list[Term], hard_weight: int,
               ignore_existing: bool) -> dict[str, dict[str, int]]:
        """AffinityScore.pre_score's topology key -> value -> sum, for the incoming pod."""
        scores: dict[str, dict[str, int]] = {}
        for ts, sign in ((affinity, 1), (anti, -1)):
            for t in ts:
                every = ALL_NAMESPACES in t.namespaces
                for namespace, labels, by_value in self.classes(t.key).values():
                    if (every or namespace in t.namespaces) and selector_matches(t.selector, labels):
                        _add(scores, t.key, by_value, t.weight * sign)
        if hard_weight > 0 or not ignore_existing:
            for (which, t), by_value in self.placed_terms().items():
                if which == HARD:
                    if hard_weight > 0 and t.matches(pod):
                        _add(scores, t.key, by_value, hard_weight)
                elif not ignore_existing and t.matches(pod):
                    _add(scores, t.key, by_value, t.weight if which == PREFERRED_AFFINITY else -t.weight)
        return scores


def _add(scores: dict[str, dict[str, int]], key: str, by_value: Mapping[str, int], weight: int) -> None:
    if not by_value:
        return
    out = scores.get(key)
    if out is None:
        scores[key] = {value: n * weight for value, n in by_value.items()}
        return
    for value, n in by_value.items():
        out[value] = out.get(value, 0) + n * weight


