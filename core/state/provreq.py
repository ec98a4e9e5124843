"""The ProvisioningRequest part of the cluster state: PodTemplates, requests and their conditions.

Folded from the events like the rest of ClusterState. A request's conditions are kept as the autoscaler
last wrote each type, with the time its status last changed (`lastTransitionTime`, what booking expiry
is measured from) and the time it was last written (what retry backoff and garbage collection are
measured from: upstream's AddOrUpdateCondition stamps `lastTransitionTime` on every write). A deleted
request (garbage-collected by the autoscaler) leaves `requests`; its key stays in `deleted`, so a
request of the same name may be created again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..log.events import (
    AdmissionCheckUpdated,
    KueueWorkloadUpdated,
    PodTemplateCreated,
    ProvisioningRequestCondition,
    ProvisioningRequestCreated,
    ProvisioningRequestDeleted,
)


@dataclass(frozen=True)
class RequestCondition:
    status: str
    reason: str
    message: str
    t: int  # lastTransitionTime: when the status last changed
    written_t: int = 0  # when the autoscaler last wrote it (a retry that failed again)
    group: str = ""  # the node group a scale-up asked, for Provisioned=True (CapacityIsProvisioned)


@dataclass
class RequestState:
    key: str  # namespace/name
    manifest: dict[str, Any]
    created_t: int
    conditions: dict[str, RequestCondition] = field(default_factory=dict)
    attempts: int = 0  # times Provisioned was set False (retry backoff)

    @property
    def cls(self) -> str:
        return str(self.manifest["spec"]["provisioningClassName"])

    def is_true(self, kind: str) -> bool:
        cond = self.conditions.get(kind)
        return cond is not None and cond.status == "True"

    @property
    def count(self) -> int:
        return sum(int(s["count"]) for s in self.manifest["spec"]["podSets"])


@dataclass(frozen=True)
class CheckState:
    """A workload's AdmissionCheckState for one check, as the broker last wrote it."""

    state: str  # Pending | Ready | Retry | Rejected
    attempt: int
    retry_at: int
    message: str
    t: int  # when it was written


@dataclass
class KueueWorkload:
    """A Kueue Workload's status as the broker last wrote it (KueueWorkloadUpdated): its last state, when it was
    admitted (-1: not admitted now), since when PodsReady=False after being True (-1: not so), the requeue count,
    the requeue time and the reason of its last eviction."""

    state: str
    t: int
    admitted_t: int = -1
    not_ready_t: int = -1
    ready_once: bool = False
    count: int = 0
    requeue_at: int = -1
    reason: str = ""
    evictions: int = 0  # every eviction, whatever its reason (Kueue 0.14 counts admission check retries too)


@dataclass
class ProvisioningState:
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ns/name" -> PodTemplate
    requests: dict[str, RequestState] = field(default_factory=dict)  # "ns/name" -> state, in creation order
    deleted: dict[str, int] = field(default_factory=dict)  # "ns/name" -> when it was deleted
    # Kueue's admission checks: (workload "ns/name", check) -> its latest state (core/controllers/kueue_broker.py)
    admission: dict[tuple[str, str], CheckState] = field(default_factory=dict)
    # Kueue's Workloads: "ns/name" -> its status (core/log/events_kueue.py), once the broker wrote one
    workloads: dict[str, KueueWorkload] = field(default_factory=dict)
    # how many of each Workload transition, by "state" or "state/reason" (the summary's `kueue` counts)
    workload_transitions: dict[str, int] = field(default_factory=dict)

    def apply(self, offset: int, t: int, event: object, anomalies: list[str]) -> bool:
        """Apply a ProvisioningRequest event; False if it is not one."""
        match event:
            case PodTemplateCreated():
                meta = event.manifest.get("metadata") or {}
                self.templates[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = event.manifest
            case ProvisioningRequestCreated():
                meta = event.manifest.get("metadata") or {}
                key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
                if key in self.requests:
                    anomalies.append(f"offset {offset}: ProvisioningRequest {key} created twice")
                    return True
                self.requests[key] = RequestState(key, event.manifest, t)
                self.deleted.pop(key, None)
            case ProvisioningRequestCondition():
                state = self.requests.get(event.request)
                if state is None:
                    anomalies.append(f"offset {offset}: condition for unknown ProvisioningRequest {event.request}")
                    return True
                old = state.conditions.get(event.condition)
                changed = old is None or old.status != event.status
                state.conditions[event.condition] = RequestCondition(
                    event.status, event.reason, event.message, t if changed or old is None else old.t, t, event.group)
                if event.condition == "Provisioned" and event.status == "False":
                    state.attempts += 1
            case ProvisioningRequestDeleted():
                if self.requests.pop(event.request, None) is None:
                    anomalies.append(f"offset {offset}: deletion of unknown ProvisioningRequest {event.request}")
                    return True
                self.deleted[event.request] = t
            case AdmissionCheckUpdated():
                self.admission[(event.workload, event.check)] = CheckState(
                    event.state, event.attempt, event.retry_at, event.message, t)
            case KueueWorkloadUpdated():
                self._on_workload(t, event)
            case _:
                return False
        return True

    def _on_workload(self, t: int, event: KueueWorkloadUpdated) -> None:
        old = self.workloads.get(event.workload)
        wl = KueueWorkload(event.state, t) if old is None else old
        wl.state, wl.t = event.state, t
        if event.state == "Admitted":
            wl.admitted_t, wl.not_ready_t, wl.ready_once = t, -1, False
        elif event.state == "PodsReady":
            wl.not_ready_t, wl.ready_once = -1, True
        elif event.state == "PodsNotReady":
            wl.not_ready_t = t
        elif event.state in ("Evicted", "Deactivated"):
            wl.admitted_t, wl.not_ready_t = -1, -1
            wl.count, wl.requeue_at, wl.reason = event.count, event.requeue_at, event.reason
            wl.evictions += 1
        self.workloads[event.workload] = wl
        name = f"{event.state}/{event.reason}" if event.state in ("Evicted", "Deactivated") else event.state
        self.workload_transitions[name] = self.workload_transitions.get(name, 0) + 1
