"""The emulated drivers' side of device binding conditions (KEP-5007): a fabric-attached device is attached
once the scheduler's PreBind waits on it, and its driver then writes the device's conditions in the claim's
`status.devices[]` (upstream: the driver's controller, with DRAResourceClaimDeviceStatus).

Per pod waiting in PreBind (`view.dra.binding`), per allocated device with `bindingConditions`, the rule of the
node group's `drivers[].bindingConditions` (core/scenario/device_binding.py; first rule naming the device, else
the driver's, else `ready` at once) says what happens `delay` after the wait began:
- `ready`: every binding condition of the device True (ClaimDeviceConditionSet, reason `Attached`);
- `fail`: the device's first bindingFailureCondition True (reason `AttachFailed`), and the device tainted
  `<driver>/unhealthy` (NoSchedule) in its slice, as a driver keeps the scheduler off a device it cannot
  attach (upstream leaves that to the driver: the scheduler only deallocates the claim);
- `never`: nothing; the scheduler's binding timeout ends the wait.
A `device-binding` fault (core/scenario/faults.py) in force on the device's node when the delay is over makes
the outcome its own (`never`, or `fail`).

Level-based like the rest of the drivers reactor: a function of the view and `now`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..cluster.cloud_faults import is_active
from ..log.events import AnyEvent, ClaimDeviceConditionSet, DeviceBindingRule
from ..state.cluster import ClusterState
from ..state.dra import device_ref

Taint = Callable[[ClusterState, str, str, str], list[AnyEvent]]  # drivers.mark_unhealthy


def rule_for(view: ClusterState, node: str, driver: str, device: str) -> DeviceBindingRule:
    """The rule of the node's group for one device (default: `ready` at once)."""
    state = view.nodes.get(node)
    rules = view.dra.binding_rules.get(state.group, ()) if state is not None else ()
    for rule in rules:
        if rule.driver == driver and rule.device in (device, ""):
            return rule
    return DeviceBindingRule(driver=driver)


def fault_outcome(view: ClusterState, node: str, driver: str, device: str, t: int) -> str | None:
    """The outcome a `device-binding` fault in force at `t` imposes on the device (None: no such fault)."""
    for fault in view.faults.values() if view.faults else ():
        if (fault.kind == "device-binding" and fault.target == node and fault.params.get("driver") == driver
                and fault.params.get("device") == device and is_active(fault, t)):
            return str(fault.params.get("outcome") or "never")
    return None


def binding_events(view: ClusterState, now: int, wake: list[int], mine: Callable[[str], bool],
                   taint: Taint) -> list[AnyEvent]:
    """The conditions the drivers write now for the devices pods wait on in PreBind; `wake` gets when the
    next are due. `mine`: whether this drivers shard hosts a node's drivers."""
    out: list[AnyEvent] = []
    for wait in view.dra.binding.values():
        if wait.node not in view.nodes or not mine(wait.node):
            continue  # the node (and its driver) is gone, or another shard's
        for key in wait.claims:
            state = view.dra.claims.get(key)
            if state is None or state.allocation is None:
                continue
            have = view.dra.device_conditions.get(key, {})
            for result in (state.allocation.get("devices") or {}).get("results") or []:
                if result.get("bindingConditions"):
                    out.extend(_device(view, key, result, wait.node, wait.since, now, wake, have, taint))
    return out


def _device(view: ClusterState, key: str, result: dict[str, Any], node: str, since: int, now: int,
            wake: list[int], have: dict[str, dict[str, tuple[str, int]]], taint: Taint) -> list[AnyEvent]:
    driver, pool, device = str(result.get("driver")), str(result.get("pool")), str(result.get("device"))
    rule = rule_for(view, node, driver, device)
    at = since + rule.delay_ms
    if now < at:
        wake.append(at)
        return []
    outcome = fault_outcome(view, node, driver, device, at) or rule.outcome
    conditions = have.get(device_ref(driver, pool, device), {})
    if outcome == "ready":
        return [ClaimDeviceConditionSet(claim=key, driver=driver, pool=pool, device=device, condition=kind,
                                        status="True", at=now, reason="Attached")
                for kind in result["bindingConditions"] if conditions.get(kind, ("", 0))[0] != "True"]
    failures = result.get("bindingFailureConditions") or []
    if outcome != "fail" or not failures or conditions.get(failures[0], ("", 0))[0] == "True":
        return []
    return [ClaimDeviceConditionSet(claim=key, driver=driver, pool=pool, device=device, condition=failures[0],
                                    status="True", at=now, reason="AttachFailed"), *taint(view, pool, driver, device)]
