"""NodeResourcesFit's fit check, the one place it is written (kube-scheduler's
pkg/scheduler/framework/plugins/noderesources/fit.go, fitsRequest).

Why one module: the scheduler's filter, its feasibility cache and node-by-node loop, the autoscaler's
capacity simulation, the snapshot audit and the no-overcommit invariant all ask the same question (does
a pod with these requests fit a node with this allocatable and this usage?). Written apart they could
drift; here they share the function, the default pod limit and the failure messages.

As upstream: one pod slot is checked first (`Too many pods`), then each requested resource
(`Insufficient <resource>`). dralab checks the requests in sorted order (upstream: cpu, memory,
ephemeral-storage, then scalar resources); a request of 0 is never short.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...state.cluster import NodeState, PodState
from ..framework import ExtensionPoint, ScorePlugin, Status, unschedulable

NAME = "NodeResourcesFit"
EXTENSION_POINTS = (ExtensionPoint.FILTER, ExtensionPoint.SCORE)

# The kubelet's --max-pods default: the pods a node runs when its allocatable does not say.
KUBELET_MAX_PODS_DEFAULT = 110

TOO_MANY_PODS = "Too many pods"


def allocatable_of(allocatable: Mapping[str, int], resource: str) -> int:
    """A node's allocatable amount of `resource`: the kubelet's default for pods, else 0 when unsaid."""
    return allocatable.get(resource, KUBELET_MAX_PODS_DEFAULT if resource == "pods" else 0)


def lacking(checks: Sequence[tuple[str, int]], used: Mapping[str, int], allocatable: Mapping[str, int],
            *, every: bool = False) -> Sequence[str]:
    """The resources a pod lacks on a node, in the filter's order: `pods` (its one slot), then those of
    `checks` (the pod's requests, sorted) short of allocatable minus `used`. Empty: the pod fits. Stops at
    the first unless `every` (the audit names them all). Runs per node in the scheduler's hot loops, so the
    usual answers build nothing: the empty tuple when the pod fits, a one-item tuple at the first lack."""
    if every:
        return _every_lacking(checks, used, allocatable)
    if used.get("pods", 0) + 1 > allocatable.get("pods", KUBELET_MAX_PODS_DEFAULT):
        return _PODS
    for resource, amount in checks:
        if amount and used.get(resource, 0) + amount > allocatable.get(resource, 0):
            return (resource,)
    return ()


_PODS = ("pods",)


def _every_lacking(checks: Sequence[tuple[str, int]], used: Mapping[str, int],
                   allocatable: Mapping[str, int]) -> list[str]:
    out = ["pods"] if used.get("pods", 0) + 1 > allocatable.get("pods", KUBELET_MAX_PODS_DEFAULT) else []
    out += [r for r, amount in checks if amount and used.get(r, 0) + amount > allocatable.get(r, 0)]
    return out


def failure_message(resource: str) -> str:
    """Upstream's reason for one lacking resource (InsufficientResource.Reason), the FitError text: `pods`
    is the pod's slot (a pod never requests `pods`: manifest validation rejects it in a container)."""
    return TOO_MANY_PODS if resource == "pods" else f"Insufficient {resource}"


def fit_failure(checks: Sequence[tuple[str, int]], used: Mapping[str, int],
                allocatable: Mapping[str, int]) -> str | None:
    """The filter's answer: the first lacking resource's reason, or None when the pod fits."""
    missing = lacking(checks, used, allocatable)
    return failure_message(missing[0]) if missing else None


def fit_status(checks: Sequence[tuple[str, int]], used: Mapping[str, int],
               allocatable: Mapping[str, int]) -> Status | None:
    """The Filter extension point: None (Success) when the pod fits, else Unschedulable (room may be
    freed or added) with dralab's pending cause: `capacity` for an extended resource (a device counted,
    `vendor/name`), `resources` for the rest."""
    missing = lacking(checks, used, allocatable)
    if not missing:
        return None
    cause = "capacity" if "/" in missing[0] else "resources"
    return unschedulable(failure_message(missing[0]), cause, NAME)


def fits_resources(pod: PodState, node: NodeState, used: dict[str, int]) -> Status | None:
    """The plugin's Filter: every requested resource, plus one pod slot, within allocatable."""
    return fit_status(sorted(pod.requests.items()), used, node.allocatable)


# Score: NodeResourcesFit's scoring strategies (noderesources/most_allocated.go, least_allocated.go), as
# dralab's score policies of the same names. Not upstream's integer scores weighted per resource: the mean
# fraction of each requested resource in use after placing the pod (the fast path inlines this arithmetic).
def utilisation(pod: PodState, node: NodeState, used: dict[str, int]) -> float:
    """Mean fraction of each requested resource in use after placing the pod."""
    fractions = [
        (used.get(r, 0) + a) / node.allocatable[r] for r, a in pod.requests.items() if node.allocatable.get(r)
    ]
    return sum(fractions) / len(fractions) if fractions else 0.0


SCORERS: dict[str, ScorePlugin] = {
    "most-allocated": utilisation,
    "least-allocated": lambda pod, node, used: 1.0 - utilisation(pod, node, used),
}


# --- Score with upstream's arithmetic (the scheduler configuration's NodeResourcesFit, scoring.py) -----------
# noderesources/resource_allocation.go: per resource of the strategy's list, the node's allocatable and its
# requested amount with the pod's added; an extended resource the pod does not request, or one the node does
# not have, is left out. cpu and memory count a container that requests none as 100m / 200Mi
# (schedutil.DefaultMilliCPURequest, DefaultMemoryRequest: NonZeroRequested), in scoring only.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_NON_ZERO = (("cpu", DEFAULT_MILLI_CPU_REQUEST), ("memory", DEFAULT_MEMORY_REQUEST))
_NATIVE = frozenset({"cpu", "memory", "ephemeral-storage"})


def go_div(a: int, b: int) -> int:
    """Go's int64 division: truncated toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def nonzero_extra(pod: PodState) -> tuple[int, int]:
    """What NonZeroRequested adds to the pod's cpu and memory: the default for each regular container that
    requests none (a limit stands in for a missing request, as API defaulting does); none when pod-level
    resources set it (PodRequests reads those)."""
    spec = pod.manifest.get("spec") or {}
    pod_level = (spec.get("resources") or {}).get("requests") or (spec.get("resources") or {}).get("limits") or {}
    out = [0, 0]
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        given = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for i, (name, default) in enumerate(_NON_ZERO):
            if name not in given and name not in pod_level:
                out[i] += default
    return out[0], out[1]


def weighted(scores: list[tuple[int, int]]) -> int:
    """leastResourceScorer / mostResourceScorer: the weighted mean of the resources' scores, int64 division."""
    total = weights = 0
    for score, weight in scores:
        total += score * weight
        weights += weight
    return total // weights if weights else 0


def least_requested(requested: int, capacity: int) -> int:
    """least_allocated.go leastRequestedScore."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * 100 // capacity


def most_requested(requested: int, capacity: int) -> int:
    """most_allocated.go mostRequestedScore (a node over capacity counts as full)."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * 100 // capacity


def broken_linear(shape: list[tuple[int, int]], p: int) -> int:
    """helper.BuildBrokenLinearFunction over (utilization, score) points, Go's integer arithmetic."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            return s0 + go_div((s - s0) * (p - u0), u - u0)
    return shape[-1][1]


def go_round(x: float) -> int:
    """math.Round: half away from zero."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def ratio_scorer(shape_points: list[dict[str, int]]) -> Any:
    """requested_to_capacity_ratio.go: the shape's scores scaled to MaxNodeScore (x 100/10), a resource over
    capacity scored at 100% utilization, only resources scoring above 0 weighed, the mean rounded."""
    shape = [(p["utilization"], p["score"] * 10) for p in shape_points]

    def score(scores: list[tuple[int, int, int]]) -> int:
        total = weights = 0
        for requested, capacity, weight in scores:
            value = broken_linear(shape, 100 if requested > capacity else requested * 100 // capacity)
            if value > 0:
                total += value * weight
                weights += weight
        return go_round(total / weights) if weights else 0
    return score


def allocation(resources: list[tuple[str, int]], pod: PodState, node: NodeState, used: dict[str, int],
               extra: tuple[int, int] | None, node_extra: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(requested with the pod, allocatable, weight) per resource scored (resource_allocation.go score and
    calculateResourceAllocatableRequest). `extra`: the pod's NonZeroRequested additions (None: actual
    requests, BalancedAllocation's useRequested); `node_extra` the node's."""
    out = []
    alloc = node.allocatable
    for name, weight in resources:
        request = pod.requests.get(name, 0)
        if extra is not None and name in ("cpu", "memory"):
            i = 0 if name == "cpu" else 1
            request += extra[i]
            requested = used.get(name, 0) + node_extra[i] + request
        else:
            if request == 0 and name not in _NATIVE:
                continue  # an extended resource the pod does not ask for
            requested = used.get(name, 0) + request
        capacity = alloc.get(name, 0)
        if capacity == 0:
            continue
        out.append((requested, capacity, weight))
    return out


class NodeResourcesFitScore:
    """NodeResourcesFit's Score with the configured strategy (LeastAllocated, MostAllocated,
    RequestedToCapacityRatio); its scores do not depend on the other nodes (no normalization)."""

    NAME = NAME
    POINTWISE = True

    def __init__(self, args: dict[str, Any], nonzero: Any) -> None:
        strategy = args.get("scoringStrategy") or {"type": "LeastAllocated"}
        self.kind = strategy.get("type", "LeastAllocated")
        self.resources = [(r["name"], int(r["weight"])) for r in strategy.get("resources") or
                          [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]]
        self.ratio = (ratio_scorer(strategy["requestedToCapacityRatio"]["shape"])
                      if self.kind == "RequestedToCapacityRatio" else None)
        self.nonzero = nonzero  # the node's NonZeroRequested additions (scoring.NonZero)

    def pre_score(self, cycle: Any, pod: PodState, nodes: list[NodeState]) -> Any | None:
        return nonzero_extra(pod)

    def score(self, state: Any, pod: PodState, node: NodeState, used: dict[str, int]) -> int:
        parts = allocation(self.resources, pod, node, used, state, self.nonzero.of(node))
        if self.ratio is not None:
            return int(self.ratio(parts))
        per = least_requested if self.kind == "LeastAllocated" else most_requested
        return weighted([(per(req, cap), w) for req, cap, w in parts])

    def normalize(self, state: Any, scores: dict[str, int]) -> None:
        return None
