"""The DRA part of the cluster state: device classes, templates, claims, slices, what is allocated.

Folded from the DRA events like the rest of ClusterState. Manifests are converted to the allocator's
model (core/dra/model.py) once, when they enter the log. A manifest the converter refuses is kept
out and noted as an anomaly (the log is the truth; a bad object must not crash every reader).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .dra.allocated import AllocatedState
from .dra.claims import convert_claim
from .dra.convert import convert_device_class, convert_slice
from .dra.model import Claim, DeviceClass, Slice
from .dra.pools import SliceIndex
from .events import (
    ClaimAllocated,
    ClaimReleased,
    ClaimReserved,
    DeviceClassCreated,
    ResourceClaimCreated,
    ResourceClaimTemplateCreated,
    ResourceSlicePublished,
    claim_key,
)

T = TypeVar("T")
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize


@dataclass
class ClaimState:
    claim: Claim
    owner: str = ""  # pod key of the pod it was generated for ("" for shared claims)
    allocation: dict[str, Any] | None = None
    reserved_for: dict[str, None] = field(default_factory=dict)  # pod keys, ordered


@dataclass
class DraState:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # "ns/name" -> manifest
    claims: dict[str, ClaimState] = field(default_factory=dict)  # claim key -> state
    slices: dict[str, Slice] = field(default_factory=dict)  # slice name -> slice
    pod_claims: dict[str, dict[str, str]] = field(default_factory=dict)  # pod key -> {pod claim name: claim key}
    allocated: AllocatedState = field(default_factory=AllocatedState)
    _index: SliceIndex | None = None  # derived from `slices`, dropped whenever a slice changes

    def slice_index(self) -> SliceIndex:
        """The allocator's index of the slices, built once per change of the slices."""
        if self._index is None:
            self._index = SliceIndex.build(list(self.slices.values()))
        return self._index

    def remove_node_slices(self, node: str) -> None:
        """A deleted node's slices go with it (they are owned by the Node upstream). Allocations from
        them stay until their claims are released."""
        gone = [name for name, slc in self.slices.items()
                if slc.node_selection is not None and slc.node_selection.node_name == node]
        for name in gone:
            del self.slices[name]
        if gone:
            self._index = None

    def apply(self, offset: int, event: object, anomalies: list[str]) -> bool:
        """Apply a DRA event; False if it is not one."""
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
                sl = _convert(convert_slice, event.manifest, offset, anomalies)
                if sl is not None:
                    self.slices[sl.name] = sl
                    self._index = None
            case ClaimAllocated():
                state = self.claims.get(event.claim)
                if state is None or state.allocation is not None:
                    anomalies.append(f"offset {offset}: allocation of {event.claim}: unknown or already allocated")
                    return True
                state.allocation = event.allocation
                state.reserved_for[event.pod] = None
                self.allocated.add_allocation(event.allocation)
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
                    state.allocation = None
            case _:
                return False
        return True

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
