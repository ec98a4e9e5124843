"""The event schema: every change to the cluster is one of these, appended to the log.

A log entry is a `Record`: who wrote it (`source`), the offset of the view it was computed from
(`view`, -1 for external inputs), the time it was decided at (`t`, milliseconds of cluster time) and
the events it carries. A decision of a reactor is one record, appended atomically, so a replay can
recompute it from the same view and compare.

Encoding is msgpack through msgspec Structs with a tagged union (about 5x faster to decode and
validate than typed msgpack decoding; the format: docs/log-format.md, "Encoding"). Every field is
always encoded (no omit-defaults: the bytes must not depend on how an equal value was built, since
verify compares bytes, and `v` must be on the wire for upcasters). Add fields at the end with
defaults, never reorder or rename; bump `SCHEMA_VERSION` and add an upcaster when a change is not
backwards compatible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

SCHEMA_VERSION = 1


class LogDecodeError(Exception):
    """A log entry that cannot be decoded; always names the offset so the user can find it."""

    def __init__(self, offset: int, detail: str) -> None:
        super().__init__(f"log entry at offset {offset}: {detail}")
        self.offset = offset
        self.detail = detail


class Event(msgspec.Struct, tag_field="type", frozen=True, array_like=False):
    """Base of all events. `touched()` lists the objects the event writes (for versions and conflicts)."""

    def touched(self) -> tuple[str, ...]:
        return ()


def pod_key(namespace: str, name: str) -> str:
    return f"pod/{namespace}/{name}"


def node_key(name: str) -> str:
    return f"node/{name}"


def group_key(name: str) -> str:
    return f"group/{name}"


# ---------------------------------------------------------------- run and configuration


class RunStarted(Event, tag="RunStarted", frozen=True):
    """First record of every run: what is needed to rebuild the reactors exactly (for verify)."""

    scenario: str
    seed: int
    config: dict[str, Any]  # reactor settings, see core/run/config.py run_config
    mode: str = "sim"  # sim | local | cluster
    speed: float = 1.0  # live runs: cluster ms per wall ms
    epoch: float = 0.0  # live runs: the wall-clock time (Unix s) of cluster time 0; an input like any other

    def touched(self) -> tuple[str, ...]:
        return ("run",)


class StockWindow(msgspec.Struct, frozen=True):
    """The cloud has at most `available` more nodes of a group to deliver in [from_ms, until_ms)."""

    from_ms: int
    until_ms: int  # -1: until the end of the run
    available: int


class UnhealthyDevice(msgspec.Struct, frozen=True):
    """A device its driver reports unhealthy `after_ms` after it first published (a device taint)."""

    device: str
    after_ms: int


class DriverSpec(msgspec.Struct, frozen=True):
    """How one DRA driver of a group's nodes behaves: when it publishes, restarts, reports faults."""

    name: str
    publish_delay_ms: tuple[int, int] = (0, 0)  # after the node turns Ready, drawn per node by the cloud
    restart_after_ms: int = -1  # restart (republish, generation + 1) this long after publishing; -1 never
    unhealthy: tuple[UnhealthyDevice, ...] = ()


class NodeGroupDefined(Event, tag="NodeGroupDefined", frozen=True):
    name: str
    min: int
    max: int
    provision_delay_ms: tuple[int, int]
    template: dict[str, Any]  # v1 Node manifest
    cost_per_hour: float = 0.0
    resource_slices: tuple[dict[str, Any], ...] = ()  # ResourceSlice templates its drivers publish
    # The cloud and the nodes (core/controllers/cloud.py, lifecycle.py, drivers.py); defaults: as before.
    zones: tuple[str, ...] = ()  # topology.kubernetes.io/zone of new nodes, round-robin
    quota: int = -1  # max nodes of the group the cloud runs at once (-1: no quota)
    stock: tuple[StockWindow, ...] = ()
    failure_rate: float = 0.0  # probability that one node of a request is not delivered
    drivers: tuple[DriverSpec, ...] = ()  # drivers not listed publish when the node turns Ready
    not_ready_ms: int = 0  # a new node registers this long before it turns Ready (within provision_delay)

    def touched(self) -> tuple[str, ...]:
        return (group_key(self.name),)


# ---------------------------------------------------------------- nodes


class NodeCreated(Event, tag="NodeCreated", frozen=True):
    """A node object exists (registered, not yet Ready). `group` is "" for nodes outside any group."""

    name: str
    group: str
    node: dict[str, Any]  # v1 Node manifest, name filled in
    ready_at: int = -1  # cluster ms when the node will turn Ready (-1: unknown)
    initial: bool = False  # part of the scenario's starting cluster, not of a scale-up

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),) + ((group_key(self.group),) if self.group else ())


class NodeReady(Event, tag="NodeReady", frozen=True):
    name: str

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeProvisioning(Event, tag="NodeProvisioning", frozen=True):
    """The cloud accepted one node of a scale-up: a VM is being made, the Node object does not exist yet.

    Its timing is the cloud's decision, drawn with the seeded source when the request is served and
    recorded here, so that the fold counts the node as coming and lifecycle/drivers replay it exactly."""

    name: str
    group: str
    node: dict[str, Any]  # the v1 Node manifest it registers with (name, group and zone labels filled in)
    register_at: int  # cluster ms when the kubelet registers the Node (NodeCreated, NotReady)
    ready_at: int  # cluster ms when it turns Ready
    publish_delay_ms: dict[str, int] = msgspec.field(default_factory=dict)  # driver -> ms after Ready

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name), group_key(self.group))


