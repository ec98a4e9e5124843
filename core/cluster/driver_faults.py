"""The device faults of `spec.faults` (core/scenario/faults.py), as the drivers reactor sees them.

The drivers reactor (core/controllers/drivers.py) is level-based: from fixed times (the node's Ready time,
the drawn publish delay, the driver settings) it computes what each slice should look like now. The
faults on one node's driver only move those times or add to what is wanted, so the reactor stays a
function of its view (`view.faults`) and `now`:

- `driver-slow` (`delay`): a publication due at a time the fault is in force comes `delay` later (the
  longest delay of the slow faults in force then; a delayed publication is not delayed again);
- `driver-crash`: while the driver is down (from the fault's start until its end, plus a slow fault's
  delay at that end) it publishes nothing new: not its first slices, not a restart, not a device
  taint. At the end it restarts and republishes its pool with generation + 1 (as `restartAfter`
  does), once per crash that ended after the driver was due to publish. What it had published stays
  published meanwhile: upstream's kubelet deletes a driver's ResourceSlices when no plugin of that
  driver has been connected for `defaultWipingDelay` = 30 s (kubernetes/kubernetes pkg/kubelet/cm/dra/
  manager.go; `DRAPluginManager.sync` and `wipeResourceSlices` in pkg/kubelet/cm/dra/plugin/
  dra_plugin_manager.go), but the log has no slice deletion event yet, so dralab models a crash as one
  shorter than that grace period: the allocator keeps using the stale slices, and a pod placed on them
  would wait in NodePrepareResources upstream (not modelled either);
- `device-unhealthy` (`device`): the device is tainted `<driver>/unhealthy` (NoSchedule), as the
  driver's `unhealthy` setting does, while the fault is in force; at its end the slice is republished
  (same generation) without the taint, unless the driver's own `unhealthy` list still wants it.

- `driver-republish` (`remove`, `change`): the driver republishes its pool (as published at the fault's start,
  delayed by a slow fault) with generation + 1, the `remove`d devices gone and the `change`d ones with the
  given attributes/capacity merged in; at the fault's end it republishes the original set, generation + 1
  again. Claims allocated on a device that vanished stay allocated, as upstream (core/dra/pools.py has
  the allocator's side; docs/chaos.md what kube-scheduler and the kubelet do per release).

A fault is in force at `now` when `start_ms <= now` and (`until_ms < 0` or `now < until_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..state.cluster import ClusterState
from ..state.objects import FaultState
from .cloud_faults import is_active

DRIVER_KINDS = ("driver-crash", "driver-slow", "device-unhealthy", "driver-republish")


@dataclass
class DriverFaults:
    """The device faults on one node's driver, in fault order."""

    faults: list[FaultState] = field(default_factory=list)

    def due(self, t: int) -> int:
        """When a publication due at `t` happens: `delay` later if a driver-slow is in force at `t`."""
        delays = [int(f.params.get("delay", 0)) for f in self.faults if f.kind == "driver-slow" and is_active(f, t)]
        return t + max(delays) if delays else t

    def _restart_at(self, crash: FaultState) -> int:
        """When a crashed driver is back (-1: never)."""
        return -1 if crash.until_ms < 0 else self.due(crash.until_ms)

    def down(self, now: int) -> bool:
        """Whether a crash holds the driver down at `now`."""
        for f in self.faults:
            if f.kind == "driver-crash" and f.start_ms <= now:
                back = self._restart_at(f)
                if back < 0 or now < back:
                    return True
        return False

    def restarts(self, now: int, due: int) -> int:
        """How many crashes the driver is back from at `now` that ended after it was `due` to publish
        first (each one a restart: the pool's generation + 1)."""
        return sum(1 for f in self.faults if f.kind == "driver-crash" and f.until_ms > due
                   and 0 <= self._restart_at(f) <= now)

    def unhealthy(self, now: int) -> set[str]:
        """The devices a device-unhealthy in force (as published) at `now` wants tainted."""
        return {str(f.params.get("device")) for f in self.faults if f.kind == "device-unhealthy"
                and self.due(f.start_ms) <= now and (f.until_ms < 0 or now < self.due(f.until_ms))}

    def healed(self, now: int) -> set[str]:
        """The devices of device-unhealthy faults that have ended (as published) by `now`."""
        return {str(f.params.get("device")) for f in self.faults if f.kind == "device-unhealthy"
                and f.until_ms >= 0 and self.due(f.until_ms) <= now}

    def republishes(self, now: int) -> int:
        """Generation bumps of driver-republish faults by `now`: one when each starts, one when it ends."""
        bumps = 0
        for f in self.faults:
            if f.kind == "driver-republish":
                bumps += (self.due(f.start_ms) <= now) + (f.until_ms >= 0 and self.due(f.until_ms) <= now)
        return bumps

    def device_edits(self, now: int) -> tuple[set[str], dict[str, dict[str, dict[str, object]]]]:
        """The devices removed and the changes merged into devices by driver-republish faults in force (as
        published) at `now`, in fault order (a later fault's change wins)."""
        removed: set[str] = set()
        changed: dict[str, dict[str, dict[str, object]]] = {}
        for f in self.faults:
            if f.kind == "driver-republish" and self.due(f.start_ms) <= now and \
                    (f.until_ms < 0 or now < self.due(f.until_ms)):
                removed.update(str(d) for d in f.params.get("remove") or ())
                for device, change in (f.params.get("change") or {}).items():
                    for part, values in change.items():
                        changed.setdefault(str(device), {}).setdefault(part, {}).update(values)
        return removed, changed

    def wakes(self, now: int) -> list[int]:
        """The times after `now` when what the driver wants may change because of a fault."""
        times = []
        for f in self.faults:
            if f.kind == "driver-crash":
                times.append(self._restart_at(f))
            elif f.kind in ("device-unhealthy", "driver-republish"):
                times += [self.due(f.start_ms), -1 if f.until_ms < 0 else self.due(f.until_ms)]
        return [t for t in times if t > now]


def driver_faults(view: ClusterState) -> dict[tuple[str, str], DriverFaults]:
    """The device faults of the view by (node, driver): empty when there are none (the common case).
    A fault on a node that did not exist when it started is left out: it changes nothing, as the chaos
    reactor's `note` says (docs/scenario-format.md#faults), even if a node of that name comes later."""
    out: dict[tuple[str, str], DriverFaults] = {}
    for fault in view.faults.values():
        node = view.nodes.get(fault.target)
        if fault.kind in DRIVER_KINDS and node is not None and node.created_t <= fault.start_ms:
            out.setdefault((fault.target, str(fault.params.get("driver"))), DriverFaults()).faults.append(fault)
    return out
