"""The DRA drivers of the nodes (their kubelet plugins), as one reactor: what each publishes, and when.

Each driver of a node group (the `spec.driver` of its ResourceSlice templates) runs on every node of
the group and publishes its pool: the templates of that driver rendered for the node (pool name = node
name, `pool.generation`, `pool.resourceSliceCount`), `publish_delay_ms` after the node first turned
Ready (the cloud drew that delay when it made the node; a starting node's drivers published at t=0).
Until then the node is Ready but has no devices, which is what an autoscaler must not mistake for a
node without devices.

The reactor is a level-based reconciler: from the node's first Ready time and the group's driver
settings it computes what each slice should look like now and publishes the slices that differ from
the published ones. That covers the scenario's faults too:

- a driver restart (`restart_after_ms` after it first published) republishes its pool with
  generation + 1, as a restarted plugin does; the allocator then only uses the new generation;
- a `driver-republish` fault republishes the pool with devices removed or changed, generation + 1
  (core/cluster/driver_faults.py);
- an unhealthy device (`unhealthy[].after_ms` after it first published) is republished in its slice
  with a device taint (`<driver>/unhealthy`, NoSchedule): the allocator leaves it out for requests that
  do not tolerate it, and allocations made before stay (NoSchedule does not evict).

The device faults of `spec.faults` (`driver-crash`, `driver-slow`, `device-unhealthy`) move those times
or add to what is wanted: core/cluster/driver_faults.py says how.

Every other field of the templates (shared counters of partitionable devices, consumable capacity) is
published as given, at every republication.

Sharding: with `shards` > 1 a run has that many drivers reactors (`drivers-0`, `drivers-1`, ...), each
hosting the drivers of the nodes whose name hashes (CRC-32) to its index, so that thousands of nodes
are a few processes, not thousands. One shard (the default) is the reactor `drivers`, as before.
"""

from __future__ import annotations

import copy
import random
import zlib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from ..cluster.driver_faults import DriverFaults, driver_faults
from ..cluster.nodes import copier
from ..dra.model import Slice
from ..engine.contract import Decision, Trigger
from ..log.events import AnyEvent, DriverSpec, ResourceSlicePublished
from ..scenario.dra import render_slice_templates, slice_name
from ..state.cluster import ClusterState, NodeGroupState, NodeState
from .device_binding import binding_events
from .drivers_cache import DirtyNodes


def unhealthy_taint(driver: str) -> dict[str, Any]:
    """The device taint a driver puts on a device it reports unhealthy."""
    return {"key": f"{driver}/unhealthy", "effect": "NoSchedule"}