class NodeNotReady(Event, tag="NodeNotReady", frozen=True):
    """The node stopped reporting Ready (kubelet down, node failure): nothing new is placed on it."""

    name: str

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeTaintsChanged(Event, tag="NodeTaintsChanged", frozen=True):
    """spec.taints of the node replaced by `taints` (e.g. the autoscaler's ToBeDeletedByClusterAutoscaler)."""

    name: str
    taints: tuple[dict[str, Any], ...]

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


class NodeDeleted(Event, tag="NodeDeleted", frozen=True):
    """The Node object is gone (with its ResourceSlices). Pods still on it must be finished as Failed
    earlier in the same record (`lifecycle.delete_node` writes both); a node still provisioning is
    cancelled."""

    name: str
    reason: str = ""

    def touched(self) -> tuple[str, ...]:
        return (node_key(self.name),)


# ---------------------------------------------------------------- pods


class PodCreated(Event, tag="PodCreated", frozen=True):
    pod: dict[str, Any]  # v1 Pod manifest, namespace filled in
    run_for_ms: int = -1  # how long it runs once bound (-1: until the end)

    @property
    def key(self) -> str:
        meta = self.pod["metadata"]
        return pod_key(meta.get("namespace", "default"), meta["name"])

    def touched(self) -> tuple[str, ...]:
        return (self.key,)


class PodBound(Event, tag="PodBound", frozen=True):
    """The scheduler's binding. Writes the node too, so two bindings from stale views conflict."""

    pod: str  # pod key
    node: str

    def touched(self) -> tuple[str, ...]:
        return (self.pod, node_key(self.node))


class PodUnschedulable(Event, tag="PodUnschedulable", frozen=True):
    """PodScheduled=False. `reason` is the condition reason as upstream writes it (`Unschedulable`);
    `cause` is dralab's structured pending reason (capacity, topology, fragmentation, ...)."""

    pod: str
    reason: str
    message: str
    cause: str
    detail: str = ""  # dralab's evidence for the cause (e.g. the allocator's explanation)

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodFinished(Event, tag="PodFinished", frozen=True):
    pod: str
    phase: str = "Succeeded"

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodEvicted(Event, tag="PodEvicted", frozen=True):
    """The pod was evicted (the Eviction API, as cluster-autoscaler drains a node it scales down): it
    ends Failed, with the DisruptionTarget condition upstream writes; its controller, if any, makes a
    replacement. dralab models a zero grace period: the pod is gone in the same record."""

    pod: str
    node: str
    reason: str = ""  # who evicted it and why, e.g. "scale-down: unneeded"

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


class PodUngated(Event, tag="PodUngated", frozen=True):
    """One update of a pod: scheduling gates removed and annotations added (Kueue admitting a workload:
    it removes its `kueue.x-k8s.io/admission` gate and applies the admission check's podSetUpdates, e.g.
    the annotations that make the pod consume its ProvisioningRequest). Gates can only be removed."""

    pod: str  # pod key
    gates: tuple[str, ...]
    annotations: dict[str, str] = msgspec.field(default_factory=dict)

    def touched(self) -> tuple[str, ...]:
        return (self.pod,)


# ---------------------------------------------------------------- DRA (resource.k8s.io/v1)


def claim_key(namespace: str, name: str) -> str:
    return f"claim/{namespace}/{name}"


def _meta(manifest: dict[str, Any]) -> tuple[str, str]:
    meta = manifest.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _pool_keys(allocation: dict[str, Any]) -> tuple[str, ...]:
    """Allocations in one pool conflict: counters and shared capacity are accounted per pool."""
    results = (allocation.get("devices") or {}).get("results") or []
    return tuple(dict.fromkeys(f"pool/{r.get('driver')}/{r.get('pool')}" for r in results))


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


# ---------------------------------------------------------------- faults


class FaultInjected(Event, tag="FaultInjected", frozen=True):
    """A fault the world injects (a scenario's `spec.faults`, or `dralab chaos`'s random schedule): an
    external input like an arrival, so replay reproduces it and shrink can remove it. It says what, on
    what and for how long; the `chaos` reactor (core/controllers/chaos.py) turns a cluster fault into the
    cluster's events when it starts and ends (`FaultApplied`). `fault` is its id, `fault/<n>`."""

    fault: str
    kind: str  # core/scenario_faults.KINDS (docs/scenario-format.md#faults)
    target: str  # what it hits: a node's name
    until_ms: int = -1  # cluster ms it ends (-1: never)
    params: dict[str, Any] = msgspec.field(default_factory=dict)  # per kind, e.g. node-taint's `taint`

    def touched(self) -> tuple[str, ...]:
        return (self.fault,)


class FaultApplied(Event, tag="FaultApplied", frozen=True):
    """The chaos reactor started (`phase` start) or ended (end) a fault: the same record carries the
    cluster events that do it (a node NotReady, a taint), none when the target is gone (`note` says)."""

    fault: str
    phase: str  # start | end
    note: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.fault,)


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
