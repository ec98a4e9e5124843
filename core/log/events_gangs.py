"""Events of gangs (scheduling.k8s.io/v1alpha1 Workloads, KEP-4671): a workload, and its members waiting
at Permit (the tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

from .event_base import Event, _meta, _pool_keys, node_key

# ---------------------------------------------------------------- gangs (scheduling.k8s.io/v1alpha1, KEP-4671)


def workload_key(namespace: str, name: str) -> str:
    return f"workload/{namespace}/{name}"


class WorkloadCreated(Event, tag="WorkloadCreated", frozen=True):
    """A Workload exists: its pod groups and their policies (basic, or gang with minCount)."""

    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        return (workload_key(*_meta(self.manifest)),)


class PodReserved(Event, tag="PodReserved", frozen=True):
    """A gang member passed Reserve and waits at Permit (GangScheduling) on `node` until its group's
    quorum is met or `deadline` passes. It holds the node's resources and its claims' devices in the
    scheduler (upstream's scheduler cache and DRA in-flight allocations): nothing is bound or allocated
    in the API. Only `nominated` makes the placement visible to others (as status.nominatedNodeName)."""

    pod: str
    node: str
    allocations: dict[str, dict[str, Any]]  # claim key -> allocation to write when the pod binds
    deadline: int  # cluster ms: the group's Permit deadline
    # status.nominatedNodeName set to `node` (KEP-5278, beta and on in 1.35): other components, the
    # autoscaler among them, then count the pod as placed there
    nominated: bool = True

    def touched(self) -> tuple[str, ...]:
        pools = (k for a in self.allocations.values() for k in _pool_keys(a))
        return (self.pod, node_key(self.node), *self.allocations, *dict.fromkeys(pools))


class PodUnreserved(Event, tag="PodUnreserved", frozen=True):
    """A waiting gang member is rejected at Permit (its group's deadline passed): what it held is free."""

    pod: str
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)

