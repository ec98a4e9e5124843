"""Events of provisioning: ProvisioningRequests (autoscaling.x-k8s.io/v1), Kueue admission checks and the
autoscaler's scale-ups (the tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

from .event_base import Event, _meta, group_key, node_key

# ---------------------------------------------------------------- ProvisioningRequests (autoscaling.x-k8s.io/v1)


class PodTemplateCreated(Event, tag="PodTemplateCreated", frozen=True):
    """A v1 PodTemplate (what a ProvisioningRequest's pod sets refer to)."""

    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        ns, name = _meta(self.manifest)
        return (f"podtemplate/{ns}/{name}",)


class ProvisioningRequestCreated(Event, tag="ProvisioningRequestCreated", frozen=True):
    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        ns, name = _meta(self.manifest)
        return (f"provreq/{ns}/{name}",)


class ProvisioningRequestCondition(Event, tag="ProvisioningRequestCondition", frozen=True):
    """The autoscaler sets one condition of a request (`status.conditions[type]`)."""

    request: str  # "namespace/name"
    condition: str  # the condition type: Accepted | Provisioned | Failed | BookingExpired | CapacityRevoked
    status: str  # "True" | "False"
    reason: str
    message: str = ""
    group: str = ""  # Provisioned by a scale-up: the node group asked (the cloud may still fail it)

    def touched(self) -> tuple[str, ...]:
        return (f"provreq/{self.request}",)


class ProvisioningRequestDeleted(Event, tag="ProvisioningRequestDeleted", frozen=True):
    """The autoscaler deletes a finished request (cluster-autoscaler's DeleteOldProvReqs: its Provisioned
    or Failed condition was last written more than 7 days ago)."""

    request: str  # "namespace/name"
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (f"provreq/{self.request}",)


class AdmissionCheckUpdated(Event, tag="AdmissionCheckUpdated", frozen=True):
    """Kueue's ProvisioningRequest admission check writes a workload's AdmissionCheckState (the broker,
    core/controllers/kueue_broker.py): Pending (its request `attempt` is out), Ready, Retry (a new attempt
    at `retry_at`) or Rejected (retries exhausted)."""

    workload: str  # "namespace/name"
    check: str  # the AdmissionCheck's name
    state: str  # Pending | Ready | Retry | Rejected
    attempt: int = 0  # the attempt of the ProvisioningRequest `<workload>-<check>-<attempt>` it is about
    retry_at: int = -1  # Retry: cluster ms of the next attempt
    message: str = ""

    def touched(self) -> tuple[str, ...]:
        return (f"workload-check/{self.workload}/{self.check}",)


# ---------------------------------------------------------------- autoscaling


class ScaleUpRequested(Event, tag="ScaleUpRequested", frozen=True):
    group: str
    delta: int
    pods: tuple[str, ...] = ()  # pods this scale-up is meant to help
    atomic: bool = False  # all delta nodes or none (stock and quota checked for the whole request)
    booking: str = ""  # a ProvisioningRequest ("ns/name") its nodes are reserved for (autoscaler.reserveBookings)

    def touched(self) -> tuple[str, ...]:
        return (group_key(self.group),)


SCALE_UP_FAILURE_REASONS = ("out-of-stock", "quota", "instance-failed")


class ScaleUpFailed(Event, tag="ScaleUpFailed", frozen=True):
    """`delta` nodes of the group's oldest unanswered scale-up will not come (the cloud said so)."""

    group: str
    delta: int
    reason: str  # out-of-stock | quota | instance-failed

    def touched(self) -> tuple[str, ...]:
        return (group_key(self.group),)


class ScaleUpTimedOut(Event, tag="ScaleUpTimedOut", frozen=True):
    """The autoscaler gave up on nodes of the group that did not register within max-node-provision-time
    or did not turn ready within max-node-startup-time (cluster-autoscaler's ScaleUpTimedOut, a failed
    scale-up that backs the group off). The nodes themselves are untouched: deleting the unregistered
    ones is a separate `NodeDeleted`."""

    group: str
    nodes: tuple[str, ...]

    def touched(self) -> tuple[str, ...]:
        return (group_key(self.group), *(node_key(n) for n in self.nodes))

