"""The DRA model the allocator works on: resource.k8s.io/v1 objects, validated and normalised.

This is the contract between the manifest loader (`api.py`, which turns YAML into these), the CEL
environment (`cel.py`, which evaluates selectors against a `Device`) and the allocator
(`allocator.py`). Manifests stay available (`manifest` fields) so that fields dralab ignores still
round-trip on output.

Normalisation rules (so nobody downstream has to redo them):
- attribute and capacity names are fully qualified: a bare `memory` on a device of driver
  `gpu.example.com` is stored as `gpu.example.com/memory` (upstream: names without a domain belong
  to the driver's domain);
- quantities are exact `Fraction`s (core.quantity.parse_quantity);
- defaults are filled in: allocationMode ExactCount, count 1, toleration operator Equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

AttributeKind = Literal["int", "bool", "string", "version"]
TaintEffect = str  # "NoSchedule" | "NoExecute" | "None" | anything else (treated like None)
AllocationMode = Literal["ExactCount", "All"]


@dataclass(frozen=True, order=True)
class DeviceID:
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True)
class Attribute:
    kind: AttributeKind
    value: int | bool | str  # version: the semver string as published


@dataclass(frozen=True)
class CapacityPolicy:
    """DeviceCapacity.requestPolicy (consumable capacity, KEP-5075)."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()  # ascending
    valid_range: tuple[Fraction, Fraction | None, Fraction | None] | None = None  # (min, max, step)


@dataclass(frozen=True)
class Capacity:
    value: Fraction
    policy: CapacityPolicy | None = None


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" matches every effect
    toleration_seconds: int | None = None

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True)
class CounterConsumption:
    counter_set: str
    counters: dict[str, Fraction]


@dataclass(frozen=True)
class NodeSelection:
    """Exactly one of the three is set (upstream's NodeSelection one-of)."""

    node_name: str | None = None
    node_selector: dict[str, Any] | None = None  # a v1 NodeSelector (one term for slices)
    all_nodes: bool = False


@dataclass(frozen=True, eq=False)
class Device:
    """Compared and hashed by identity: a changed device is a new object, so caches keyed by a
    device (selector results) can never serve a stale answer."""

    id: DeviceID
    slice_name: str
    attributes: dict[str, Attribute] = field(default_factory=dict)  # fully qualified names
    capacity: dict[str, Capacity] = field(default_factory=dict)  # fully qualified names
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[Taint, ...] = ()
    allow_multiple_allocations: bool = False
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    node_selection: NodeSelection | None = None  # only with the slice's perDeviceNodeSelection
    # Capacity names as the slice published them, where that differs from the qualified key above (a bare
    # id: `memory` for `gpu.example.com/memory`). Upstream matches a request's `capacity.requests` keys
    # against the published names verbatim and writes `consumedCapacity` with them.
    published_capacity_names: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Slice:
    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_selection: NodeSelection | None  # None when per_device_node_selection
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: dict[str, dict[str, Fraction]] = field(default_factory=dict)  # set -> counter -> value
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions
    config: tuple[dict[str, Any], ...] = ()  # DeviceClassConfiguration entries (opaque), as given
    extended_resource_name: str | None = None
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class SubRequest:
    """An `exactly` request, or one entry of `firstAvailable` (then `admin_access` is False)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    allocation_mode: AllocationMode = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[Toleration, ...] = ()
    # `capacity.requests` with the keys as written (a claim does not know the driver, so a bare id stays
    # bare); upstream matches them verbatim against the device's published capacity names.
    capacity_requests: dict[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    name: str
    exactly: SubRequest | None = None
    first_available: tuple[SubRequest, ...] = ()

    def choices(self) -> tuple[SubRequest, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...] = ()  # empty: every request; "req" covers its subrequests; "req/sub" one
    match_attribute: str | None = None  # fully qualified
    distinct_attribute: str | None = None


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    uid: str = ""
    requests: tuple[Request, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[dict[str, Any], ...] = ()  # DeviceClaimConfiguration entries, as given
    allocation: dict[str, Any] | None = None  # status.allocation when already allocated (in use)
    reserved_for: tuple[dict[str, Any], ...] = ()
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Inventory:
    """Everything read from the input files, by kind; names unique within a kind (and namespace)."""

    nodes: dict[str, Node] = field(default_factory=dict)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, Slice] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)  # key namespace/name
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # ResourceClaimTemplates, key ns/name
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # key ns/name
    # scheduling.k8s.io/v1alpha1 Workloads (KEP-4671 gangs), key ns/name, manifests as read
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    # scheduling.x-k8s.io/v1alpha1 PodGroups (scheduler-plugins Coscheduling gangs), key ns/name, manifests as read
    pod_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    other: list[dict[str, Any]] = field(default_factory=list)  # kinds dralab does not model, kept as-is
