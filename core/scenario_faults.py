"""A scenario's `spec.faults`: faults injected at a time, as external inputs of the run.

Each fault becomes a `FaultInjected` record at its time (core/inputs.py), like an arrival: the log
holds it, so a replay reproduces it, a what-if keeps it and `dralab shrink` can remove it. The chaos
reactor (core/reactors/chaos.py) writes its effects on the cluster when it starts and undoes them when
it ends. Kinds today (issue 8 adds more):

- `node-fail`: the node stops reporting Ready (`NodeNotReady`), and is Ready again after `for`;
- `node-taint`: the node gets `taint` (a v1 Taint: key, optional value, effect), removed after `for`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._fields import FieldError, check_fields, expect_duration, expect_enum, expect_list, expect_map, expect_str
from .durations import format_duration

FAULT_KINDS = ("node-fail", "node-taint")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_FAULT = ("at", "kind", "node", "for", "taint")
_TAINT = ("key", "value", "effect")
MAX_FAULTS = 100_000


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    at_ms: int
    kind: str
    target: str  # a node's name
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
    faults = []
    for i, item in enumerate(items):
        f_path = f"{path}[{i}]"
        m = expect_map(item, f_path)
        check_fields(m, f_path, _FAULT, required=("at", "kind", "node"))
        at_ms = expect_duration(m["at"], _path(f_path, "at"))
        if at_ms > duration_ms:
            raise FieldError(_path(f_path, "at"), f"must be <= spec.duration ({format_duration(duration_ms)}), "
                                                  f"got {format_duration(at_ms)}")
        kind = expect_enum(m["kind"], _path(f_path, "kind"), FAULT_KINDS)
        node = expect_str(m["node"], _path(f_path, "node"), nonempty=True)
        for_ms = None if m.get("for") is None else expect_duration(m["for"], _path(f_path, "for"), positive=True)
        params: dict[str, Any] = {}
        if kind == "node-taint":
            if m.get("taint") is None:
                raise FieldError(_path(f_path, "taint"), "required for a node-taint fault (key, effect, value)")
            params["taint"] = _taint(m["taint"], _path(f_path, "taint"))
        elif m.get("taint") is not None:
            raise FieldError(_path(f_path, "taint"), f"only a node-taint fault has a taint, not {kind}")
        faults.append(Fault(at_ms=at_ms, kind=kind, target=node, for_ms=for_ms, params=params))
    faults.sort(key=lambda f: f.at_ms)
    return faults


def _taint(value: object, path: str) -> dict[str, str]:
    m = expect_map(value, path)
    check_fields(m, path, _TAINT, required=("key", "effect"))
    taint = {"key": expect_str(m["key"], _path(path, "key"), nonempty=True)}
    if m.get("value") is not None:
        taint["value"] = expect_str(m["value"], _path(path, "value"))
    taint["effect"] = expect_enum(m["effect"], _path(path, "effect"), TAINT_EFFECTS)
    return taint
