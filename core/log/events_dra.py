"""Events of DRA objects (resource.k8s.io/v1): device classes, claims, templates, slices, allocations
(the tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

import msgspec

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


# ------------------------------------------ device binding conditions (KEP-5007; dra-bind)


class ClaimDeviceConditionSet(Event, tag="ClaimDeviceConditionSet", frozen=True):
    """A driver writes one condition of an allocated device in the claim's `status.devices[]` (keyed by
    driver, pool, device; DRAResourceClaimDeviceStatus): e.g. a fabric-attached device's binding condition
    turning True, or a bindingFailureCondition. Deallocation clears the claim's device conditions."""

    claim: str  # claim key
    driver: str
    pool: str
    device: str
    condition: str  # the condition's type
    status: str  # "True" | "False"
    at: int  # cluster ms: when the driver wrote it (the condition's lastTransitionTime)
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.claim, f"pool/{self.driver}/{self.pool}")


class PodBindingStarted(Event, tag="PodBindingStarted", frozen=True):
    """The scheduler's PreBind wrote the pod's claims (allocation, reservedFor) and now waits, the pod not
    bound, until every allocated device's bindingConditions are True (DynamicResources PreBind, KEP-5007):
    at most until `deadline` (cluster ms; `since` + the plugin's bindingTimeout). Meanwhile the pod holds
    its node's resources in the scheduler (its assumed pod); with `nominated` the scheduler set
    status.nominatedNodeName for the wait (KEP-5278, NominatedNodeNameForExpectation), which other
    components, the autoscaler among them, see."""

    pod: str
    node: str
    claims: tuple[str, ...]  # claim keys the wait is on
    since: int  # cluster ms: when PreBind started waiting
    deadline: int
    nominated: bool = False

    def touched(self) -> tuple[str, ...]:
        return (self.pod, f"node/{self.node}", *self.claims)


class PodBindingEnded(Event, tag="PodBindingEnded", frozen=True):
    """The PreBind wait is over: `bound` (a PodBound follows in the same record), or failed (a
    bindingFailureCondition True, the binding timeout, or the pod gone), `reason` saying which."""

    pod: str
    bound: bool
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class DeviceBindingRule(msgspec.Struct, frozen=True):
    """How an emulated driver answers a device's binding conditions once the scheduler's PreBind waits on it:
    `ready` (every binding condition True `delay_ms` after the wait started), `never` (nothing: the wait times
    out) or `fail` (its first bindingFailureCondition True after `delay_ms`, and the device tainted)."""

    driver: str
    device: str = ""  # "": every device of the driver not named by another rule
    delay_ms: int = 0
    outcome: str = "ready"


class DeviceBindingDefined(Event, tag="DeviceBindingDefined", frozen=True):
    """A node group's drivers' binding-condition behaviour (the scenario's `drivers[].bindingConditions`)."""

    group: str
    rules: tuple[DeviceBindingRule, ...]

    def touched(self) -> tuple[str, ...]:
        return (f"group/{self.group}",)
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
