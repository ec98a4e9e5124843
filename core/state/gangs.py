"""The gang part of the cluster state: Workloads, which pods belong to which gang, and the reservations
of gang members waiting at Permit.

A reservation is the scheduler's own bookkeeping (upstream keeps it in the scheduler cache and the DRA
plugin's in-flight map); dralab writes it to the log so that a restarted scheduler, verify and replay
see exactly what the scheduler saw. Nothing else treats a reserved pod as placed: it stays Pending,
unbound, its claims unallocated, as in the API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..kube.workloads import GangRef, gang_ref, group_policy, min_count
from ..log.events import PodReserved, WorkloadCreated


@dataclass(frozen=True)
class Reservation:
    pod: str
    node: str
    gang: str  # gang key
    allocations: dict[str, dict[str, Any]]
    deadline: int
    requests: dict[str, int]
    nominated: bool = True  # visible to other components as status.nominatedNodeName


@dataclass
class GangState:
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ns/name" -> Workload manifest
    refs: dict[str, GangRef] = field(default_factory=dict)  # pod key -> its group, for pods with workloadRef
    members: dict[str, dict[str, None]] = field(default_factory=dict)  # gang key -> pod keys (ordered)
    member_offset: dict[str, int] = field(default_factory=dict)  # gang key -> offset its last member arrived
    reservations: dict[str, Reservation] = field(default_factory=dict)  # pod key -> reservation
    bound_now: dict[str, None] = field(default_factory=dict)  # gangs with a binding in the record being applied
    bound: dict[str, None] = field(default_factory=dict)  # gangs that have had members bound (for the summary)
    timeouts: int = 0  # waiting members released at their gang's deadline

    def workload_created(self, event: WorkloadCreated) -> None:
        meta = event.manifest.get("metadata") or {}
        self.workloads[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = event.manifest

    def pod_created(self, offset: int, key: str, manifest: dict[str, Any]) -> None:
        ref = gang_ref(manifest)
        if ref is None:
            return
        self.refs[key] = ref
        self.members.setdefault(ref.key, {})[key] = None
        self.member_offset[ref.key] = offset

    def min_count(self, ref: GangRef) -> int | None:
        """The gang's minCount; None when the pod group is basic or its Workload or group is unknown."""
        workload = self.workloads.get(ref.workload_key)
        policy = group_policy(workload, ref.pod_group) if workload is not None else None
        return min_count(policy) if policy is not None else None

    def reserve(self, event: PodReserved, requests: dict[str, int]) -> None:
        ref = self.refs.get(event.pod)
        self.reservations[event.pod] = Reservation(
            event.pod, event.node, ref.key if ref else "", event.allocations, event.deadline, requests,
            event.nominated,
        )

    def gangs(self) -> list[str]:
        """Keys of the groups with a gang policy (basic groups and unknown Workloads left out)."""
        return [g for g, members in self.members.items()
                if self.min_count(self.refs[next(iter(members))]) is not None]

    def by_gang(self) -> dict[str, list[Reservation]]:
        out: dict[str, list[Reservation]] = {}
        for reservation in self.reservations.values():
            out.setdefault(reservation.gang, []).append(reservation)
        return out
