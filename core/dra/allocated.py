"""Devices already in use: what the scheduler's PreFilter gathers from allocated claims.

Upstream (`GatherAllocatedState`, scheduler DynamicResources plugin, 1.35): for every result of every
allocated claim,

- a result with `adminAccess: true` is not "in use" (admin access never blocks anybody);
- a result with a `shareID` (a device that allows multiple allocations) goes to the shared set, and its
  `consumedCapacity` is added to the device's aggregated consumed capacity;
- every other result marks its device as in use (dedicated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..kube.quantity import parse_quantity
from .model import Claim, DeviceID


@dataclass
class AllocatedState:
    devices: set[DeviceID] = field(default_factory=set)  # dedicated, in use
    shared: set[tuple[DeviceID, str]] = field(default_factory=set)  # (device, shareID)
    # aggregated consumed capacity, keyed by capacity name as published (as `consumedCapacity` writes it)
    capacity: dict[DeviceID, dict[str, Fraction]] = field(default_factory=dict)

    @classmethod
    def from_claims(cls, claims: Iterable[Claim]) -> AllocatedState:
        state = cls()
        for claim in claims:
            if claim.allocation is not None:
                state.add_allocation(claim.allocation)
        return state

    def add_allocation(self, allocation: Mapping[str, Any]) -> None:
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess") is True:
                continue
            driver = str(result.get("driver", ""))
            dev = DeviceID(driver, str(result.get("pool", "")), str(result.get("device", "")))
            share = result.get("shareID")
            if share:
                self.shared.add((dev, str(share)))
                consumed = result.get("consumedCapacity") or {}
                if consumed or dev not in self.capacity:
                    agg = self.capacity.setdefault(dev, {})
                    for name, qty in consumed.items():
                        agg[str(name)] = agg.get(str(name), Fraction(0)) + parse_quantity(qty)
            else:
                self.devices.add(dev)

    def remove_allocation(self, allocation: Mapping[str, Any]) -> None:
        """Undo `add_allocation` (a claim deallocated): its devices and shares are free again."""
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess") is True:
                continue
            dev = DeviceID(str(result.get("driver", "")), str(result.get("pool", "")), str(result.get("device", "")))
            share = result.get("shareID")
            if share:
                self.shared.discard((dev, str(share)))
                agg = self.capacity.get(dev)
                if agg is not None:
                    for name, qty in (result.get("consumedCapacity") or {}).items():
                        agg[str(name)] = agg.get(str(name), Fraction(0)) - parse_quantity(qty)
                    if not any(d == dev for d, _ in self.shared):
                        del self.capacity[dev]
            else:
                self.devices.discard(dev)

    def shared_devices(self) -> set[DeviceID]:
        """Multi-allocatable devices with at least one committed share (their counters are consumed)."""
        return {dev for dev, _ in self.shared} | set(self.capacity)

    def copy(self) -> AllocatedState:
        return AllocatedState(set(self.devices), set(self.shared),
                              {d: dict(c) for d, c in self.capacity.items()})
