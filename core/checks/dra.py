"""The DRA capacity invariant: shared counters and consumable capacity never exceeded, and only devices
that allow multiple allocations shared.

Upstream (KEP-4815 partitionable devices, KEP-5075 consumable capacity; the structured allocator's
`allocateDevice` in k8s.io/dynamic-resource-allocation/structured, 1.35): a device that consumes
counters from its pool's `sharedCounters` may only be allocated while every counter it consumes has
that much left, counting every device already allocated in the pool (a multi-allocatable device's
counters are consumed once, however many shares it has); a device shared through `shareID` may only
take a request while the sum of its shares' `consumedCapacity` stays within each capacity's value.
The scheduler's PreFilter counts both from allocated claims (core/dra/allocated.py); this module
counts them again from the state, independently of the allocator, so an allocator bug shows up.

What counts as in use: every allocated claim's results and the in-flight allocations of gang members
waiting at Permit (as `no-device-allocated-twice` counts them), `adminAccess` results aside (they
never consume). A device allocated twice is counted once here (that is the other invariant's job).

Cost: a full check visits the allocated devices and the devices of their pools. `CounterWatch` (used
by the incremental monitor) re-checks only the pools whose allocations changed since it last looked
(a set difference of the fold's allocated-device set, done in C), so a long log costs the changes,
not the cluster's size per record; it falls back to a full check when the slices changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from ..dra.consumable import published_capacity
from ..dra.model import Device, DeviceID
from ..kube.quantity import parse_quantity
from ..state.cluster import ClusterState

PoolKey = tuple[str, str]


def _results(allocation: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = ((allocation or {}).get("devices") or {}).get("results") or []
    return results


def _held(state: ClusterState) -> tuple[set[DeviceID], dict[DeviceID, dict[str, Fraction]], set[DeviceID]]:
    """Devices, consumed capacity and shared devices held by gang members waiting at Permit."""
    devices: set[DeviceID] = set()
    capacity: dict[DeviceID, dict[str, Fraction]] = {}
    shared: set[DeviceID] = set()
    for reservation in state.gang.reservations.values():
        for allocation in reservation.allocations.values():
            for result in _results(allocation):
                if result.get("adminAccess") is True:
                    continue
                dev = DeviceID(str(result.get("driver", "")), str(result.get("pool", "")),
                               str(result.get("device", "")))
                devices.add(dev)
                if result.get("shareID"):
                    shared.add(dev)
                    agg = capacity.setdefault(dev, {})
                    for name, qty in (result.get("consumedCapacity") or {}).items():
                        agg[str(name)] = agg.get(str(name), Fraction(0)) + parse_quantity(qty)
    return devices, capacity, shared


InUse = tuple[set[DeviceID], dict[DeviceID, dict[str, Fraction]], set[DeviceID]]


def _in_use(state: ClusterState) -> InUse:
    """Every device in use (dedicated or with a share), the consumed capacity of shared ones, and the
    devices allocated through a shareID."""
    allocated = state.dra.allocated
    shared = allocated.shared_devices()
    devices = set(allocated.devices) | shared
    capacity = {dev: dict(c) for dev, c in allocated.capacity.items()}
    held, held_capacity, held_shared = _held(state)
    devices |= held
    shared |= held_shared
    for dev, amounts in held_capacity.items():
        agg = capacity.setdefault(dev, {})
        for name, qty in amounts.items():
            agg[name] = agg.get(name, Fraction(0)) + qty
    return devices, capacity, shared


def _pool_view(state: ClusterState, pool: PoolKey) -> tuple[dict[str, Device], dict[str, dict[str, Fraction]]]:
    """The pool's devices by name and its counter sets, from the slices of its newest generation."""
    slices = state.dra.slice_index().by_pool.get(pool, [])
    newest = max((s.generation for s in slices), default=0)
    devices: dict[str, Device] = {}
    counters: dict[str, dict[str, Fraction]] = {}
    for slc in slices:
        if slc.generation != newest:
            continue
        for device in slc.devices:
            devices[device.id.device] = device
        counters.update(slc.shared_counters)
    return devices, counters


def counter_violations(state: ClusterState, pools: Iterable[PoolKey] | None = None) -> list[str]:
    """The violations in `pools` (None: every pool with a device in use), pools in sorted order."""
    devices, capacity, shared = _in_use(state)
    by_pool: dict[PoolKey, list[DeviceID]] = {}
    for dev in devices:
        by_pool.setdefault((dev.driver, dev.pool), []).append(dev)
    wanted = sorted(by_pool) if pools is None else sorted(set(pools) & by_pool.keys())
    out: list[str] = []
    for pool in wanted:
        published, counter_sets = _pool_view(state, pool)
        used: dict[tuple[str, str], Fraction] = {}
        for dev in sorted(by_pool[pool], key=lambda d: d.device):
            device = published.get(dev.device)
            if device is None:
                continue  # its slice is gone (node deleted): nothing left to exceed
            if dev in shared and not device.allow_multiple_allocations:
                out.append(f"device {dev.driver}/{dev.pool}/{dev.device}: allocated with a shareID but does not "
                           "allow multiple allocations")
            for consumption in device.consumes_counters:
                for name, amount in consumption.counters.items():
                    key = (consumption.counter_set, name)
                    used[key] = used.get(key, Fraction(0)) + amount
            caps = published_capacity(device)
            for name, amount in sorted((capacity.get(dev) or {}).items()):
                cap = caps.get(name)
                if cap is not None and amount > cap.value:
                    out.append(f"device {dev.driver}/{dev.pool}/{dev.device}: consumed {name} {_q(amount)} > "
                               f"capacity {_q(cap.value)}")
        for (counter_set, name), amount in sorted(used.items()):
            limit = (counter_sets.get(counter_set) or {}).get(name)
            if limit is None:
                out.append(f"pool {pool[0]}/{pool[1]}: devices in use consume counter {counter_set}/{name} "
                           "that the pool does not publish")
            elif amount > limit:
                out.append(f"pool {pool[0]}/{pool[1]}: counter {counter_set}/{name} {_q(amount)} in use > "
                           f"{_q(limit)}")
    return out


def counters_within_capacity(state: ClusterState) -> list[str]:
    """No pool's shared counters and no shared device's consumable capacity exceeded (KEP-4815, KEP-5075)."""
    return counter_violations(state)


def _q(amount: Fraction) -> str:
    return str(amount.numerator) if amount.denominator == 1 else f"{float(amount):g}"


class CounterWatch:
    """Which pools to re-check after a record (for the incremental monitor): those whose in-use devices
    (allocated or released) or consumed capacity changed, or every pool when the slices changed (then None)."""

    def __init__(self, state: ClusterState) -> None:
        self._devices: frozenset[DeviceID] = frozenset()
        self._capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self._slices: object = None
        self.dirty_pools(state, allocations=True)

    def dirty_pools(self, state: ClusterState, allocations: bool) -> list[PoolKey] | None:
        slices_changed = state.dra._index is None or state.dra._index is not self._slices
        if not allocations and not slices_changed:
            return []
        devices, capacity, _ = _in_use(state)
        frozen = frozenset(devices)
        # devices released count too: a pool still over its counters after a release shows another count
        # (a violation with a new message, which a full check after every record reports)
        added = frozen ^ self._devices
        changed = {dev for dev in capacity.keys() | self._capacity.keys()
                   if capacity.get(dev) != self._capacity.get(dev)}
        self._devices, self._capacity = frozen, capacity
        self._slices = state.dra.slice_index() if slices_changed else self._slices
        if slices_changed:
            return None
        return sorted({(d.driver, d.pool) for d in added | changed})
