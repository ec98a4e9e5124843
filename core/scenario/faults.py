"""A scenario's `spec.faults`: faults injected at a time, as external inputs of the run.

Each fault becomes a `FaultInjected` record at its time (core/run/inputs.py), like an arrival: the log
holds it, so a replay reproduces it, a what-if keeps it and `dralab shrink` can remove it. Who acts on
it depends on its kind (`KINDS` below says what each kind targets and takes):

- cluster faults, written into the cluster by the chaos reactor (core/controllers/chaos.py): `node-fail`
  (the node NotReady), `node-taint` (a taint added);
- device faults, acted on by the device drivers (core/controllers/drivers.py): `driver-crash` (a node's
  driver stops, then restarts and republishes), `driver-slow` (it publishes late), `device-unhealthy`
  (a device tainted), `device-binding` (a device's binding conditions: `outcome` `never` set, the
  default, or `fail`: its bindingFailureCondition True);
- `device-taint`: a DeviceTaintRule (core/dra/taint_rules.py) on the devices `driver`/`pool`/`device` select,
  with `taint` (a device taint: effect NoSchedule, NoExecute), named `rule` (default `device-taint-<n>`), created
  by the chaos reactor at `at` and deleted after `for`;
- cloud faults, acted on by the cloud (core/controllers/cloud.py): `cloud-stockout` (no capacity for the
  group), `quota-cut` (the group's quota lowered), `partial-fulfilment` (only a fraction of each request
  delivered);
- runtime faults, acted on by whoever runs the reactors (the simulator, replay/simulation/sim.py; the live driver):
  `reactor-kill`, `reactor-pause`, `partition` (the reactor sees nothing, then catches up), `stale-view`
  (it decides on a view `lag` records old), `delay` (each delivery `delay` late), `duplicate`
  (deliveries twice), `clock-skew` (its clock `skew` off), `swizzle` (FoundationDB's: pause the
  `reactors`, one every `step`, then resume them in another order), `redis-restart` (live only),
  `foreign-writer` (live only: `entries` junk entries appended to the run's stream by a stranger, in
  `form` `auto-id` (`XADD * p junk`), `no-payload` (at the run's next offset, without the payload
  field) or `both`: the bus sets them aside, docs/delivery.md "Foreign entries").

The target is one field (`node`, `group` or `reactor`) and lands in the event's `target`; the other
fields land in its `params`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..kube.durations import format_duration
from ..kube.fields import (
    FieldError,
    check_fields,
    expect_duration,
    expect_enum,
    expect_int,
    expect_list,
    expect_map,
    expect_number,
    expect_str,
    label_value_error,
)
from ..kube.limits import MAX_NODE_COUNT

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TAINT = ("key", "value", "effect")
MAX_FAULTS = 100_000
MAX_LAG = 1_000_000


class KindSpec(msgspec.Struct, frozen=True):
    target: str  # the field naming what it hits: node | group | reactor | "" (none)
    required: tuple[str, ...] = ()  # other fields it needs
    optional: tuple[str, ...] = ()
    who: str = "chaos"  # who acts on it: chaos | drivers | cloud | runtime


KINDS: dict[str, KindSpec] = {
    "node-fail": KindSpec("node"),
    "node-taint": KindSpec("node", ("taint",)),
    "driver-crash": KindSpec("node", ("driver",), who="drivers"),
    "driver-slow": KindSpec("node", ("driver", "delay"), who="drivers"),
    "device-unhealthy": KindSpec("node", ("driver", "device"), who="drivers"),
    # a device's binding conditions (KEP-5007): never set, or failed (core/controllers/device_binding.py)
    "device-binding": KindSpec("node", ("driver", "device"), ("outcome",), who="drivers"),
    # a DeviceTaintRule created at `at` and deleted after `for` (core/dra/taint_rules.py, the chaos reactor)
    "device-taint": KindSpec("", ("taint",), ("driver", "pool", "device", "rule")),
    "cloud-stockout": KindSpec("group", who="cloud"),
    "quota-cut": KindSpec("group", ("quota",), who="cloud"),
    "partial-fulfilment": KindSpec("group", ("fraction",), who="cloud"),
    "reactor-kill": KindSpec("reactor", who="runtime"),
    "reactor-pause": KindSpec("reactor", who="runtime"),
    "partition": KindSpec("reactor", who="runtime"),
    "stale-view": KindSpec("reactor", ("lag",), who="runtime"),
    "delay": KindSpec("reactor", ("delay",), who="runtime"),
    "duplicate": KindSpec("reactor", who="runtime"),
    "clock-skew": KindSpec("reactor", ("skew",), who="runtime"),
    "swizzle": KindSpec("", ("reactors", "step"), who="runtime"),
    "redis-restart": KindSpec("", who="runtime"),
    "foreign-writer": KindSpec("", ("entries",), ("form",), who="runtime"),
    # a misbehaving cloud (core/controllers/cloud_ops.py): deletions asked while in force fail or take `delay`
    "deletion-failure": KindSpec("group", who="cloud"),
    "deletion-delay": KindSpec("group", ("delay",), who="cloud"),
    # the cloud reclaims a (spot) node: notice at `at`, gone `notice` later (default 2 min: AWS's)
    "spot-preemption": KindSpec("node", (), ("notice",), who="cloud"),
    # a driver republishes its pool with devices removed or changed, generation + 1 (core/cluster/driver_faults.py)
    "driver-republish": KindSpec("node", ("driver",), ("remove", "change"), who="drivers"),
}
# zone scope: a stockout or a quota cut of one zone of the group (core/cluster/cloud_faults.py)
KINDS["cloud-stockout"] = KindSpec("group", (), ("zone",), who="cloud")
KINDS["quota-cut"] = KindSpec("group", ("quota",), ("zone",), who="cloud")
BUS_KINDS = frozenset({"redis-restart", "foreign-writer"})  # live only: they act on the run's Redis
# only in a scenario's spec.faults: a random chaos schedule (replay/simulation/chaos.py) does not draw them (a
# device-taint needs a taint and a release that serves DeviceTaintRules)
SCENARIO_ONLY_KINDS = frozenset({"device-taint"})
# the misbehaving cloud's kinds are scenario-only too: `dralab chaos` schedules stay as they were
SCENARIO_ONLY_KINDS |= frozenset({"deletion-failure", "deletion-delay", "spot-preemption", "driver-republish"})
FOREIGN_FORMS = ("both", "auto-id", "no-payload")
MAX_FOREIGN_ENTRIES = 1000
BINDING_OUTCOMES = ("never", "fail")  # a device-binding fault's `outcome` (default never)
FAULT_KINDS = tuple(KINDS)
TARGETS = ("node", "group", "reactor")
PARAMS = ("taint", "driver", "pool", "rule", "device", "delay", "quota", "fraction", "lag", "skew", "reactors", "step",
          "entries", "form", "outcome", "zone", "notice", "remove", "change")
_FAULT = ("at", "kind", "for", *TARGETS, *PARAMS)


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    at_ms: int
    kind: str
    target: str  # the node, group or reactor it hits ("" for swizzle, redis-restart, foreign-writer)
    for_ms: int | None = None  # None: it never ends
    params: dict[str, Any] = msgspec.field(default_factory=dict)


def _path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_faults(value: object, duration_ms: int, path: str = "spec.faults") -> list[Fault]:
    """The faults in time order (faults at the same time keep their file order)."""
    if value is None:
        return []
    items = expect_list(value, path)
    if len(items) > MAX_FAULTS:
        raise FieldError(path, f"at most {MAX_FAULTS} faults, got {len(items)}")
    faults = [check_fault(item, duration_ms, f"{path}[{i}]") for i, item in enumerate(items)]
    faults.sort(key=lambda f: f.at_ms)
    return faults


def check_fault(item: object, duration_ms: int, path: str) -> Fault:
    m = expect_map(item, path)
    check_fields(m, path, _FAULT, required=("at", "kind"))
    at_ms = expect_duration(m["at"], _path(path, "at"))
    if at_ms > duration_ms:
        raise FieldError(_path(path, "at"), f"must be <= spec.duration ({format_duration(duration_ms)}), "
                                            f"got {format_duration(at_ms)}")
    kind = expect_enum(m["kind"], _path(path, "kind"), FAULT_KINDS)
    spec = KINDS[kind]
    for name in (*TARGETS, *PARAMS):
        if m.get(name) is None:
            if name == spec.target or name in spec.required:
                raise FieldError(_path(path, name), f"required for a {kind} fault")
        elif name != spec.target and name not in spec.required and name not in spec.optional:
            raise FieldError(_path(path, name), f"a {kind} fault takes no {name}")
    target = expect_str(m[spec.target], _path(path, spec.target), nonempty=True) if spec.target else ""
    for_ms = None if m.get("for") is None else expect_duration(m["for"], _path(path, "for"), positive=True)
    params = {name: _param(name, m[name], _path(path, name)) for name in PARAMS if m.get(name) is not None}
    return Fault(at_ms=at_ms, kind=kind, target=target, for_ms=for_ms, params=params)


def _param(name: str, value: object, path: str) -> Any:
    if name == "taint":
        return _taint(value, path)
    if name in ("driver", "device", "pool", "rule"):
        return expect_str(value, path, nonempty=True)
    if name in ("delay", "skew", "step"):
        return expect_duration(value, path)  # ms
    if name == "quota":
        return expect_int(value, path, minimum=0, maximum=MAX_NODE_COUNT)
    if name == "lag":
        return expect_int(value, path, minimum=1, maximum=MAX_LAG)  # records
    if name == "entries":
        return expect_int(value, path, minimum=1, maximum=MAX_FOREIGN_ENTRIES)
    if name == "form":
        return expect_enum(value, path, FOREIGN_FORMS)
    if name == "outcome":
        return expect_enum(value, path, BINDING_OUTCOMES)
    if name == "zone":
        return _zone(value, path)
    if name == "notice":
        return expect_duration(value, path, positive=True)  # ms
    if name == "remove":
        return _device_names(value, path)
    if name == "change":
        return _device_changes(value, path)
    if name == "fraction":
        fraction = expect_number(value, path, minimum=0.0)
        if fraction > 1:
            raise FieldError(path, f"a fraction of each request, from 0 to 1, got {fraction}")
        return fraction
    reactors = [expect_str(r, f"{path}[{i}]", nonempty=True) for i, r in enumerate(expect_list(value, path))]
    if not reactors:
        raise FieldError(path, "name at least one reactor")
    return reactors


def _taint(value: object, path: str) -> dict[str, str]:
    m = expect_map(value, path)
    check_fields(m, path, _TAINT, required=("key", "effect"))
    taint = {"key": expect_str(m["key"], _path(path, "key"), nonempty=True)}
    if m.get("value") is not None:
        taint["value"] = expect_str(m["value"], _path(path, "value"))
    taint["effect"] = expect_enum(m["effect"], _path(path, "effect"), TAINT_EFFECTS)
    return taint


def _zone(value: object, path: str) -> str:
    zone = expect_str(value, path, nonempty=True)
    error = label_value_error(zone)
    if error is not None:
        raise FieldError(path, error)
    return zone


def _device_names(value: object, path: str) -> list[str]:
    names = [expect_str(d, f"{path}[{i}]", nonempty=True) for i, d in enumerate(expect_list(value, path))]
    if not names:
        raise FieldError(path, "name at least one device")
    return names


_CHANGE = ("attributes", "capacity")


def _device_changes(value: object, path: str) -> dict[str, dict[str, dict[str, Any]]]:
    """device -> {attributes: {name: attribute}, capacity: {name: capacity}}, merged into the device as
    republished (resource.k8s.io/v1 shapes: an attribute is `{int|string|bool|version: v}`, a capacity
    `{value: quantity}`; checked again as a slice when published)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for device, change in expect_map(value, path).items():
        d_path = _path(path, str(device))
        m = expect_map(change, d_path)
        check_fields(m, d_path, _CHANGE)
        out[str(device)] = {k: dict(expect_map(m[k], _path(d_path, k))) for k in _CHANGE if m.get(k) is not None}
    if not out:
        raise FieldError(path, "change at least one device")
    return out
