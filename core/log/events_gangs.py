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



# ------------------------------------------------ PodGroups (scheduling.k8s.io v1alpha2/v1alpha3/v1beta1, 1.36+)


def podgroup_key(namespace: str, name: str) -> str:
    return f"podgroup/{namespace}/{name}"


class PodGroupCreated(Event, tag="PodGroupCreated", frozen=True):
    """A PodGroup exists (KEP-4671 with KEP-5832's decoupled API, 1.36+): the runtime object its member pods
    name in `spec.schedulingGroup.podGroupName`. `manifest` is in the v1beta1 shape whatever version it was
    written in (core/kube/podgroups.py converts, as the API server stores one version)."""

    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        return (podgroup_key(*_meta(self.manifest)),)


class PodGroupConditionSet(Event, tag="PodGroupConditionSet", frozen=True):
    """The scheduler writes a condition of a PodGroup's status (a strategic merge patch in the scheduling
    cycle, KEP-4671 "Implementation Notes"): `PodGroupInitiallyScheduled` (1.37; `PodGroupScheduled` in 1.36)
    with reason `Scheduled`, `Unschedulable` or `SchedulerError`, and `DisruptionTarget` (reason
    `PreemptionByScheduler`, KEP-5710). The fold keeps `lastTransitionTime` when the status does not change."""

    group: str  # "<namespace>/<name>"
    condition: str  # the condition type
    status: str  # "True" | "False"
    reason: str
    message: str = ""
    kind: str = "PodGroup"  # or "CompositePodGroup" (KEP-6012: CompositePodGroupInitiallyScheduled, ...)

    def touched(self) -> tuple[str, ...]:
        prefix = "podgroup" if self.kind == "PodGroup" else "compositepodgroup"
        return (f"{prefix}/{self.group}",)


class CompositePodGroupCreated(Event, tag="CompositePodGroupCreated", frozen=True):
    """A CompositePodGroup exists (KEP-6012, 1.37 alpha): a level above PodGroups (or other composites) that
    point to it with `spec.parentCompositePodGroupName`; its policy is `basic` or `gang` with
    `minGroupCount` children that must be schedulable together."""

    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        namespace, name = _meta(self.manifest)
        return (f"compositepodgroup/{namespace}/{name}",)


class PodNominated(Event, tag="PodNominated", frozen=True):
    """The scheduler sets (or, with `node` empty, clears) a pod's status.nominatedNodeName: where a PodGroup that
    preempted expects its pods to go once the victims are gone (KEP-5710; KEP-5278). Until the pod binds or the
    nomination is cleared, the scheduler keeps that room for it: pods of lower priority do not take it."""

    pod: str
    node: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.pod, node_key(self.node)) if self.node else (self.pod,)

