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
from ..log.events import (
    CompositePodGroupCreated,
    PodGroupConditionSet,
    PodGroupCreated,
    PodNominated,
    PodReserved,
    WorkloadCreated,
)


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
class GroupCondition:
    """One condition of a PodGroup's status; `t` is its lastTransitionTime (cluster ms)."""

    type: str
    status: str
    reason: str
    message: str
    t: int
    offset: int


@dataclass
class PodGroupState:
    """A PodGroup (1.36+) as the fold knows it: its manifest (v1beta1 shape) and its status conditions."""

    key: str  # "<namespace>/<name>"
    manifest: dict[str, Any]
    created_offset: int
    conditions: dict[str, GroupCondition] = field(default_factory=dict)

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.manifest.get("spec") or {}
        return spec

    @property
    def min_count(self) -> int | None:
        """The gang's minCount; None for the basic policy."""
        return min_count(self.spec.get("schedulingPolicy") or {})

    @property
    def min_group_count(self) -> int | None:
        """A CompositePodGroup's gang `minGroupCount` (KEP-6012); None for the basic policy."""
        gang = (self.spec.get("schedulingPolicy") or {}).get("gang")
        return int(gang.get("minGroupCount") or 1) if isinstance(gang, dict) else None

    @property
    def parent(self) -> str | None:
        """The "ns/name" of the CompositePodGroup this group (or composite) belongs to, if any."""
        name = self.spec.get("parentCompositePodGroupName")
        return f"{self.key.split('/', 1)[0]}/{name}" if name else None

    @property
    def topology_key(self) -> str | None:
        """The node label key of the group's topology constraint (KEP-5732: at most one), or None."""
        topology = (self.spec.get("schedulingConstraints") or {}).get("topology") or []
        return str(topology[0].get("key")) if topology and isinstance(topology[0], dict) else None

    @property
    def priority(self) -> int | None:
        value = self.spec.get("priority")
        return int(value) if isinstance(value, int) else None

    def condition(self, kind: str) -> GroupCondition | None:
        return self.conditions.get(kind)


def scheduling_group(pod: dict[str, Any]) -> str | None:
    """The `<namespace>/<podGroupName>` a pod names in `spec.schedulingGroup` (1.36+), or None."""
    ref = (pod.get("spec") or {}).get("schedulingGroup")
    if not isinstance(ref, dict) or not ref.get("podGroupName"):
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    return f"{namespace}/{ref['podGroupName']}"


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
    # 1.36+: PodGroups ("ns/name" -> state), which PodGroup each pod names, the members of each name (also of
    # a PodGroup not created yet: its pods wait for it) and the offset its last member or the group arrived
    podgroups: dict[str, PodGroupState] = field(default_factory=dict)
    group_of: dict[str, str] = field(default_factory=dict)
    group_members: dict[str, dict[str, None]] = field(default_factory=dict)
    group_offset: dict[str, int] = field(default_factory=dict)
    composites: dict[str, PodGroupState] = field(default_factory=dict)  # CompositePodGroups (KEP-6012)
    nominated: dict[str, str] = field(default_factory=dict)  # pending pod -> its status.nominatedNodeName

    def workload_created(self, event: WorkloadCreated) -> None:
        meta = event.manifest.get("metadata") or {}
        self.workloads[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = event.manifest

    def apply_group_event(self, offset: int, t: int,
                          event: PodGroupCreated | CompositePodGroupCreated | PodGroupConditionSet | PodNominated
                          ) -> str | None:
        """Fold a PodGroup or CompositePodGroup event; the anomaly, if it makes no sense (None: applied)."""
        if isinstance(event, PodNominated):
            if event.node:
                self.nominated[event.pod] = event.node
            else:
                self.nominated.pop(event.pod, None)
            return None
        if isinstance(event, PodGroupConditionSet):
            group = (self.podgroups if event.kind == "PodGroup" else self.composites).get(event.group)
            if group is None:
                return f"condition {event.condition} of unknown {event.kind} {event.group}"
            old = group.conditions.get(event.condition)
            since = old.t if old is not None and old.status == event.status else t  # lastTransitionTime
            group.conditions[event.condition] = GroupCondition(event.condition, event.status, event.reason,
                                                               event.message, since, offset)
            return None
        meta = event.manifest.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        kind, store = (("PodGroup", self.podgroups) if isinstance(event, PodGroupCreated)
                       else ("CompositePodGroup", self.composites))
        if key in store:
            return f"{kind} {key} created twice"
        store[key] = PodGroupState(key, event.manifest, offset)
        if kind == "PodGroup":
            self.group_members.setdefault(key, {})
            self.group_offset[key] = offset
        return None

    def pod_created(self, offset: int, key: str, manifest: dict[str, Any]) -> None:
        group = scheduling_group(manifest)
        if group is not None:
            self.group_of[key] = group
            self.group_members.setdefault(group, {})[key] = None
            self.group_offset[group] = offset
            return
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

    def pod_bound(self, pod: str) -> Reservation | None:
        """A pod is bound: its nomination is done with, and its reservation (if it waited at Permit) returned."""
        self.nominated.pop(pod, None)
        return self.reservations.pop(pod, None)

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
