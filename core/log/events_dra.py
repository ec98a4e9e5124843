"""Events of DRA objects (resource.k8s.io/v1): device classes, claims, templates, slices, allocations
(the tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

from .event_base import Event, _meta, _pool_keys, claim_key


class DeviceClassCreated(Event, tag="DeviceClassCreated", frozen=True):
    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        return (f"deviceclass/{_meta(self.manifest)[1]}",)


class ResourceClaimTemplateCreated(Event, tag="ResourceClaimTemplateCreated", frozen=True):
    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        ns, name = _meta(self.manifest)
        return (f"claimtemplate/{ns}/{name}",)


class ResourceClaimCreated(Event, tag="ResourceClaimCreated", frozen=True):
    """A claim exists: a shared one from the scenario, or one the resourceclaim controller made from
    a template for a pod (`pod` and `pod_claim` then say whose, as pod.status.resourceClaimStatuses)."""

    manifest: dict[str, Any]
    pod: str = ""  # owner pod key, for generated claims
    pod_claim: str = ""  # the pod's spec.resourceClaims[].name it was made for

    def touched(self) -> tuple[str, ...]:
        return (claim_key(*_meta(self.manifest)),) + ((self.pod,) if self.pod else ())


class ResourceSlicePublished(Event, tag="ResourceSlicePublished", frozen=True):
    manifest: dict[str, Any]

    def touched(self) -> tuple[str, ...]:
        return (f"slice/{_meta(self.manifest)[1]}",)


class ClaimAllocated(Event, tag="ClaimAllocated", frozen=True):
    """The scheduler's allocation of a claim (status.allocation) and its first consumer (reservedFor)."""

    claim: str  # claim key
    allocation: dict[str, Any]
    pod: str

    def touched(self) -> tuple[str, ...]:
        return (self.claim, *_pool_keys(self.allocation))


class ClaimReserved(Event, tag="ClaimReserved", frozen=True):
    """Another consumer of an allocated (shared) claim: appended to reservedFor."""

    claim: str
    pod: str

    def touched(self) -> tuple[str, ...]:
        return (self.claim,)


class ClaimReleased(Event, tag="ClaimReleased", frozen=True):
    """A consumer is gone from reservedFor; with `deallocate` the claim's devices are free again."""

    claim: str
    pod: str
    deallocate: bool = False

    def touched(self) -> tuple[str, ...]:
        return (self.claim,)


class DeviceTaintRuleCreated(Event, tag="DeviceTaintRuleCreated", frozen=True):
    """A DeviceTaintRule created, or its spec replaced (an update: same name) (core/dra/taint_rules.py). Its taint
    counts from `time_added_ms` (cluster ms: the taint's `timeAdded`, which the eviction controller adds
    `tolerationSeconds` to)."""

    manifest: dict[str, Any]
    time_added_ms: int = 0

    def touched(self) -> tuple[str, ...]:
        return (f"devicetaintrule/{_meta(self.manifest)[1]}",)


class DeviceTaintRuleDeleted(Event, tag="DeviceTaintRuleDeleted", frozen=True):
    """A DeviceTaintRule deleted: its taint is gone from every device."""

    name: str

    def touched(self) -> tuple[str, ...]:
        return (f"devicetaintrule/{self.name}",)


class DeviceTaintRuleStatus(Event, tag="DeviceTaintRuleStatus", frozen=True):
    """The device taint eviction controller's EvictionInProgress condition on a rule (`status.conditions`)."""

    name: str
    condition: dict[str, Any]
    evicted: int = 0  # pods evicted for this rule so far (the condition's message counts them)

    def touched(self) -> tuple[str, ...]:
        return (f"devicetaintrule/{self.name}",)
