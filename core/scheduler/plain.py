"""The scheduler without its fast paths: upstream's schedulePod as written, node by node.

Why: the reactor answers most attempts from caches (the per-shape feasibility cache, the failure memo of
a decision, the static node lists kept across decisions, the DRA failure memo) and from an inlined copy
of the fit check and the score. Each is argued to give exactly the answer of the plain algorithm; this
module is that plain algorithm, so that a property test (tests/test_scheduler_fast_paths.py) can compare
the two decision by decision. It is switched on by `Scheduler.fast_paths = False`, an attribute that is
not part of a run's configuration (no scenario or log can ask for it).

Here every filter (filters.FILTERS: NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit)
runs on every node visited, from the rotating start, with the decision's usage; the score is the policy's
function; DRA runs last on the best-scored nodes (`pick`, without its failure memo).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ..state.cluster import PodState
from .cycle import Cycle
from .filters import FILTERS, num_feasible_nodes_to_find
from .framework import ScorePlugin

Pick = Callable[[dict[float, list[str]], Counter[str], list[str]], tuple[str | None, dict[str, dict[str, Any]]]]


def schedule_pod(cycle: Cycle, pod: PodState, score: ScorePlugin, pick: Pick
                 ) -> tuple[str | None, Counter[str], dict[str, dict[str, Any]], list[str]]:
    """Scheduler.schedule_one's answer, computed plainly: the node (or None), the reasons counted over the
    nodes visited, the chosen node's DRA allocations, and the nodes that failed only on DRA."""
    nodes, used = cycle.view.nodes, cycle.used
    names = list(nodes)
    reasons: Counter[str] = Counter()
    want = num_feasible_nodes_to_find(len(names))
    start = cycle.cursor[0] % len(names) if names else 0
    order = names[start:] + names[:start]
    scanned, total = 0, len(order)
    dra_nodes: list[str] = []
    while scanned < total:
        scored: dict[float, list[str]] = {}
        found = 0
        while scanned < total and found < want:
            name = order[scanned]
            scanned += 1
            node, node_used = nodes[name], used[name]
            status = next((s for f in FILTERS if (s := f(pod, node, node_used)) is not None), None)
            if status is not None:
                reasons[status.message] += 1
                continue
            scored.setdefault(score(pod, node, node_used), []).append(name)
            found += 1
        cycle.cursor[0] = start + scanned
        chosen, allocations = pick(scored, reasons, dra_nodes)
        if chosen is not None:
            return chosen, reasons, allocations, []
    return None, reasons, {}, dra_nodes
