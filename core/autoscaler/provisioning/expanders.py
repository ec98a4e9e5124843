"""The expanders: which node group's scale-up option to take, as cluster-autoscaler's expander/ package
(least-waste, most-pods, price, priority, random; flag --expander). An Option is what each group offers
(expander.Option upstream); among equally good options the seeded random source decides, as CA falls back
to random. The reactor checks the name when it is built (reactor.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...state.cluster import NodeGroupState

EXPANDERS = ("least-waste", "most-pods", "price", "priority", "random")


@dataclass(frozen=True)
class Option:
    """One candidate scale-up: a group, how many nodes, which pods they would take; `atomic`: the nodes are
    asked for all or none (a PodGroup gang's scale-up under the atomic policy, scale_up.py)."""

    group: NodeGroupState
    count: int
    pods: tuple[str, ...]
    waste: float
    atomic: bool = False


def expand(expander: str, priorities: dict[str, int], options: list[Option], rng: random.Random) -> Option:
    """The expander's choice; among equally good options, random (CA's fallback). Scored per option, not per
    group: one group may offer two (its regular option and a PodGroup's, scale_up.py)."""
    scores: list[float]
    if expander == "least-waste":
        scores = [-o.waste for o in options]
    elif expander == "most-pods":
        scores = [float(len(o.pods)) for o in options]
    elif expander == "price":
        scores = [-o.group.cost_per_hour * o.count / max(len(o.pods), 1) for o in options]
    elif expander == "priority":
        scores = [float(priorities.get(o.group.name, 0)) for o in options]
    else:
        scores = [0.0 for _ in options]
    top = max(scores)
    best = [o for o, score in zip(options, scores, strict=True) if score == top]
    return best[0] if len(best) == 1 else rng.choice(best)
