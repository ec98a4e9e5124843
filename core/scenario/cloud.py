"""The cloud's and the drivers' settings of a node group in a scenario (``spec.nodeGroups[]``).

How the cloud answers scale-ups (``zones``, ``quota``, ``stock``, ``failureRate``), how long a new node
stays NotReady after it registers (``notReadyFor``) and how its DRA drivers behave (``drivers``). They
are checked here, with the field's path in every error, and kept in :class:`CloudSettings`; see
docs/scenario-format.md for the meaning and the defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ..kube.durations import format_duration
from ..kube.fields import (
    FieldError,
    check_fields,
    expect_duration,
    expect_int,
    expect_list,
    expect_map,
    expect_number,
    expect_str,
    index,
    join,
    label_value_error,
)
from ..kube.limits import MAX_NODE_COUNT
from ..log.events import DeviceBindingRule, DriverSpec, StockWindow, UnhealthyDevice
from ..log.events_cloud import NodeGroupCloudDefined
from .cloud_ops import OPS_FIELDS, check_cloud_ops
from .device_binding import binding_rules

CLOUD_FIELDS = ("zones", "quota", "stock", "failureRate", "notReadyFor", "drivers", *OPS_FIELDS)
_STOCK = ("from", "until", "available")
_DRIVER = ("name", "publishDelay", "restartAfter", "unhealthy", "bindingConditions")


class CloudSettings(msgspec.Struct, frozen=True, kw_only=True):
    zones: tuple[str, ...] = ()
    quota: int = -1  # -1: no quota
    stock: tuple[StockWindow, ...] = ()
    failure_rate: float = 0.0
    not_ready_ms: int = 0
    drivers: tuple[DriverSpec, ...] = ()
    binding: tuple[DeviceBindingRule, ...] = ()
    ops: NodeGroupCloudDefined | None = None  # deletions, retried stockouts, never Ready, zone quotas (cloud_ops.py)


def check_cloud(m: dict[str, Any], path: str, slices: list[dict[str, Any]],
                delay: Callable[[object, str], tuple[int, int]]) -> CloudSettings:
    """The cloud settings of node group ``m`` at ``path`` (its checked slice templates are ``slices``;
    ``delay`` reads a duration or ``{min, max}`` as ``provisionDelay`` does)."""
    zones = _zones(m.get("zones"), join(path, "zones"))
    return CloudSettings(
        zones=zones,
        quota=-1 if m.get("quota") is None else expect_int(m["quota"], join(path, "quota"), minimum=0,
                                                                            maximum=MAX_NODE_COUNT),
        stock=_stock(m.get("stock"), join(path, "stock")),
        failure_rate=_rate(m.get("failureRate"), join(path, "failureRate")),
        not_ready_ms=0 if m.get("notReadyFor") is None else expect_duration(m["notReadyFor"],
                                                                            join(path, "notReadyFor")),
        drivers=_drivers(m.get("drivers"), join(path, "drivers"), slices, delay),
        binding=binding_rules(m.get("drivers"), join(path, "drivers"), slices),  # device_binding.py
        ops=check_cloud_ops(m, path, zones, delay),
    )


def _zones(value: object, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    zones: list[str] = []
    for i, item in enumerate(expect_list(value, path)):
        z_path = index(path, i)
        zone = expect_str(item, z_path, nonempty=True)
        error = label_value_error(zone)
        if error is not None:
            raise FieldError(z_path, error)
        if zone in zones:
            raise FieldError(z_path, f"duplicate zone `{zone}`")
        zones.append(zone)
    return tuple(zones)


def _rate(value: object, path: str) -> float:
    if value is None:
        return 0.0
    rate = expect_number(value, path, minimum=0)
    if rate > 1:
        raise FieldError(path, f"must be a probability between 0 and 1, got {value}")
    return rate


def _stock(value: object, path: str) -> tuple[StockWindow, ...]:
    if value is None:
        return ()
    windows = []
    for i, item in enumerate(expect_list(value, path)):
        w_path = index(path, i)
        w = expect_map(item, w_path)
        check_fields(w, w_path, _STOCK, required=("available",))
        start = 0 if w.get("from") is None else expect_duration(w["from"], join(w_path, "from"))
        until = -1 if w.get("until") is None else expect_duration(w["until"], join(w_path, "until"))
        if 0 <= until <= start:
            raise FieldError(join(w_path, "until"),
                             f"must be after from ({format_duration(start)}), got {format_duration(until)}")
        available = expect_int(w["available"], join(w_path, "available"), minimum=0,
                               maximum=MAX_NODE_COUNT)
        windows.append(StockWindow(from_ms=start, until_ms=until, available=available))
    return tuple(windows)


def _drivers(value: object, path: str, slices: list[dict[str, Any]],
             delay: Callable[[object, str], tuple[int, int]]) -> tuple[DriverSpec, ...]:
    if value is None:
        return ()
    devices: dict[str, set[str]] = {}
    for template in slices:
        names = devices.setdefault(str(template["spec"]["driver"]), set())
        names.update(str(d.get("name")) for d in template["spec"].get("devices") or [])
    specs: list[DriverSpec] = []
    for i, item in enumerate(expect_list(value, path)):
        d_path = index(path, i)
        d = expect_map(item, d_path)
        check_fields(d, d_path, _DRIVER, required=("name",))
        name = expect_str(d["name"], join(d_path, "name"), nonempty=True)
        if name not in devices:
            known = ", ".join(f"`{n}`" for n in devices) or "none"
            raise FieldError(join(d_path, "name"),
                             f"no `resourceSlices` of driver `{name}` in this node group (drivers: {known})")
        if any(s.name == name for s in specs):
            raise FieldError(join(d_path, "name"), f"duplicate driver `{name}`")
        restart = (-1 if d.get("restartAfter") is None
                   else expect_duration(d["restartAfter"], join(d_path, "restartAfter"), positive=True))
        specs.append(DriverSpec(name=name, publish_delay_ms=delay(d.get("publishDelay"), join(d_path, "publishDelay")),
                                restart_after_ms=restart,
                                unhealthy=_unhealthy(d.get("unhealthy"), join(d_path, "unhealthy"), devices[name])))
    return tuple(specs)


def _unhealthy(value: object, path: str, devices: set[str]) -> tuple[UnhealthyDevice, ...]:
    if value is None:
        return ()
    out = []
    for i, item in enumerate(expect_list(value, path)):
        u_path = index(path, i)
        u = expect_map(item, u_path)
        check_fields(u, u_path, ("device", "after"), required=("device", "after"))
        device = expect_str(u["device"], join(u_path, "device"), nonempty=True)
        if device not in devices:
            raise FieldError(join(u_path, "device"), f"no device `{device}` in this driver's resourceSlices")
        out.append(UnhealthyDevice(device=device, after_ms=expect_duration(u["after"], join(u_path, "after"))))
    return tuple(out)


def provision_delay(value: object, path: str) -> tuple[int, int]:
    """A group's `provisionDelay`: one duration, or `{min, max}` drawn per node (the scenario loader's)."""
    if value is None:
        return (0, 0)
    if isinstance(value, dict):
        m = expect_map(value, path)
        check_fields(m, path, ("min", "max"), required=("min", "max"))
        low = expect_duration(m["min"], join(path, "min"))
        high = expect_duration(m["max"], join(path, "max"))
        if high < low:
            raise FieldError(join(path, "max"), f"must be >= min ({format_duration(low)}), got {format_duration(high)}")
        return (low, high)
    delay = expect_duration(value, path)
    return (delay, delay)
