"""Claims the autoscaler's simulation allocated, seen by every pod that shares them (release profiles).

cluster-autoscaler's DRA snapshot (simulator/dynamicresources/snapshot) holds the ResourceClaims themselves:
when the simulation schedules a pod whose claim is not allocated yet, the snapshot's claim gets the allocation
(and the pod in reservedFor), so the next pod referencing the same claim finds it allocated, with its node
selector, and can only go where it was allocated. So 13 pods sharing one not-yet-allocated claim for a
node-local device need one new node, not one node per pod (kubernetes/autoscaler core/static_autoscaler_dra_test.go,
"scale-up: pods requesting a shared, unallocated claim": 1 node, and the 3 pods that do not fit its CPU stay
pending without a scale-up).

dralab's legacy model allocated a shared claim again for every pod (the allocations only marked devices used),
so such pods spread over as many template nodes; legacy logs keep it (the Simulation asks this only in release
profiles).
"""

from __future__ import annotations

from typing import Any

from ...kube.nodeselector import node_selector_matches
from ...log.event_base import claim_key
from ...scheduler.plugins.dynamic_resources import PodClaims
from ...state.cluster import NodeState


class SimClaims:
    """Claim key (`ns/name`, as the allocator keys its results) -> the allocation the simulation made, and which
    pods' cached claims mention each claim (to drop them when it gets one)."""

    __slots__ = ("allocations", "users")

    def __init__(self) -> None:
        self.allocations: dict[str, dict[str, Any]] = {}
        self.users: dict[str, set[str]] = {}

    def resolve(self, pod: str, claims: PodClaims) -> PodClaims:
        """`claims` with those the simulation already allocated moved to `allocated` (they then only constrain
        the node, through their nodeSelector, as an allocated claim does in PreFilter)."""
        for c in claims.to_allocate:
            self.users.setdefault(c.key, set()).add(pod)
        if not self.allocations or not any(c.key in self.allocations for c in claims.to_allocate):
            return claims
        return PodClaims(to_allocate=[c for c in claims.to_allocate if c.key not in self.allocations],
                         allocated=[*claims.allocated,
                                    *((claim_key(c.namespace, c.name), self.allocations[c.key])
                                      for c in claims.to_allocate if c.key in self.allocations)],
                         missing=claims.missing, waiting=claims.waiting, consumers=dict(claims.consumers))

    def reachable(self, claims: PodClaims, node: NodeState) -> bool:
        """Whether the node matches the node selector of every allocated claim of the pod (DynamicResources'
        Filter for allocated claims: the static filters see only the view's allocations, not the simulation's)."""
        return all(node_selector_matches(a.get("nodeSelector"), node.labels, node.name) for _, a in claims.allocated)

    def record(self, pod: str, allocations: dict[str, dict[str, Any]]) -> set[str]:
        """The simulation placed `pod` with these claim allocations: the other pods sharing one of them (whose
        cached claims are now stale)."""
        stale: set[str] = set()
        for key, allocation in allocations.items():
            if key in self.allocations:
                continue
            self.allocations[key] = allocation
            stale |= self.users.get(key, set()) - {pod}
        return stale

    def copy(self) -> dict[str, dict[str, Any]]:
        return dict(self.allocations)
