"""NodeResourcesBalancedAllocation's Score (pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go):
a node scores higher the closer its resources' requested fractions (the pod's requests added) are to each
other, `(1 - std) * 100` truncated, each fraction capped at 1.

As upstream: actual requests (useRequested, no 100m / 200Mi defaults), a resource the node lacks left out,
an extended resource the pod does not request left out; two fractions: std = |f1 - f2| / 2, more: the
population standard deviation, one: 0. A pod that requests none of the resources (best effort) is skipped at
PreScore (issue kubernetes#129138, 1.33+), so best-effort pods do not all go to the most balanced node.
Scores do not depend on the other nodes: no normalization.
"""

from __future__ import annotations

import math
from typing import Any

from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint
from .node_resources_fit import allocation

NAME = "NodeResourcesBalancedAllocation"
EXTENSION_POINTS = (ExtensionPoint.PRE_SCORE, ExtensionPoint.SCORE)


def balanced_score(parts: list[tuple[int, int, int]]) -> int:
    """balancedResourceScorer over (requested, allocatable, weight) per resource (weights are 1)."""
    fractions = [min(req / cap, 1.0) for req, cap, _ in parts]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / len(fractions)
        squares = 0.0
        for f in fractions:
            squares = squares + (f - mean) * (f - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * 100)


class BalancedAllocationScore:
    NAME = NAME
    POINTWISE = True

    def __init__(self, args: dict[str, Any], nonzero: Any = None) -> None:
        self.resources = [(r["name"], int(r.get("weight", 1))) for r in args.get("resources") or
                          [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]]

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> Any | None:
        """Skip a best-effort pod (no request for any of the resources)."""
        if not any(pod.requests.get(name, 0) for name, _ in self.resources):
            return None
        return True

    def score(self, state: Any, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        return balanced_score(allocation(self.resources, pod, node, used, None, (0, 0)))

    def normalize(self, state: Any, scores: dict[str, int]) -> None:
        return None
