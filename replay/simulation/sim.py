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
from typing import Any

from dralab.core.checks.invariants import Violation
from dralab.core.checks.log_check import RunChecks
from dralab.core.engine.contract import Reactor, decide, expectations
from dralab.core.log.events import Record, RunStarted, encode_record
from dralab.core.run.config import build_reactors, run_config
from dralab.core.run.inputs import scenario_inputs
from dralab.core.scenario.load import Scenario
from dralab.core.state.cluster import ClusterState
from dralab.replay.logs.gc_policy import collector_paused

from .sim_faults import RuntimeFaults, runtime_fault_inputs
from .sim_faults import SimulationStuck as SimulationStuck  # the simulator's error, raised by both settle loops

NEVER = 2**62
MAX_ROUNDS_PER_INSTANT = 10_000


@dataclass
class SimResult:
    entries: list[tuple[int, bytes]]
    state: ClusterState
    violations: list[Violation]
    conflicts: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0  # decisions given twice (a `duplicate` fault) whose second copy was a no-op


class Simulator:
    """Either from a scenario (`Simulator(scenario, seed)`) or from recorded external inputs
    (`Simulator.from_inputs`): what-if replays and shrinking feed a log's inputs, possibly edited,
    through the reactors its (possibly changed) `RunStarted` config describes."""

    def __init__(self, scenario: Scenario | None, seed: int, *, check_invariants: bool = True,
                 inputs: list[Record] | None = None, duration_ms: int | None = None,
                 liveness_bound_ms: int | None = None) -> None:
        """`liveness_bound_ms`: check liveness too, as the run goes (else `check_records` over the log)."""
        self.scenario = scenario
        self.seed = seed
        if inputs is None:
            assert scenario is not None, "a scenario or its inputs"
            inputs = scenario_inputs(scenario, seed)
        self.inputs = inputs
        if duration_ms is None:
            duration_ms = scenario.duration_ms if scenario is not None else 0
        self.duration_ms = int(duration_ms)
        self.reactors: list[Reactor] = build_reactors(run_config(scenario) if scenario is not None
                                                      else config_of(inputs))
        self.state = ClusterState()
        self.entries: list[tuple[int, bytes]] = []
        self.monitor = RunChecks(liveness_bound_ms) if check_invariants else None
        self.order_rng = random.Random(f"dralab-sim/{seed}")
        self.conflicts = 0
        self.decisions = {r.name: 0 for r in self.reactors}
        self.seen = {r.name: -1 for r in self.reactors}
        self.wake = {r.name: 0 for r in self.reactors}
        # Runtime faults (pauses, stale views, skewed clocks...: replay/simulation/sim_faults.py) take their own,
        # slower loop; a run without them keeps this module's loop, so its log is unchanged.
        self.runtime = RuntimeFaults(self, config_of(inputs)) if runtime_fault_inputs(inputs) else None

    @classmethod
    def from_inputs(cls, inputs: list[Record], seed: int, duration_ms: int, *,
                    check_invariants: bool = True) -> Simulator:
        """`inputs` in time order, the first holding `RunStarted` (its config builds the reactors)."""
        return cls(None, seed, check_invariants=check_invariants, inputs=inputs, duration_ms=duration_ms)

    def append(self, record: Record) -> int:
        offset = len(self.entries) + 1
        self.entries.append((offset, encode_record(record)))
        if self.monitor is not None:
            self.monitor.before(offset, record, self.state)
        self.state.apply(offset, record)
        if self.monitor is not None:
            self.monitor.after(offset, record, self.state)
        return offset

    def _due(self, reactor: Reactor, now: int) -> bool:
        changed = reactor.trigger == "events" and self.state.offset > self.seen[reactor.name]
        return changed or self.wake[reactor.name] <= now

    def _settle(self, now: int) -> None:
        """Run reactors at `now` until none is due (a fixpoint)."""
        for _ in range(MAX_ROUNDS_PER_INSTANT):
            due = [r for r in self.reactors if self._due(r, now)]
            if not due:
                return
            proposals = []
            with collector_paused():  # decisions make objects that live on (replay/logs/gc_policy.py)
                for reactor in due:  # all on the same view, as concurrent actors would
                    record, wake = decide(reactor, self.state, now, self.seed)
                    self.seen[reactor.name] = self.state.offset
                    self.wake[reactor.name] = NEVER if wake is None else wake
                    if record is not None:
                        proposals.append((reactor, record, expectations(record, self.state)))
            self.order_rng.shuffle(proposals)
            for reactor, record, expect in proposals:
                if all(self.state.version(k) == v for k, v in expect.items()):
                    self.append(record)
                    self.decisions[reactor.name] += 1
                else:
                    self.conflicts += 1
                    self.wake[reactor.name] = now  # lost the race: decide again on the fresh view
        raise SimulationStuck(f"reactors still busy after {MAX_ROUNDS_PER_INSTANT} rounds at t={now} ms")

    def run(self, progress: Callable[[int, int], None] | None = None) -> SimResult:
        duration = self.duration_ms
        next_input = 0
        now = 0
        while True:
            while next_input < len(self.inputs) and self.inputs[next_input].t <= now:
                self.append(self.inputs[next_input])
                next_input += 1
            if self.runtime is None:
                self._settle(now)
            else:
                self.runtime.settle(now, MAX_ROUNDS_PER_INSTANT)
            if progress is not None:
                progress(now, duration)
            upcoming = self.inputs[next_input].t if next_input < len(self.inputs) else NEVER
            wake = min(self.wake.values()) if self.runtime is None else self.runtime.next_time(now)
            next_t = min(upcoming, wake)
            if next_t > duration:
                break
            now = max(now, next_t)
        if self.monitor is not None:
            self.monitor.finish(self.state)
        violations = self.monitor.violations if self.monitor is not None else []
        duplicates = self.runtime.duplicates if self.runtime is not None else 0
        return SimResult(self.entries, self.state, violations, self.conflicts, self.decisions, duplicates)


def config_of(inputs: list[Record]) -> dict[str, Any]:
    """The run configuration recorded in the inputs' `RunStarted` (the first event of the first record)."""
    first = inputs[0].events[0] if inputs and inputs[0].events else None
    if not isinstance(first, RunStarted):
        raise ValueError("the inputs do not start with RunStarted")
    return dict(first.config)


def simulate(scenario: Scenario, seed: int) -> SimResult:
    return Simulator(scenario, seed).run()
