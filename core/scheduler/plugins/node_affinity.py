"""NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity): spec.nodeSelector and the required node
affinity (requiredDuringSchedulingIgnoredDuringExecution) against the node's labels and name.

UnschedulableAndUnresolvable, as upstream: only another node (or other labels) can satisfy it.

Score (with the scheduler configuration, scoring.py): the summed weights of the preferred terms
(preferredDuringSchedulingIgnoredDuringExecution, and the plugin's addedAffinity preferred terms) the node
matches, normalized by the highest over the scored nodes (DefaultNormalizeScore, not reversed); a pod with no
preferred term is skipped at PreScore."""

from __future__ import annotations

from typing import Any

from ...kube.nodeselector import node_selector_matches, term_matches
from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, Status, unresolvable

NAME = "NodeAffinity"
EXTENSION_POINTS = (ExtensionPoint.FILTER, ExtensionPoint.PRE_SCORE, ExtensionPoint.SCORE)
_MISMATCH = unresolvable("node(s) didn't match Pod's node affinity/selector", "selector", NAME)


def node_selector(pod: PodState, node: NodeState, used: dict[str, int]) -> Status | None:
    """Filter: every nodeSelector label, then the required affinity's terms."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return _MISMATCH
    affinity = (pod.manifest.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not node_selector_matches(required, labels, node.name):
        return _MISMATCH
    return None


def default_normalize(scores: dict[str, int], reverse: bool) -> None:
    """helper.DefaultNormalizeScore with MaxNodeScore 100: each score x 100 / the highest (int64 division),
    reversed as 100 - that; all 0: left at 0, or all 100 when reversed."""
    top = max(scores.values(), default=0)
    if top <= 0:
        if reverse:
            for name in scores:
                scores[name] = 100
        return
    for name, score in scores.items():
        value = 100 * score // top
        scores[name] = 100 - value if reverse else value


def preferred_terms(pod: PodState, added: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(weight, preference) of the plugin's added terms and the pod's preferred terms; a term of weight 0 is
    left out (nodeaffinity.NewPreferredSchedulingTerms)."""
    affinity = (pod.manifest.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = [*added, *(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])]
    return [(int(t.get("weight", 0)), t.get("preference") or {}) for t in terms if t.get("weight")]


class NodeAffinityScore:
    NAME = NAME
    POINTWISE = False  # normalized over the scored nodes

    def __init__(self, args: dict[str, Any], nonzero: Any = None) -> None:
        added = (args.get("addedAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        self.added = list(added)

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> Any | None:
        """The preferred terms, or None (Skip) when there are none."""
        terms = preferred_terms(pod, self.added)
        return terms or None

    def score(self, state: Any, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        labels = node.labels
        return sum(weight for weight, term in state if term_matches(term, labels, node.name))

    def normalize(self, state: Any, scores: dict[str, int]) -> None:
        default_normalize(scores, False)
