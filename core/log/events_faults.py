"""Events of injected faults (the tagged union and the codec are in :mod:`.events`)."""

from __future__ import annotations

from typing import Any

import msgspec

from .event_base import Event

# ---------------------------------------------------------------- faults


class FaultInjected(Event, tag="FaultInjected", frozen=True):
    """A fault the world injects (a scenario's `spec.faults`, or `dralab chaos`'s random schedule): an
    external input like an arrival, so replay reproduces it and shrink can remove it. It says what, on
    what and for how long; the `chaos` reactor (core/controllers/chaos.py) turns a cluster fault into the
    cluster's events when it starts and ends (`FaultApplied`). `fault` is its id, `fault/<n>`."""

    fault: str
    kind: str  # core/scenario_faults.KINDS (docs/scenario-format.md#faults)
    target: str  # what it hits: a node's name
    until_ms: int = -1  # cluster ms it ends (-1: never)
    params: dict[str, Any] = msgspec.field(default_factory=dict)  # per kind, e.g. node-taint's `taint`

    def touched(self) -> tuple[str, ...]:
        return (self.fault,)


class FaultApplied(Event, tag="FaultApplied", frozen=True):
    """The chaos reactor started (`phase` start) or ended (end) a fault: the same record carries the
    cluster events that do it (a node NotReady, a taint), none when the target is gone (`note` says)."""

    fault: str
    phase: str  # start | end
    note: str = ""

    def touched(self) -> tuple[str, ...]:
        return (self.fault,)

