"""The scheduler reactor: binds pending pods to Ready nodes, one scheduling cycle per view.

Shaped like kube-scheduler's framework (pkg/scheduler/framework): small filter functions that
return a failure reason or None, a score function, a pure `schedule_one`. Devices are still counted
as extended resources here (`nvidia.com/gpu`); the DRA allocator replaces that in its own issue.

Queue order is upstream's PrioritySort: higher `spec.priority` first, then earlier arrival. Ties
between equally scored nodes are broken at random, as upstream's selectHost does, with the
decision's seeded random source.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..events import AnyEvent, PodBound, PodUnschedulable
from ..reactor import Decision, Trigger
from ..state import ClusterState, NodeState, PodState

Filter = Callable[[PodState, NodeState, dict[str, int]], str | None]


def node_ready(pod: PodState, node: NodeState, used: dict[str, int]) -> str | None:
    if not node.ready:
        return "node(s) were not ready"
    if node.manifest.get("spec", {}).get("unschedulable"):
        return "node(s) were unschedulable"
    return None


def node_selector(pod: PodState, node: NodeState, used: dict[str, int]) -> str | None:
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    return None


def tolerates(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    """v1 Toleration.ToleratesTaint (k8s.io/api/core/v1/toleration.go)."""
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("key") and tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator", "Equal") == "Exists":
            return True
        if tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def taints(pod: PodState, node: NodeState, used: dict[str, int]) -> str | None:
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(taint, pod.tolerations):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return None


def fits_resources(pod: PodState, node: NodeState, used: dict[str, int]) -> str | None:
    """NodeResourcesFit: every requested resource, plus one pod slot, within allocatable."""
    if used.get("pods", 0) + 1 > node.allocatable.get("pods", 110):
        return "Too many pods"
    for resource, amount in sorted(pod.requests.items()):
        if amount and used.get(resource, 0) + amount > node.allocatable.get(resource, 0):
            return f"Insufficient {resource}"
    return None


FILTERS: tuple[Filter, ...] = (node_ready, node_selector, taints, fits_resources)


def _utilisation(pod: PodState, node: NodeState, used: dict[str, int]) -> float:
    """Mean fraction of each requested resource in use after placing the pod."""
    fractions = [
        (used.get(r, 0) + a) / node.allocatable[r] for r, a in pod.requests.items() if node.allocatable.get(r)
    ]
    return sum(fractions) / len(fractions) if fractions else 0.0


SCORERS: dict[str, Callable[[PodState, NodeState, dict[str, int]], float]] = {
    "most-allocated": _utilisation,
    "least-allocated": lambda pod, node, used: 1.0 - _utilisation(pod, node, used),
}


def unschedulable_message(total: int, reasons: Counter[str]) -> str:
    """Upstream's FitError text (pkg/scheduler/framework/types.go, FitError.Error): the
    '<count> <reason>' strings sorted as strings (sort.Strings), e.g.
    '0/3 nodes are available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu.'."""
    parts = ", ".join(sorted(f"{n} {reason}" for reason, n in reasons.items()))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."


def pending_cause(reasons: Counter[str]) -> str:
    """dralab's structured pending reason. `capacity` when resources are what is missing on some
    node that passed every other filter, `no-nodes` on an empty cluster, else `constraints`."""
    if not reasons:
        return "no-nodes"
    if any(r.startswith("Insufficient") or r == "Too many pods" for r in reasons):
        return "capacity"
    if set(reasons) == {"node(s) were not ready"}:
        return "capacity"
    return "constraints"


@dataclass
class Scheduler:
    score: str = "most-allocated"
    name: str = "scheduler"
    trigger: Trigger = "events"

    def __post_init__(self) -> None:
        if self.score not in SCORERS:
            raise ValueError(f"unknown score policy {self.score!r}; expected one of {sorted(SCORERS)}")

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        queue = sorted(view.pending_pods(), key=lambda p: (-p.priority, p.created_offset))
        used = {name: dict(node.used) for name, node in view.nodes.items()}  # the assume cache
        events: list[AnyEvent] = []
        for pod in queue:
            node_name, reasons = self.schedule_one(view, pod, used, rng)
            if node_name is not None:
                events.append(PodBound(pod=pod.key, node=node_name))
                node_used = used[node_name]
                for resource, amount in pod.requests.items():
                    node_used[resource] = node_used.get(resource, 0) + amount
                node_used["pods"] = node_used.get("pods", 0) + 1
                continue
            message = unschedulable_message(len(view.nodes), reasons)
            cond = pod.condition
            if cond is None or cond.reason != "Unschedulable" or cond.message != message:
                events.append(
                    PodUnschedulable(pod=pod.key, reason="Unschedulable", message=message, cause=pending_cause(reasons))
                )
        return Decision(tuple(events))

    def schedule_one(
        self, view: ClusterState, pod: PodState, used: dict[str, dict[str, int]], rng: random.Random
    ) -> tuple[str | None, Counter[str]]:
        """Filter every node, score the feasible ones, pick the best (random among ties)."""
        reasons: Counter[str] = Counter()
        best: list[str] = []
        best_score = float("-inf")
        scorer = SCORERS[self.score]
        for name, node in view.nodes.items():
            node_used = used[name]
            failure = next((r for f in FILTERS if (r := f(pod, node, node_used)) is not None), None)
            if failure is not None:
                reasons[failure] += 1
                continue
            score = scorer(pod, node, node_used)
            if score > best_score:
                best, best_score = [name], score
            elif score == best_score:
                best.append(name)
        if not best:
            return None, reasons
        return (best[0] if len(best) == 1 else rng.choice(best)), reasons
