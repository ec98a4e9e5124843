"""The expanders: which node group's scale-up option to take, as cluster-autoscaler's expander/ package
(least-waste, most-pods, least-nodes, price, priority, random; flag --expander, a comma-separated chain). An
Option is what each group offers (expander.Option upstream); among equally good options the seeded random source
decides, as CA falls back to random. The reactor checks the names when it is built (reactor.py)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ...state.cluster import NodeGroupState

EXPANDERS = ("least-waste", "most-pods", "price", "priority", "random", "least-nodes")


@dataclass(frozen=True)
class Option:
    """One candidate scale-up: a group, how many nodes, which pods they would take; `atomic`: the nodes are
    asked for all or none (a PodGroup gang's scale-up under the atomic policy, scale_up.py)."""

    group: NodeGroupState
    count: int
    pods: tuple[str, ...]
    waste: float
    atomic: bool = False


def expand(expander: str, priorities: dict[str, int], options: list[Option], rng: random.Random,
           regexes: tuple[tuple[int, tuple[str, ...]], ...] = ()) -> Option:
    """The expander's choice; among equally good options, random (CA's fallback). Scored per option, not per
    group: one group may offer two (its regular option and a PodGroup's, scale_up.py).

    `expander` may be upstream's comma-separated chain (expander/factory/chain.go): each filter keeps its best
    options and the first to leave one decides; ties left at the end go to the random source. `regexes`: the
    priority expander's ConfigMap (priority -> regexes of group names, highest first), else `priorities` (group
    name -> priority, dralab's older form)."""
    best = options
    for name in expander.split(","):
        best = _best(name, priorities, regexes, best)
        if len(best) == 1:
            return best[0]
    return rng.choice(best)


def _best(name: str, priorities: dict[str, int], regexes: tuple[tuple[int, tuple[str, ...]], ...],
          options: list[Option]) -> list[Option]:
    """One filter of the chain: the options it likes best (BestOptions upstream)."""
    if name == "priority" and regexes:
        return _by_priority(regexes, options)
    scores: list[float]
    if name == "least-waste":
        scores = [-o.waste for o in options]
    elif name == "most-pods":
        scores = [float(len(o.pods)) for o in options]
    elif name == "least-nodes":
        scores = [-float(o.count) for o in options]
    elif name == "price":
        scores = [-o.group.cost_per_hour * o.count / max(len(o.pods), 1) for o in options]
    elif name == "priority":
        scores = [float(priorities.get(o.group.name, 0)) for o in options]
    else:
        scores = [0.0 for _ in options]
    top = max(scores)
    return [o for o, score in zip(options, scores, strict=True) if score == top]


def _by_priority(regexes: tuple[tuple[int, tuple[str, ...]], ...], options: list[Option]) -> list[Option]:
    """expander/priority: the options whose group name matches (re.search, as Go's FindStringIndex) a regex of the
    highest priority that matches any; a group no regex matches is not used; none matched: every option."""
    best: list[Option] = []
    top: int | None = None
    for option in options:
        for priority, patterns in regexes:
            if any(re.search(p, option.group.name) for p in patterns):
                if top is None or priority > top:
                    top, best = priority, []
                if priority == top:
                    best.append(option)
                break  # `regexes` is highest first: the first match is the option's priority
    return best or options
