"""The event schema: every change to the cluster is one of these, appended to the log.

A log entry is a `Record`: who wrote it (`source`), the offset of the view it was computed from
(`view`, -1 for external inputs), the time it was decided at (`t`, milliseconds of cluster time) and
the events it carries. A decision of a reactor is one record, appended atomically, so a replay can
recompute it from the same view and compare.

Encoding is msgpack through msgspec Structs with a tagged union (about 5x faster to decode and
validate than typed msgpack decoding; the format: docs/log-format.md, "Encoding"). Every field is always encoded (no
omit-defaults: the bytes must not depend on how an equal value was built, since verify compares
bytes, and `v` must be on the wire for upcasters). Add fields at the end with defaults, never
reorder or rename; bump
`SCHEMA_VERSION` and add an upcaster when a change is not backwards compatible.

The events are defined per area (event_base: the base class and object keys; events_nodes: the run,
nodes and pods; events_dra; events_gangs; events_provisioning; events_faults); this module holds the
tagged union, the record, the codec and the upcasters, and is where every importer takes them from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .event_base import (
    Event,
    claim_key,
    group_key,
    node_key,
    pod_key,
)
from .events_autoscaler import AutoscalerEvent
from .events_cloud import (
    InstancePending,
    NodeDeleting,
    NodeDeletionFailed,
    NodeDeletionRequested,
    NodeGroupCloudDefined,
    NodePreemptionNotice,
    NodePreemptionScheduled,
)
from .events_dra import (
    ClaimAllocated,
    ClaimDeviceConditionSet,
    ClaimReleased,
    ClaimReserved,
    DeviceBindingDefined,
    DeviceBindingRule,
    DeviceClassCreated,
    DeviceTaintRuleCreated,
    DeviceTaintRuleDeleted,
    DeviceTaintRuleStatus,
    PodBindingEnded,
    PodBindingStarted,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    ResourceSlicePublished,
)
from .events_faults import (
    FaultApplied,
    FaultInjected,
)
from .events_gangs import (
    CompositePodGroupCreated,
    PodGroupConditionSet,
    PodGroupCreated,
    PodNominated,
    PodReserved,
    PodUnreserved,
    WorkloadCreated,
    podgroup_key,
    workload_key,
)
from .events_jobs import JobCreated, job_key
from .events_kueue import KueueWorkloadUpdated, PodDeleted
from .events_nodes import (
    DriverSpec,
    NodeCreated,
    NodeDeleted,
    NodeGroupDefined,
    NodeNotReady,
    NodeProvisioning,
    NodeReady,
    NodeTaintsChanged,
    PodBound,
    PodCreated,
    PodEvicted,
    PodFinished,
    PodTerminating,
    PodUngated,
    PodUnschedulable,
    RunStarted,
    StockWindow,
    UnhealthyDevice,
)
from .events_objects import ObjectCreated, ObjectDeleted, ObjectUpdated, ResourceClaimRemoved, object_key
from .events_provisioning import (
    SCALE_UP_FAILURE_REASONS,
    AdmissionCheckUpdated,
    PodTemplateCreated,
    ProvisioningRequestCondition,
    ProvisioningRequestCreated,
    ProvisioningRequestDeleted,
    ScaleUpFailed,
    ScaleUpRequested,
    ScaleUpTimedOut,
)
from .events_scaledown import NodesUnremovable, ScaleDownReported

__all__ = [
    "AdmissionCheckUpdated",
    "KueueWorkloadUpdated",
    "PodDeleted",
    "AnyEvent",
    "AutoscalerEvent",
    "ClaimAllocated",
    "ClaimDeviceConditionSet",
    "ClaimReleased",
    "ClaimReserved",
    "DeviceBindingDefined",
    "DeviceBindingRule",
    "DeviceClassCreated",
    "DeviceTaintRuleCreated",
    "DeviceTaintRuleDeleted",
    "DeviceTaintRuleStatus",
    "DriverSpec",
    "Event",
    "FaultApplied",
    "FaultInjected",
    "JobCreated",
    "LogDecodeError",
    "NodeCreated",
    "NodeDeleted",
    "NodeGroupDefined",
    "NodeNotReady",
    "NodeProvisioning",
    "NodeReady",
    "NodeTaintsChanged",
    "NodesUnremovable",
    "PodBindingEnded",
    "PodBindingStarted",
    "PodBound",
    "PodCreated",
    "PodEvicted",
    "PodTerminating",
    "PodFinished",
    "CompositePodGroupCreated",
    "PodGroupConditionSet",
    "PodGroupCreated",
    "PodNominated",
    "PodReserved",
    "PodTemplateCreated",
    "PodUngated",
    "PodUnreserved",
    "PodUnschedulable",
    "ProvisioningRequestCondition",
    "ProvisioningRequestCreated",
    "ProvisioningRequestDeleted",
    "Record",
    "ResourceClaimCreated",
    "ResourceClaimTemplateCreated",
    "ResourceSlicePublished",
    "RunStarted",
    "SCALE_UP_FAILURE_REASONS",
    "SCHEMA_VERSION",
    "ScaleDownReported",
    "ScaleUpFailed",
    "ScaleUpRequested",
    "ScaleUpTimedOut",
    "StockWindow",
    "UPCASTERS",
    "UnhealthyDevice",
    "Upcaster",
    "WorkloadCreated",
    "ObjectCreated",
    "ObjectDeleted",
    "ObjectUpdated",
    "ResourceClaimRemoved",
    "object_key",
    "InstancePending",
    "NodeDeleting",
    "NodeDeletionFailed",
    "NodeDeletionRequested",
    "NodeGroupCloudDefined",
    "NodePreemptionNotice",
    "NodePreemptionScheduled",
    "claim_key",
    "decode_record",
    "encode_record",
    "group_key",
    "job_key",
    "node_key",
    "pod_key",
    "podgroup_key",
    "record_to_builtins",
    "workload_key",
]

SCHEMA_VERSION = 1


class LogDecodeError(Exception):
    """A log entry that cannot be decoded; always names the offset so the user can find it."""

    def __init__(self, offset: int, detail: str) -> None:
        super().__init__(f"log entry at offset {offset}: {detail}")
        self.offset = offset
        self.detail = detail


AnyEvent = (
    RunStarted
    | NodeGroupDefined
    | NodeCreated
    | NodeReady
    | PodCreated
    | PodBound
    | PodUnschedulable
    | PodFinished
    | PodEvicted
    | PodTerminating
    | ScaleUpRequested
    | NodeProvisioning
    | NodeNotReady
    | NodeTaintsChanged
    | NodeDeleted
    | ScaleUpFailed
    | DeviceClassCreated
    | ResourceClaimTemplateCreated
    | ResourceClaimCreated
    | ResourceSlicePublished
    | ClaimAllocated
    | ClaimReserved
    | ClaimReleased
    | WorkloadCreated
    | PodReserved
    | PodUnreserved
    | PodTemplateCreated
    | ProvisioningRequestCreated
    | ProvisioningRequestCondition
    | ScaleUpTimedOut
    | ProvisioningRequestDeleted
    | PodUngated
    | AdmissionCheckUpdated
    | FaultInjected
    | FaultApplied
    | PodGroupCreated
    | PodGroupConditionSet
    | CompositePodGroupCreated
    | JobCreated
    | PodNominated
    | ClaimDeviceConditionSet
    | PodBindingStarted
    | PodBindingEnded
    | DeviceBindingDefined
    | DeviceTaintRuleCreated
    | DeviceTaintRuleDeleted
    | DeviceTaintRuleStatus
    | KueueWorkloadUpdated
    | PodDeleted
    | ObjectUpdated
    | ObjectDeleted
    | ResourceClaimRemoved
    | ObjectCreated
    | NodeGroupCloudDefined
    | NodeDeletionRequested
    | NodeDeleting
    | NodeDeletionFailed
    | InstancePending
    | NodePreemptionNotice
    | NodePreemptionScheduled
    | ScaleDownReported
    | NodesUnremovable
    | AutoscalerEvent
)


class Record(msgspec.Struct, frozen=True):
    """One log entry. The offset is assigned by the log and is not part of the payload."""

    id: str  # idempotency id: a retried append of the same decision is recognised
    source: str  # "scenario" for external inputs, else the reactor's name
    view: int  # offset of the view the decision was computed from; -1 for external inputs
    t: int  # cluster time in ms
    events: tuple[AnyEvent, ...]
    v: int = SCHEMA_VERSION

    def writes(self) -> tuple[str, ...]:
        """Keys written by this record, deduplicated, in first-seen order."""
        seen: dict[str, None] = {}
        for event in self.events:
            for key in event.touched():
                seen.setdefault(key, None)
        return tuple(seen)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Record)


def encode_record(record: Record) -> bytes:
    return _encoder.encode(record)


# Upcasters: UPCASTERS[v] turns a record of schema version v, as plain builtins (the msgpack map: a dict
# with "events" a list of dicts tagged by "type"), into the shape of version v + 1 and sets "v" to v + 1.
# `decode_record` chains them up to SCHEMA_VERSION, and only for records whose `v` is older (or that no
# longer validate against today's schema and say they are older): current records pay nothing. The result
# is validated against today's schema. Log files keep the stored bytes as they were (verify compares them).
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[int, Upcaster] = {}


def decode_record(payload: bytes, offset: int) -> Record:
    """Decode and validate one entry; any failure is a LogDecodeError naming the offset."""
    try:
        record = _decoder.decode(payload)
    except msgspec.ValidationError as exc:
        return _upcast(payload, offset, f"invalid record: {exc}")
    except msgspec.DecodeError as exc:
        raise LogDecodeError(offset, f"malformed payload: {exc}") from None
    if record.v != SCHEMA_VERSION:
        if record.v > SCHEMA_VERSION:
            raise LogDecodeError(
                offset, f"schema version {record.v} is newer than this dralab understands ({SCHEMA_VERSION})"
            )
        return _upcast(payload, offset, f"schema version {record.v} has no upcaster")
    return record


def _upcast(payload: bytes, offset: int, why: str) -> Record:
    """The slow path: an old record (by its `v`) taken through the upcasters, then validated. `why` is the
    error to raise when it is not an old record or no upcaster chain reaches SCHEMA_VERSION."""
    try:
        raw = msgspec.msgpack.decode(payload)
    except msgspec.DecodeError as exc:
        raise LogDecodeError(offset, f"malformed payload: {exc}") from None
    v = raw.get("v", 1) if isinstance(raw, dict) else None
    if not isinstance(v, int) or isinstance(v, bool) or v >= SCHEMA_VERSION:
        raise LogDecodeError(offset, why)
    if v < 1:
        raise LogDecodeError(offset, f"schema version {v} is not a version dralab ever wrote")
    start = v
    while v < SCHEMA_VERSION:
        upcaster = UPCASTERS.get(v)
        if upcaster is None:
            raise LogDecodeError(offset, f"schema version {v} is older than {SCHEMA_VERSION} and no upcaster "
                                         f"takes it to {v + 1}")
        try:
            raw = upcaster(raw)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise LogDecodeError(offset, f"upcasting from schema version {v} failed: {exc!r}") from None
        if not isinstance(raw, dict) or raw.get("v") != v + 1:
            raise LogDecodeError(offset, f"the upcaster from schema version {v} did not give version {v + 1}")
        v += 1
    try:
        return msgspec.convert(raw, Record)
    except msgspec.ValidationError as exc:
        raise LogDecodeError(offset, f"invalid record after upcasting from version {start}: {exc}") from None


def record_to_builtins(record: Record) -> Any:
    """A JSON-friendly form of a record (for dumps and divergence reports)."""
    return msgspec.to_builtins(record)
