"""The DRA part of the cluster state: device classes, templates, claims, slices, what is allocated.

Folded from the DRA events like the rest of ClusterState. Manifests are converted to the allocator's
model (core/dra/model.py) once, when they enter the log. A manifest the converter refuses is kept
out and noted as an anomaly (the log is the truth; a bad object must not crash every reader).

Slices are converted through `convert_published_slice`: the slices a node group's drivers publish on
thousands of nodes differ only in their name, pool name and node name, so the conversion of the
rest (the devices: attributes, capacities, taints, checked field by field) is done once per shape and
reused, with the per-node fields checked and filled in each time. The result equals what
`convert_slice` gives (tests/test_nodes_drivers.py), so the fold, and every decision on it, is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import msgspec

from ..dra.allocated import AllocatedState
from ..dra.checks import check_metadata
from ..dra.claims import convert_claim
from ..dra.convert import _slice_node_selection, convert_device_class, convert_slice
from ..dra.model import Claim, Device, DeviceClass, DeviceID, Slice
from ..dra.pools import SliceIndex
from ..dra.validation import check_pool_name, obj_str
from ..kube.fields import join
from ..log.events import (
    ClaimAllocated,
    ClaimDeviceConditionSet,
    ClaimReleased,
    ClaimReserved,
    DeviceBindingDefined,
    DeviceBindingRule,
    DeviceClassCreated,
    PodBindingEnded,
    PodBindingStarted,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    ResourceSlicePublished,
    claim_key,
)
from .device_taints import DeviceTaintState

T = TypeVar("T")
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize


@dataclass
class ClaimState:
    claim: Claim
    owner: str = ""  # pod key of the pod it was generated for ("" for shared claims)
    allocation: dict[str, Any] | None = None
    reserved_for: dict[str, None] = field(default_factory=dict)  # pod keys, ordered


class BindingWait(msgspec.Struct, frozen=True):
    """A pod waiting in the scheduler's PreBind for its devices' binding conditions (KEP-5007): the pod is
    not bound, its claims are allocated and reserved for it; see PodBindingStarted."""

    pod: str
    node: str
    claims: tuple[str, ...]
    since: int
    deadline: int
    nominated: bool = False


def device_ref(driver: str, pool: str, device: str) -> str:
    """The key of an allocated device in `DraState.device_conditions` (status.devices' list-map key)."""
    return f"{driver}/{pool}/{device}"


@dataclass
class DraState:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ns/name" -> manifest
    claims: dict[str, ClaimState] = field(default_factory=dict)  # claim key -> state
    slices: dict[str, Slice] = field(default_factory=dict)  # slice name -> slice
    pod_claims: dict[str, dict[str, str]] = field(default_factory=dict)  # pod key -> {pod claim name: claim key}
    allocated: AllocatedState = field(default_factory=AllocatedState)
    # claim key -> device_ref -> condition type -> (status, lastTransitionTime): the claims'
    # status.devices[].conditions as the drivers wrote them (ClaimDeviceConditionSet); cleared on deallocation
    device_conditions: dict[str, dict[str, dict[str, tuple[str, int]]]] = field(default_factory=dict)
    binding: dict[str, BindingWait] = field(default_factory=dict)  # pod key -> its PreBind wait (KEP-5007)
    # node group -> how its emulated drivers answer binding conditions (core/controllers/device_binding.py)
    binding_rules: dict[str, tuple[DeviceBindingRule, ...]] = field(default_factory=dict)
    taint_rules: DeviceTaintState = field(default_factory=DeviceTaintState)  # DeviceTaintRules (device_taints.py)
    # claim key -> cluster ms of its deletion: claims deleted while allocated or reserved, kept by the
    # delete-protection finalizer until the resourceclaim controller removes it (state/object_changes.py)
    deleting: dict[str, int] = field(default_factory=dict)
    # derived from `slices` when first asked for, then kept by every change of them (SliceIndex.put/drop);
    # a cache, so not part of equality nor of the snapshot
    _index: SliceIndex | None = field(default=None, compare=False, repr=False)
    # The names of the slices published or removed, in fold order: a journal that the drivers reactor reads
    # on from where it stopped, rather than look at every node's slices (core/controllers/drivers_cache.py).
    slice_changes: list[str] = field(default_factory=list, compare=False, repr=False)
    # The pools (driver, pool) of every device allocated or freed, in fold order: a journal that the
    # autoscaler's utilization cache reads on (core/autoscaler/disruption/utilization_cache.py).
    allocation_changes: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)

    def allocation_changed(self, allocation: dict[str, Any]) -> None:
        """Note the pools of an allocation made or freed (the journal `allocation_changes`)."""
        for result in (allocation.get("devices") or {}).get("results") or []:
            self.allocation_changes.append((str(result.get("driver", "")), str(result.get("pool", ""))))

    def slice_index(self) -> SliceIndex:
        """The allocator's index of the slices: built the first time, then kept up to date by the fold."""
        if self._index is None:
            self._index = SliceIndex.build(list(self.slices.values()))
        return self._index

    def remove_node_slices(self, node: str) -> None:
        """A deleted node's slices go with it (they are owned by the Node upstream). Allocations from
        them stay until their claims are released. Found through the index's slices by node name, not by
        scanning every slice (issue 24: that made deleting nodes quadratic in the nodes)."""
        if not self.slices:
            return
        index = self.slice_index()
        for name in list(index.named.get(node, ())):
            del self.slices[name]
            self.taint_rules.no_execute_since.pop(name, None)
            index = index.drop(name)
            self.slice_changes.append(name)
        self._index = index

    def apply(self, offset: int, event: object, anomalies: list[str], t: int = 0) -> bool:
        """Apply a DRA event (at cluster time `t`); False if it is not one."""
        match event:
            case DeviceClassCreated():
                cls = _convert(convert_device_class, event.manifest, offset, anomalies)
                if cls is not None:
                    self.classes[cls.name] = cls
            case ResourceClaimTemplateCreated():
                meta = event.manifest.get("metadata") or {}
                self.templates[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = event.manifest
            case ResourceClaimCreated():
                self._claim_created(offset, event, anomalies)
            case ResourceSlicePublished():
                sl = _convert(convert_published_slice, event.manifest, offset, anomalies)
                if sl is not None:
                    self.slices[sl.name] = sl
                    if self._index is not None:
                        self._index = self._index.put(sl)
                    self.slice_changes.append(sl.name)
                    self.taint_rules.slice_published(sl, t)  # when its NoExecute taints appeared (device_taints.py)
            case ClaimAllocated():
                state = self.claims.get(event.claim)
                if state is None or state.allocation is not None:
                    anomalies.append(f"offset {offset}: allocation of {event.claim}: unknown or already allocated")
                    return True
                state.allocation = event.allocation
                state.reserved_for[event.pod] = None
                self.allocated.add_allocation(event.allocation)
                self.allocation_changed(event.allocation)
            case ClaimReserved():
                state = self.claims.get(event.claim)
                if state is None or state.allocation is None:
                    anomalies.append(f"offset {offset}: reservation of {event.claim}: unknown or not allocated")
                    return True
                if len(state.reserved_for) >= RESERVED_FOR_MAX:
                    anomalies.append(f"offset {offset}: {event.claim}: reservedFor over {RESERVED_FOR_MAX}")
                state.reserved_for[event.pod] = None
            case ClaimReleased():
                state = self.claims.get(event.claim)
                if state is None:
                    anomalies.append(f"offset {offset}: release of unknown claim {event.claim}")
                    return True
                state.reserved_for.pop(event.pod, None)
                if event.deallocate and state.allocation is not None:
                    self.allocated.remove_allocation(state.allocation)
                    self.allocation_changed(state.allocation)
                    state.allocation = None
                    self.device_conditions.pop(event.claim, None)
            case DeviceBindingDefined():
                self.binding_rules[event.group] = event.rules
            case ClaimDeviceConditionSet() | PodBindingStarted() | PodBindingEnded():
                self._binding_event(offset, event, anomalies)
            case _:
                return self.taint_rules.apply(offset, event, anomalies, t)
        return True

    def _binding_event(self, offset: int, event: ClaimDeviceConditionSet | PodBindingStarted | PodBindingEnded,
                       anomalies: list[str]) -> None:
        """Device binding conditions (KEP-5007): a driver's condition, a PreBind wait starting or ending."""
        if isinstance(event, ClaimDeviceConditionSet):
            state = self.claims.get(event.claim)
            if state is None or state.allocation is None:
                anomalies.append(f"offset {offset}: device condition of {event.claim}: unknown or not allocated")
                return
            ref = device_ref(event.driver, event.pool, event.device)
            conditions = self.device_conditions.setdefault(event.claim, {}).setdefault(ref, {})
            if conditions.get(event.condition, ("", 0))[0] != event.status:
                conditions[event.condition] = (event.status, event.at)
        elif isinstance(event, PodBindingStarted):
            if event.pod in self.binding:
                anomalies.append(f"offset {offset}: {event.pod} already waits in PreBind")
                return
            self.binding[event.pod] = BindingWait(event.pod, event.node, event.claims, event.since, event.deadline,
                                                  event.nominated)
        elif self.binding.pop(event.pod, None) is None:
            anomalies.append(f"offset {offset}: PreBind wait of {event.pod} ended but it was not waiting")

    def _claim_created(self, offset: int, event: ResourceClaimCreated, anomalies: list[str]) -> None:
        claim = _convert(convert_claim, event.manifest, offset, anomalies)
        if claim is None:
            return
        key = claim_key(claim.namespace, claim.name)
        if key in self.claims:
            anomalies.append(f"offset {offset}: claim {key} created twice")
            return
        self.claims[key] = ClaimState(claim, owner=event.pod)
        if event.pod:
            self.pod_claims.setdefault(event.pod, {})[event.pod_claim] = key


def _convert(convert: Callable[[dict[str, Any], str], T], manifest: dict[str, Any], offset: int,
             anomalies: list[str]) -> T | None:
    """Convert a manifest to the model; one the converter refuses is noted and left out."""
    try:
        return convert(manifest, "")
    except ValueError as exc:
        anomalies.append(f"offset {offset}: {manifest.get('kind', 'object')} refused: {exc}")
        return None


# convert_published_slice builds each Device with every field of the class: a field added to Device
# must be added there too (this fails at import otherwise).
assert [f.name for f in fields(Device)] == [
    "id", "slice_name", "attributes", "capacity", "consumes_counters", "taints", "allow_multiple_allocations",
    "binds_to_node", "binding_conditions", "binding_failure_conditions", "node_selection",
    "published_capacity_names"], "Device changed: update convert_published_slice"
SLICE_SHAPES_MAX = 1024  # shapes kept by convert_published_slice (then it starts afresh)
_slice_shapes: dict[bytes, Slice] = {}  # a slice's shape (without its per-node fields) -> a conversion of it
_KEY_ENCODER = msgspec.msgpack.Encoder()


def _shape_key(manifest: dict[str, Any]) -> bytes | None:
    """The slice without the fields a driver sets per node (`metadata.name`, `spec.pool.name`,
    `spec.nodeName`), as bytes; None for a slice not published that way (no `nodeName`, a map or a
    string missing where one is expected), which is converted in full."""
    meta, spec = manifest.get("metadata"), manifest.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    pool = spec.get("pool")
    if not (isinstance(pool, dict) and isinstance(meta.get("name"), str) and isinstance(pool.get("name"), str)
            and isinstance(spec.get("nodeName"), str)):
        return None
    shape = {**manifest, "metadata": {**meta, "name": None},
             "spec": {**spec, "pool": {**pool, "name": None}, "nodeName": None}}
    try:
        return _KEY_ENCODER.encode(shape)
    except (TypeError, ValueError, OverflowError):  # not plain data: convert it in full
        return None


def convert_published_slice(manifest: dict[str, Any], path: str = "") -> Slice:
    """`convert_slice`, reusing the conversion of a slice of the same shape (see the module's doc):
    the same Slice, or the same error, as `convert_slice(manifest, path)`."""
    key = _shape_key(manifest)
    if key is None:
        return convert_slice(manifest, path)
    seen = _slice_shapes.get(key)
    if seen is None:
        converted = convert_slice(manifest, path)
        if len(_slice_shapes) >= SLICE_SHAPES_MAX:
            _slice_shapes.clear()
        _slice_shapes[key] = converted
        return converted
    # Only the per-node fields differ from a slice that converted: check them as convert_slice does, in
    # its order (the name, then the pool's name, then the node selection), so the first error is its own.
    name, _ = check_metadata(manifest, path, namespaced=False)
    spec_path = join(path, "spec")
    spec = manifest["spec"]
    pool_path = join(spec_path, "pool")
    pool_name = check_pool_name(obj_str(spec["pool"], "name", pool_path), join(pool_path, "name"))
    selection, per_device = _slice_node_selection(spec, spec_path)
    driver = seen.driver
    # New Devices (a device is known by its identity), sharing the shape's attribute and capacity maps:
    # the model's objects are never changed once converted (frozen dataclasses; nothing writes to them).
    devices = tuple(Device(  # every field of Device, as dataclasses.replace would (but faster)
        id=DeviceID(driver, pool_name, d.id.device), slice_name=name, attributes=d.attributes,
        capacity=d.capacity, consumes_counters=d.consumes_counters, taints=d.taints,
        allow_multiple_allocations=d.allow_multiple_allocations, binds_to_node=d.binds_to_node,
        binding_conditions=d.binding_conditions, binding_failure_conditions=d.binding_failure_conditions,
        node_selection=d.node_selection, published_capacity_names=d.published_capacity_names,
    ) for d in seen.devices)
    return Slice(name=name, driver=driver, pool=pool_name, generation=seen.generation,
                 resource_slice_count=seen.resource_slice_count, node_selection=selection,
                 per_device_node_selection=per_device, devices=devices, shared_counters=seen.shared_counters,
                 manifest=manifest)
