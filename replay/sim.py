"""The deterministic simulator: every reactor in one process, on virtual time.

Same reactors as the live system, same records, same log. Concurrency is modelled, not avoided:
all reactors due at an instant compute their decisions on the same view, as separate actors would,
and the simulator appends them in an order drawn from its own seeded random source, with the same
optimistic-concurrency check as the live log. A decision that lost the race is dropped and its
reactor runs again on the fresh view. A seed therefore fixes the log byte for byte.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from dralab.core.config import build_reactors, run_config
from dralab.core.events import Record, encode_record
from dralab.core.inputs import scenario_inputs
from dralab.core.invariants import InvariantMonitor, Violation
from dralab.core.reactor import Reactor, decide, expectations
from dralab.core.scenario import Scenario
from dralab.core.state import ClusterState

NEVER = 2**62
MAX_ROUNDS_PER_INSTANT = 10_000


class SimulationStuck(RuntimeError):
    """Reactors kept producing decisions at one instant: a livelock in the modelled system."""


@dataclass
class SimResult:
    entries: list[tuple[int, bytes]]
    state: ClusterState
    violations: list[Violation]
    conflicts: int = 0
    decisions: dict[str, int] = field(default_factory=dict)


class Simulator:
    def __init__(self, scenario: Scenario, seed: int, *, check_invariants: bool = True) -> None:
        self.scenario = scenario
        self.seed = seed
        self.inputs = scenario_inputs(scenario, seed)
        self.reactors: list[Reactor] = build_reactors(run_config(scenario))
        self.state = ClusterState()
        self.entries: list[tuple[int, bytes]] = []
        self.monitor = InvariantMonitor() if check_invariants else None
        self.order_rng = random.Random(f"dralab-sim/{seed}")
        self.conflicts = 0
        self.decisions = {r.name: 0 for r in self.reactors}
        self._seen = {r.name: -1 for r in self.reactors}
        self._wake = {r.name: 0 for r in self.reactors}

    def append(self, record: Record) -> int:
        offset = len(self.entries) + 1
        self.entries.append((offset, encode_record(record)))
        self.state.apply(offset, record)
        if self.monitor is not None:
            self.monitor.observe(self.state)
        return offset

    def _due(self, reactor: Reactor, now: int) -> bool:
        changed = reactor.trigger == "events" and self.state.offset > self._seen[reactor.name]
        return changed or self._wake[reactor.name] <= now

    def _settle(self, now: int) -> None:
        """Run reactors at `now` until none is due (a fixpoint)."""
        for _ in range(MAX_ROUNDS_PER_INSTANT):
            due = [r for r in self.reactors if self._due(r, now)]
            if not due:
                return
            proposals = []
            for reactor in due:  # all on the same view, as concurrent actors would
                record, wake = decide(reactor, self.state, now, self.seed)
                self._seen[reactor.name] = self.state.offset
                self._wake[reactor.name] = NEVER if wake is None else wake
                if record is not None:
                    proposals.append((reactor, record, expectations(record, self.state)))
            self.order_rng.shuffle(proposals)
            for reactor, record, expect in proposals:
                if all(self.state.version(k) == v for k, v in expect.items()):
                    self.append(record)
                    self.decisions[reactor.name] += 1
                else:
                    self.conflicts += 1
                    self._wake[reactor.name] = now  # lost the race: decide again on the fresh view
        raise SimulationStuck(f"reactors still busy after {MAX_ROUNDS_PER_INSTANT} rounds at t={now} ms")

    def run(self, progress: Callable[[int, int], None] | None = None) -> SimResult:
        duration = self.scenario.duration_ms
        next_input = 0
        now = 0
        while True:
            while next_input < len(self.inputs) and self.inputs[next_input].t <= now:
                self.append(self.inputs[next_input])
                next_input += 1
            self._settle(now)
            if progress is not None:
                progress(now, duration)
            upcoming = self.inputs[next_input].t if next_input < len(self.inputs) else NEVER
            next_t = min(upcoming, *self._wake.values())
            if next_t > duration:
                break
            now = max(now, next_t)
        violations = self.monitor.violations if self.monitor is not None else []
        return SimResult(self.entries, self.state, violations, self.conflicts, self.decisions)


def simulate(scenario: Scenario, seed: int) -> SimResult:
    return Simulator(scenario, seed).run()
