"""Runtime faults read the same way by the simulator (replay/simulation/sim_faults.py) and by live actors and
drivers (actors/live_faults.py): which reactor a fault holds back, lags, delays, duplicates or skews at
an instant, and a swizzle's schedule. Pure functions of the faults folded from the log, the time and
the run's seed, so the simulator's replay and a live run read one fault alike."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from dralab.core.scenario.faults import BUS_KINDS, KINDS
from dralab.core.state.cluster import FaultState

from .cloud_faults import is_active

__all__ = ["Effect", "is_runtime", "runtime_effects", "swizzle_pauses", "is_active"]


def is_runtime(kind: str) -> bool:
    spec = KINDS.get(kind)
    return bool(spec is not None and spec.who == "runtime")


@dataclass
class Effect:
    """What the active runtime faults do to one reactor at one instant."""

    blocked: bool = False
    lag: int = 0  # records
    delay: int = 0  # ms
    skew: int = 0  # ms
    duplicate: bool = False


def swizzle_pauses(fault: FaultState, seed: int) -> list[tuple[str, int, int]]:
    """(reactor, paused from, paused until) of a swizzle: paused one every `step` in the listed order,
    resumed one every `step` in a seeded random order; the fault's end, if any, resumes them all."""
    names = [str(n) for n in fault.params.get("reactors") or []]
    step = int(fault.params.get("step") or 0)
    order = list(names)
    random.Random(f"dralab-swizzle/{seed}/{fault.fault}").shuffle(order)
    k = len(names)
    resume = {name: fault.start_ms + (k + j) * step for j, name in enumerate(order)}
    out = []
    for i, name in enumerate(names):
        start, end = fault.start_ms + i * step, resume[name]
        if fault.until_ms >= 0:
            start, end = min(start, fault.until_ms), min(end, fault.until_ms)
        out.append((name, start, end))
    return out


def runtime_effects(faults: list[FaultState], now: int,
                    swizzle: Callable[[FaultState], list[tuple[str, int, int]]]) -> dict[str, Effect]:
    """What the runtime `faults` active at `now` do to each reactor (by name): one definition for the
    simulator and for live actors (actors/live_faults.py), so both read a fault the same way.
    `swizzle` gives a swizzle fault's pauses (`swizzle_pauses`, cached by the caller)."""
    out: dict[str, Effect] = {}
    for fault in faults:
        if fault.kind == "swizzle":
            for name, start, end in swizzle(fault):
                if start <= now < end:
                    out.setdefault(name, Effect()).blocked = True
            continue
        if not is_active(fault, now) or fault.kind in BUS_KINDS:  # the bus's: nothing to a reactor
            continue
        e = out.setdefault(fault.target, Effect())
        if fault.kind in ("reactor-pause", "reactor-kill", "partition"):
            e.blocked = True
        elif fault.kind == "stale-view":
            e.lag = max(e.lag, int(fault.params["lag"]))
        elif fault.kind == "delay":
            e.delay = max(e.delay, int(fault.params["delay"]))
        elif fault.kind == "clock-skew":
            e.skew += int(fault.params["skew"])
        elif fault.kind == "duplicate":
            e.duplicate = True
    return out
