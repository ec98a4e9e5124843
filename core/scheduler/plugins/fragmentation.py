"""Fragmentation in the scheduler reactor: a score policy that keeps free devices usable, and the
`fragmentation` pending reason for pods whose devices come through DRA claims.

The score follows the idea of FGD (fragmentation gradient descent; Weng et al., "Beware of
Fragmentation", USENIX ATC'23) at the granularity of whole devices: a node's fragmentation, measured
against the workload, is the expected number of its free devices that a pod drawn from the workload
could not use (all of them when fewer are free than the pod asks for, none otherwise); a pod goes where
placing it increases that least (or decreases it most), ties going to the fuller node. The workload is
the cluster's pods as the scheduler sees them (pending and running, by devices asked for). Devices are
extended resources with a domain (`nvidia.com/gpu`) plus the devices of the node's own ResourceSlices;
a pod's demand is its extended resources plus the device counts of its claims' requests (first choice of
a `firstAvailable` request; `All` counts nothing). Topology inside a node (NVLink domains) is not
weighed: the allocator's constraints decide feasibility, the score only ranks feasible nodes.
`dralab trace` (issue 9) runs the paper's exact policies; this one is the scheduler's everyday variant.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ...dra.allocated import AllocatedState
from ...dra.model import Claim, Device, SubRequest
from ...log.events import claim_key
from ...state.cluster import PENDING, RUNNING, ClusterState, NodeState, PodState
from ..framework import ExtensionPoint

if TYPE_CHECKING:
    from ...dra.cel import CelMatcher

NAME = "Fragmentation"  # dralab's own, not an upstream plugin
# PreScore: the workload's histogram, once per decision (Cycle.histogram); Score: fragmentation_score;
# PostFilter: the `fragmentation` pending cause (dra_fragmentation, filters.fragmented).
EXTENSION_POINTS = (ExtensionPoint.POST_FILTER, ExtensionPoint.PRE_SCORE, ExtensionPoint.SCORE)


def is_device_resource(resource: str) -> bool:
    """Extended resources of a device plugin carry a domain (`nvidia.com/gpu`); cpu, memory, pods do not."""
    return "/" in resource and not resource.startswith(("hugepages-", "kubernetes.io/"))


def claim_demand(claim: Claim) -> int:
    total = 0
    for request in claim.requests:
        choices = request.choices()
        if choices and choices[0].allocation_mode == "ExactCount":
            total += choices[0].count
    return total


def pod_demand(view: ClusterState, pod: PodState) -> int:
    """Devices the pod asks for: extended device resources plus its claims' device counts."""
    demand = sum(a for r, a in pod.requests.items() if is_device_resource(r))
    namespace = pod.key.split("/")[1]
    generated = view.dra.pod_claims.get(pod.key, {})
    for entry in pod.manifest.get("spec", {}).get("resourceClaims") or []:
        key = (claim_key(namespace, entry["resourceClaimName"]) if entry.get("resourceClaimName")
               else generated.get(entry.get("name", "")))
        state = view.dra.claims.get(key or "")
        if state is not None and (state.owner == pod.key or not state.reserved_for):
            demand += claim_demand(state.claim)  # a shared claim counts for its first consumer only
    return demand


def workload_histogram(view: ClusterState, demand: dict[str, int]) -> dict[int, float]:
    """The share of each device demand among the pods that ask for devices (pending and running).
    ``demand`` caches each pod's demand across decisions (a pod's demand never changes once known)."""
    counts: Counter[int] = Counter()
    for phase in (PENDING, RUNNING):
        for key in view.pods_by_phase[phase]:
            k = demand.get(key)
            if k is None:
                k = pod_demand(view, view.pods[key])
                if k or not view.pods[key].manifest.get("spec", {}).get("resourceClaims"):
                    demand[key] = k  # claims not created yet: ask again next time
            if k:
                counts[k] += 1
    total = sum(counts.values())
    return {k: n / total for k, n in sorted(counts.items())} if total else {}


def expected_fragmentation(free: int, histogram: dict[int, float]) -> float:
    """Free devices a pod drawn from the workload could not use, in expectation."""
    return sum(share * free for k, share in histogram.items() if free < k)


def fragmentation_score(demand: int, free: int, histogram: dict[int, float], utilisation: float) -> float:
    """Higher is better: the decrease of the node's expected fragmentation if the pod goes there, then
    (a tenth of a device at most) how full the node gets."""
    if demand == 0 or not histogram:
        return utilisation / 10
    change = expected_fragmentation(free - demand, histogram) - expected_fragmentation(free, histogram)
    return -change + utilisation / 10


class FreeDevices:
    """Free devices per node within one decision: extended device resources from the decision's usage,
    DRA devices of the node's own slices not in use (cached per node, dropped when the node takes some)."""

    def __init__(self, view: ClusterState, allocated: AllocatedState) -> None:
        self.view = view
        self.allocated = allocated
        self._dra: dict[str, int] = {}

    def free(self, node: NodeState, used: dict[str, int]) -> int:
        extended = sum(max(a - used.get(r, 0), 0) for r, a in node.allocatable.items() if is_device_resource(r))
        dra = self._dra.get(node.name)
        if dra is None:
            dra = self._dra[node.name] = sum(
                1 for _, slc in self.view.dra.slice_index().by_node.get(node.name, ())
                for d in slc.devices if d.id not in self.allocated.devices)
        return extended + dra

    def forget(self, node: str) -> None:
        self._dra.pop(node, None)


def _matches(matcher: CelMatcher, view: ClusterState, device: Device, sub: SubRequest) -> bool:
    cls = view.dra.classes.get(sub.device_class)
    if cls is None:
        return False
    try:
        return all(matcher.matches(e, device, f"DeviceClass {cls.name}") for e in cls.selectors) and all(
            matcher.matches(e, device, f"request {sub.name}") for e in sub.selectors)
    except Exception:  # a selector that fails at runtime: the allocator reports it; here it just does not match
        return False


def dra_fragmentation(view: ClusterState, matcher: CelMatcher, allocated: AllocatedState, claims: list[Claim],
                      nodes: list[str]) -> str | None:
    """Evidence that the pod's devices are fragmented over ``nodes`` (those where only DRA failed): some
    request finds enough free matching devices across them but not on any one, and no request is short
    in total. None when that is not the case (then more devices, not consolidation, would help)."""
    index = view.dra.slice_index()
    split: str | None = None
    for claim in claims:
        for request in claim.requests:
            choices = request.choices()
            if not choices or choices[0].allocation_mode != "ExactCount":
                continue
            sub = choices[0]
            per_node = [
                sum(1 for _, slc in index.by_node.get(n, ()) for d in slc.devices
                    if d.id not in allocated.devices and _matches(matcher, view, d, sub))
                for n in nodes
            ]
            total, most = sum(per_node), max(per_node, default=0)
            if total < sub.count:
                return None  # short in total: capacity
            if most < sub.count and split is None:
                split = (f"request {request.name} of claim {claim.namespace}/{claim.name} needs {sub.count} "
                         f"devices: {total} free matching devices across {sum(1 for f in per_node if f)} "
                         f"nodes, at most {most} on one node")
    return split