def drivers_of(templates: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[str]:
    """The drivers of a group's slice templates, in the order they first appear."""
    return list(dict.fromkeys(str(t["spec"]["driver"]) for t in templates))


def driver_slices(templates: tuple[dict[str, Any], ...] | list[dict[str, Any]], node: str, driver: str,
                  generation_bump: int = 0, unhealthy: frozenset[str] = frozenset(),
                  copiers: list[Any] | None = None) -> list[dict[str, Any]]:
    """The slices `driver` publishes on `node`: its templates rendered for the node, the pool's generation
    raised by `generation_bump` (restarts), the `unhealthy` devices tainted. Pure: new copies.
    `copiers`: one per template, from `cloud.copier` (a decision over many nodes makes them once)."""
    out = []
    for manifest in render_slice_templates(list(templates), node, copiers):
        spec = manifest["spec"]
        if spec["driver"] != driver:
            continue
        if generation_bump:
            spec["pool"] = {**spec["pool"], "generation": int(spec["pool"].get("generation", 1)) + generation_bump}
        for device in spec.get("devices") or []:
            if device.get("name") in unhealthy:
                taint = unhealthy_taint(driver)
                taints = [copy.deepcopy(t) for t in device.get("taints") or []]
                if taint not in taints:
                    device["taints"] = [*taints, taint]
        out.append(manifest)
    return out


def mark_unhealthy(view: ClusterState, node: str, driver: str, device: str) -> list[AnyEvent]:
    """Republish the slice of `node`'s `driver` pool that holds `device` with the device tainted (a
    fault injected from outside the scenario's `unhealthy` schedule, e.g. by a test)."""
    for slc in view.dra.slices.values():
        if slc.driver != driver or slc.pool != node or not any(d.id.device == device for d in slc.devices):
            continue
        manifest = copy.deepcopy(slc.manifest)
        for entry in manifest["spec"].get("devices") or []:
            if entry.get("name") == device and unhealthy_taint(driver) not in (entry.get("taints") or []):
                entry["taints"] = [*(entry.get("taints") or []), unhealthy_taint(driver)]
                return [ResourceSlicePublished(manifest=manifest)]
    return []


def _tainted(slc: Slice, driver: str) -> frozenset[str]:
    key = unhealthy_taint(driver)["key"]
    return frozenset(d.id.device for d in slc.devices if any(t.key == key for t in d.taints))


def shard_of(node: str, shards: int) -> int:
    """The drivers shard hosting a node's drivers: stable across processes and runs (not `hash()`)."""
    return zlib.crc32(node.encode()) % shards if shards > 1 else 0


@dataclass
class Drivers:
    name: str = "drivers"
    trigger: Trigger = "events"
    shard: int = 0  # this reactor's shard, of `shards`
    shards: int = 1
    # what the last decisions looked at: the next one looks only at the nodes whose inputs changed
    _cache: DirtyNodes = field(default_factory=DirtyNodes, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.shards < 1 or not 0 <= self.shard < self.shards:
            raise ValueError(f"drivers shard {self.shard} of {self.shards}: need 0 <= shard < shards")

    def react(self, view: ClusterState, now: int, rng: random.Random) -> Decision:
        if not any(g.resource_slices for g in view.node_groups.values()):
            return Decision(())  # no group has devices: nothing to publish (and no scan of every node)
        # Publishing for thousands of nodes at once makes ~100 objects per slice, none garbage; whether
        # the collector runs meanwhile is the process's policy, its runner's to set (pure code leaves
        # process-wide switches alone: tests/test_layering.py).
        events: list[AnyEvent] = []
        wake: list[int] = []
        copiers: dict[str, list[Any]] = {}  # group -> a copier per slice template, made when first needed
        faults = driver_faults(view) if view.faults else {}
        cache = self._cache
        for name in cache.dirty(view, now, {node for node, _ in faults}):  # the nodes whose inputs changed
            node = view.nodes[name]
            if self.shards > 1 and shard_of(node.name, self.shards) != self.shard:
                continue  # another shard's node
            group = view.node_groups.get(node.group)
            if group is None or not group.resource_slices or node.ready_t < 0:
                continue  # no devices, or not Ready yet: its plugins have not started
            specs = {d.name: d for d in group.drivers}
            mine: list[AnyEvent] = []
            wakes: list[int] = []
            read: list[str] = []
            for driver in drivers_of(group.resource_slices):
                mine.extend(self._driver(view, group, node, driver, specs.get(driver), now, wakes, copiers,
                                         faults.get((node.name, driver)), read))
            cache.looked(name, read, wakes, bool(mine))
            events.extend(mine)
        first = cache.next_wake()
        if first is not None:
            wake.append(first)
        if view.dra.binding:  # devices that pods wait on in PreBind: their binding conditions (device_binding.py)
            events.extend(binding_events(view, now, wake, self._hosts, mark_unhealthy))
        return Decision(tuple(events), min(wake) if wake else None)

    def _hosts(self, node: str) -> bool:
        return self.shards == 1 or shard_of(node, self.shards) == self.shard

    @staticmethod
    def _driver(view: ClusterState, group: NodeGroupState, node: NodeState, driver: str, spec: DriverSpec | None,
                now: int, wake: list[int], copiers: dict[str, list[Any]],
                faults: DriverFaults | None = None, read: list[str] | None = None) -> list[AnyEvent]:
        due = node.ready_t + node.publish_delay_ms.get(driver, 0)
        if faults is not None:
            wake.extend(faults.wakes(now))
            if faults.down(now):
                return []  # a driver-crash: the plugin is not running
        at = faults.due if faults is not None else _on_time
        published = at(due)
        if now < published:
            wake.append(published)
            return []
        bump = 0
        unhealthy: set[str] = set()
        healed: set[str] = set()
        if spec is not None:
            if spec.restart_after_ms >= 0:
                restart = at(published + spec.restart_after_ms)
                if now >= restart:
                    bump = 1
                else:
                    wake.append(restart)
            for fault in spec.unhealthy:
                if now >= at(published + fault.after_ms):
                    unhealthy.add(fault.device)
                else:
                    wake.append(at(published + fault.after_ms))
        removed: set[str] = set()
        changed: dict[str, dict[str, dict[str, object]]] = {}
        if faults is not None:
            bump += faults.restarts(now, due)
            unhealthy |= faults.unhealthy(now)
            healed = faults.healed(now) - unhealthy
            bump += faults.republishes(now)  # a driver-republish: devices removed or changed (driver_faults.py)
            removed, changed = faults.device_edits(now)
        templates = [t for t in group.resource_slices if t["spec"]["driver"] == driver]
        if read is not None:  # the slices this answer depends on (drivers_cache.py)
            read.extend(slice_name(node.name, driver, i) for i in range(len(templates)))
        stale = [i for i, template in enumerate(templates)
                 if not _as_wanted(view.dra.slices.get(slice_name(node.name, driver, i)), template, driver, bump,
                                   unhealthy - removed, healed)]  # (a removed device has no taint to show)
        if not stale:
            return []  # the common case, decided without rendering anything
        if group.name not in copiers:
            copiers[group.name] = [copier(t) for t in group.resource_slices]
        rendered = driver_slices(group.resource_slices, node.name, driver, bump, frozenset(unhealthy),
                                 copiers[group.name])
        if removed or changed:
            edit_devices(rendered, removed, changed)
        return [ResourceSlicePublished(manifest=rendered[i]) for i in stale]


def edit_devices(manifests: list[dict[str, Any]], removed: AbstractSet[str],
                 changed: dict[str, dict[str, dict[str, object]]]) -> None:
    """A republished pool's devices as a driver-republish fault wants them (in place: fresh renders): the
    `removed` ones left out, the `changed` ones with their attributes/capacity entries replaced."""
    for manifest in manifests:
        spec = manifest["spec"]
        devices = [d for d in spec.get("devices") or [] if str(d.get("name")) not in removed]
        for device in devices:
            for part, values in changed.get(str(device.get("name")), {}).items():
                device[part] = {**(device.get(part) or {}), **copy.deepcopy(values)}
        spec["devices"] = devices


def _on_time(t: int) -> int:
    return t


def _as_wanted(have: Slice | None, template: dict[str, Any], driver: str, bump: int, unhealthy: set[str],
               healed: AbstractSet[str] = frozenset()) -> bool:
    """Whether a published slice is what the driver wants now: the generation, at least the devices it
    reports unhealthy tainted (taints set by `mark_unhealthy` stay: a device does not heal by itself), and
    none of the devices `healed` (a device-unhealthy fault ended) tainted."""
    if have is None or have.generation != int(template["spec"]["pool"].get("generation", 1)) + bump:
        return False
    names = {str(d.get("name")) for d in template["spec"].get("devices") or []}
    tainted = _tainted(have, driver)
    return tainted >= unhealthy & names and not tainted & healed
