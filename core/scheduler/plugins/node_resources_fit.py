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
